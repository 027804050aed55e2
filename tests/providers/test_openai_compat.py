"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest
from pydantic import SecretStr

from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.openai_compat import OpenAICompatClient, retry_after
from kredenc.testing.openai_server import LoopbackServer, Reply, Request

ECHO = ("POST", "/v1/echo")


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer({ECHO: lambda req: Reply.json({"got": req.json()})}) as srv:
        yield srv


def client(server: LoopbackServer, **options: object) -> OpenAICompatClient:
    options.setdefault("timeout", 5.0)
    options.setdefault("backoff_s", 0.01)
    return OpenAICompatClient(server.base_url, label="test endpoint", **options)  # type: ignore[arg-type]


def scripted(*replies: Reply) -> tuple[Callable[[Request], Reply], list[float]]:
    """A route answering ``replies`` in turn, then echoing; and when each request came."""
    queue = list(replies)
    arrivals: list[float] = []

    def handle(request: Request) -> Reply:
        arrivals.append(time.monotonic())
        return queue.pop(0) if queue else Reply.json({"got": request.json()})

    return handle, arrivals


def test_posts_json_and_sends_the_key_as_bearer(server: LoopbackServer) -> None:
    with client(server, api_key=SecretStr("sk-abc")) as http:
        assert http.post_json("/echo", {"a": 1}) == {"got": {"a": 1}}
    [request] = server.requests
    assert request.headers["authorization"] == "Bearer sk-abc"
    assert request.headers["content-type"] == "application/json"


def test_an_empty_key_sends_no_header(server: LoopbackServer) -> None:
    with client(server, api_key=SecretStr("")) as http:
        http.post_json("echo", {})
    assert "authorization" not in server.requests[0].headers


def test_a_503_is_retried_then_succeeds(server: LoopbackServer) -> None:
    route, arrivals = scripted(Reply.error(503, "warming up"))
    server.route(*ECHO, route)
    with client(server) as http:
        assert http.post_json("/echo", {"n": 1}) == {"got": {"n": 1}}
    assert len(arrivals) == 2


def test_retry_after_is_honoured(server: LoopbackServer) -> None:
    busy = Reply(429, b'{"error": {"message": "slow down"}}', headers={"Retry-After": "1"})
    route, arrivals = scripted(busy)
    server.route(*ECHO, route)
    with client(server) as http:  # its own backoff would wait 0.01 s
        http.post_json("/echo", {})
    assert len(arrivals) == 2 and arrivals[1] - arrivals[0] >= 0.95


def test_a_retry_after_past_the_bound_fails_at_once(server: LoopbackServer) -> None:
    busy = Reply(429, b'{"error": {"message": "quota"}}', headers={"Retry-After": "3600"})
    route, arrivals = scripted(busy, busy)
    server.route(*ECHO, route)
    started = time.monotonic()
    with client(server, max_wait_s=5.0) as http, pytest.raises(ProviderError) as info:
        http.post_json("/echo", {})
    assert time.monotonic() - started < 2.0 and len(arrivals) == 1
    assert "HTTP 429: quota" in info.value.message
    assert "3600 s" in info.value.hint


def test_a_400_is_not_retried(server: LoopbackServer) -> None:
    route, arrivals = scripted(Reply.error(400, "bad model", "invalid_request_error"))
    server.route(*ECHO, route)
    with client(server) as http, pytest.raises(ProviderError, match="HTTP 400: bad model"):
        http.post_json("/echo", {})
    assert len(arrivals) == 1


def test_a_gateway_error_is_retried_only_when_safe_to_repeat(server: LoopbackServer) -> None:
    route, arrivals = scripted(Reply.error(502, "upstream died"), Reply.error(504, "slow"))
    server.route(*ECHO, route)
    with client(server) as http:
        with pytest.raises(ProviderError, match="HTTP 502: upstream died"):
            http.post_json("/echo", {})  # maybe processed upstream: not sent again
        assert len(arrivals) == 1
        assert http.post_json("/echo", {"x": 2}, safe_to_repeat=True) == {"got": {"x": 2}}
    assert len(arrivals) == 3


def test_retries_run_out_with_the_count_in_the_message(server: LoopbackServer) -> None:
    route, arrivals = scripted(*[Reply.error(503, "overloaded")] * 5)
    server.route(*ECHO, route)
    with client(server, max_retries=2) as http, pytest.raises(ProviderError) as info:
        http.post_json("/echo", {}, safe_to_repeat=True)
    assert len(arrivals) == 3
    assert "HTTP 503: overloaded (after 3 tries)" in info.value.message


def test_a_timeout_is_mapped_with_the_hint_and_not_retried(server: LoopbackServer) -> None:
    route, arrivals = scripted(Reply(200, b"{}", delay=1.0))
    server.route(*ECHO, route)
    http = client(server, timeout=0.2, timeout_hint="raise the time limit")
    with http, pytest.raises(ProviderError) as info:
        http.post_json("/echo", {}, safe_to_repeat=True)
    assert info.value.message == f"test endpoint {server.base_url}/echo: no answer within 0.2 s"
    assert info.value.hint == "raise the time limit"
    assert len(arrivals) == 1


def test_a_closed_port_is_retried_then_says_so() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    http = OpenAICompatClient(f"http://127.0.0.1:{port}/v1", max_retries=1, backoff_s=0.01)
    with http, pytest.raises(ProviderError, match="cannot connect after 2 tries") as info:
        http.post_json("/embeddings", {})
    assert f"127.0.0.1:{port}/v1/embeddings" in info.value.message
    assert "server running" in info.value.hint


def test_the_key_is_never_in_a_message_or_repr(server: LoopbackServer) -> None:
    # A careless (or hostile) server echoes the credentials it was sent.
    def echo_auth(request: Request) -> Reply:
        return Reply.error(401, f"bad key: {request.headers.get('authorization')}")

    server.route(*ECHO, echo_auth)
    secret = "sk-live-0123456789"
    with client(server, api_key=secret) as http, pytest.raises(ProviderError) as info:
        http.post_json("/echo", {})
    assert server.requests[0].headers["authorization"] == f"Bearer {secret}"
    shown = str(info.value) + repr(http) + repr(vars(http))
    assert secret not in shown
    assert "bad key: Bearer ***" in info.value.message and info.value.hint == "check the API key"


def test_a_password_in_the_url_is_not_shown(server: LoopbackServer) -> None:
    url = server.base_url.replace("http://", "http://user:hunter2@")
    server.route(*ECHO, lambda _req: Reply.error(500, "boom"))
    with OpenAICompatClient(url, max_retries=0) as http, pytest.raises(ProviderError) as info:
        http.post_json("/echo", {})
    assert "hunter2" not in str(info.value) + repr(http)
    assert "http://***@127.0.0.1" in info.value.message


def test_files_are_sent_whole_again_on_a_retry(server: LoopbackServer, tmp_path: Path) -> None:
    queue = [Reply.error(503, "busy")]
    server.route("POST", "/v1/upload", lambda _req: queue.pop(0) if queue else Reply.json({}))
    audio = tmp_path / "a.wav"
    audio.write_bytes(b"RIFF" + bytes(range(256)) * 40)
    with client(server) as http, audio.open("rb") as handle:
        http.post("/upload", files={"file": ("a.wav", handle, "audio/wav")}, safe_to_repeat=True)
    first, second = server.requests
    assert audio.read_bytes() in first.body and audio.read_bytes() in second.body


def test_not_json_is_a_provider_error(server: LoopbackServer) -> None:
    server.route(*ECHO, lambda _req: Reply.raw("<html>proxy login</html>", 200, "text/html"))
    with client(server) as http, pytest.raises(ProviderError, match="not JSON") as info:
        http.post_json("/echo", {})
    assert "OpenAI-compatible" in info.value.hint


def test_a_closed_client_says_so(server: LoopbackServer) -> None:
    http = client(server)
    http.close()
    with pytest.raises(ProviderError, match="closed"):
        http.post_json("/echo", {})
    assert server.requests == []


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("127.0.0.1:8000/v1", "must start with http"),
        ("ftp://127.0.0.1/v1", "must start with http"),
        ("http:///v1", "no host"),
        ("http://127.0.0.1:8000/v1?key=1", "query"),
    ],
)
def test_bad_base_urls(url: str, problem: str) -> None:
    with pytest.raises(InvalidInput, match=problem):
        OpenAICompatClient(url)


def test_retry_after_values() -> None:
    assert retry_after("2") == 2.0
    assert retry_after(" 0.5 ") == 0.5
    assert retry_after(None) is None and retry_after("soon") is None
    assert retry_after("-4") == 0.0
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    seconds = retry_after(later)
    assert seconds is not None and 25 <= seconds <= 31


def test_stream_lines_yields_the_data_of_each_event_after_retrying_a_refusal(
    server: LoopbackServer,
) -> None:
    events = b'data: one\n\n: a comment\n\ndata: {"two": 2}\n\nevent: x\ndata: [DONE]\n\n'
    handle, _arrivals = scripted(Reply.error(503, "warming up"))
    stream = Reply.raw(events, content_type="text/event-stream")
    server.route(
        "POST", "/v1/stream", lambda req: handle(req) if len(server.requests) == 1 else stream
    )
    with client(server) as http:
        assert list(http.stream_lines("/stream", {"stream": True})) == [
            "one",
            '{"two": 2}',
            "[DONE]",
        ]
    assert len(server.requests) == 2


def test_stream_lines_maps_an_error_status_with_the_servers_message(
    server: LoopbackServer,
) -> None:
    server.route("POST", "/v1/stream", lambda _req: Reply.error(401, "bad key sk-secret"))
    with client(server, api_key="sk-secret") as http, pytest.raises(ProviderError) as info:
        http.stream_lines("/stream", {})
    assert "HTTP 401: bad key ***" in info.value.message and "sk-secret" not in str(info.value)
