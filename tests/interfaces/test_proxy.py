"""``kredenc proxy`` on loopback, against a scripted OpenAI-compatible upstream.

The proxy runs for real (uvicorn in a thread, a real port); clients are httpx and the
OpenAI SDK. Pinned: recall lands in what the upstream receives; answers come back as
the upstream sent them (streamed chunk for chunk, in order); turns are filed after
the answer, off the response path (the answer never waits for a filing, which is held
by a gated embedder), in the order they were said, and before the proxy stops; other
routes pass through; an unreachable upstream is a 502 with the one JSON error shape.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.interfaces.proxy import ProxyConfig, running
from kredenc.testing.chat_server import (
    chat_route,
    chunk,
    models_route,
    sent_messages,
    sse_body,
)
from kredenc.testing.openai_server import LoopbackServer, Reply, Request
from recall.gated_embedder import WAIT, GatedEmbedder

REPLY = "You like jasmine tea."
QUESTION = "Which tea do I like?"
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}]
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def kb(open_store: Callable[..., Kredenc]) -> Iterator[Kredenc]:
    store = open_store()
    store.remember("The user likes jasmine tea in the morning.", kind="preference")
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def upstream() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        srv.route("POST", "/v1/chat/completions", chat_route(REPLY))
        srv.route("GET", "/v1/models", models_route())
        yield srv


@pytest.fixture
def proxy(kb: Kredenc, upstream: LoopbackServer) -> Iterator[str]:
    with running(kb, upstream.base_url) as base_url:
        yield base_url


def wait_for_turns(kb: Kredenc, session: str, n: int) -> list[tuple[str, str]]:
    deadline = time.monotonic() + 10
    while True:
        hits = kb.search("jasmine tea like", k=50, types=["turn"])
        got = sorted((h.meta["role"], h.text) for h in hits if h.meta.get("session") == session)
        if len(got) >= n or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def test_non_streaming(kb: Kredenc, upstream: LoopbackServer, proxy: str) -> None:
    response = httpx.post(
        proxy + "/chat/completions",
        json={"model": "m", "messages": MESSAGES},
        headers={"Authorization": "Bearer client-key", "X-Kredenc-Session": "p1"},
    )
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == REPLY
    assert response.headers["x-kredenc-session"] == "p1"
    assert response.headers["x-kredenc-recalled"] == "1"
    received = upstream.requests[-1]
    assert received.headers["authorization"] == "Bearer client-key"
    sent = sent_messages(received)
    assert sent[:-1] == MESSAGES
    assert sent[-1]["role"] == "system" and "jasmine tea" in sent[-1]["content"]
    assert wait_for_turns(kb, "p1", 2) == [("assistant", REPLY), ("user", QUESTION)]


def test_streaming_passes_chunks_through_in_order(
    kb: Kredenc, upstream: LoopbackServer, proxy: str
) -> None:
    pieces = ["You ", "like ", "jasmine ", "tea", "."]
    upstream.route("POST", "/v1/chat/completions", chat_route(REPLY, pieces))
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    with httpx.stream(
        "POST", proxy + "/chat/completions", json=body, headers={"X-Kredenc-Session": "p2"}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        received = b"".join(response.iter_raw())
    assert received == sse_body(pieces)  # byte for byte, in order
    assert sent_messages(upstream.requests[-1])[-1]["role"] == "system"
    assert wait_for_turns(kb, "p2", 2) == [("assistant", REPLY), ("user", QUESTION)]


#: The opening of a streamed reply that never ends: role, then two pieces of text.
CUT_SHORT = [chunk({"role": "assistant", "content": ""}), chunk({"content": "You like "})]
CUT_SHORT.append(chunk({"content": "jasmine"}))


def wait_for_history(kb: Kredenc, session: str, n: int) -> list[tuple[str, str]]:
    """The session's filed turns, (role, text) oldest first, once ``n`` are there."""
    deadline = time.monotonic() + 10
    while True:
        got = [(m["role"], m["content"]) for m in kb.session_history(session)]
        if len(got) >= n or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def test_a_reply_cut_short_by_the_upstream_ends_with_an_error_and_is_not_filed(
    kb: Kredenc, upstream: LoopbackServer, proxy: str
) -> None:
    """The upstream streams slowly, then drops the connection: the client gets what
    came, then an error event in the proxy's shape; only the user's turn is filed."""
    reply = Reply.stream(CUT_SHORT, pause=0.1, hang_up=True)
    upstream.route("POST", "/v1/chat/completions", lambda r: reply)
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    with httpx.stream(
        "POST", proxy + "/chat/completions", json=body, headers={"X-Kredenc-Session": "p-cut"}
    ) as response:
        assert response.status_code == 200
        received = b"".join(response.iter_raw())
    assert received.startswith(b"".join(CUT_SHORT))
    last = received[len(b"".join(CUT_SHORT)) :]
    assert last.startswith(b"data: ") and last.endswith(b"\n\n")
    error = json.loads(last[len(b"data: ") :])
    assert list(error) == ["error"] and list(error["error"]) == ["code", "message", "hint"]
    assert error["error"]["code"] == "upstream_cut_off"
    assert wait_for_history(kb, "p-cut", 2) == [("user", QUESTION)]


def test_a_whole_reply_cut_short_by_the_upstream_is_a_502_and_is_not_filed(
    kb: Kredenc, upstream: LoopbackServer, proxy: str
) -> None:
    """Not streamed: the upstream sends half its JSON body and drops the connection. The
    proxy's read of it raised out of the route (a bare 500); now it is the proxy's error,
    in its shape, and only the user's turn is filed."""
    half = [b'{"id": "c1", "object": "chat.completion", "choices": [{"index": 0, ']
    reply = Reply.stream(half, hang_up=True, content_type="application/json")
    upstream.route("POST", "/v1/chat/completions", lambda r: reply)
    body = {"model": "m", "messages": MESSAGES}
    r = httpx.post(proxy + "/chat/completions", json=body, headers={"X-Kredenc-Session": "p-half"})
    assert r.status_code == 502, r.text
    assert r.json()["error"]["code"] == "upstream_cut_off"
    assert wait_for_history(kb, "p-half", 1) == [("user", QUESTION)]


def test_the_openai_sdk_raises_on_a_cut_short_stream(upstream: LoopbackServer, proxy: str) -> None:
    openai = pytest.importorskip("openai")
    reply = Reply.stream(CUT_SHORT, hang_up=True)
    upstream.route("POST", "/v1/chat/completions", lambda r: reply)
    with openai.OpenAI(base_url=proxy, api_key="k", max_retries=0) as client:
        stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        with pytest.raises(openai.APIError, match="broke off"):
            for _ in stream:
                pass


def test_a_stream_that_ends_without_its_finish_is_not_filed_whole(
    kb: Kredenc, upstream: LoopbackServer, proxy: str
) -> None:
    """A body that ends cleanly but before a finish_reason or [DONE] is cut short too."""
    reply = Reply.stream(CUT_SHORT)
    upstream.route("POST", "/v1/chat/completions", lambda r: reply)
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    with httpx.stream(
        "POST", proxy + "/chat/completions", json=body, headers={"X-Kredenc-Session": "p-end"}
    ) as response:
        received = b"".join(response.iter_raw())
    assert b'"upstream_cut_off"' in received[len(b"".join(CUT_SHORT)) :]
    assert wait_for_history(kb, "p-end", 2) == [("user", QUESTION)]


def test_a_reply_the_client_walks_away_from_is_not_filed_whole(
    kb: Kredenc, upstream: LoopbackServer, proxy: str
) -> None:
    """The client disconnects mid-stream (curl --max-time): only the user's turn is filed."""
    pieces = [chunk({"content": f"word{i} "}) for i in range(30)]
    reply = Reply.stream([*CUT_SHORT, *pieces, chunk({}, finish="stop")], pause=0.1)
    upstream.route("POST", "/v1/chat/completions", lambda r: reply)
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    with httpx.stream(
        "POST", proxy + "/chat/completions", json=body, headers={"X-Kredenc-Session": "p-left"}
    ) as response:
        seen = b""
        for part in response.iter_raw():
            seen += part
            if b"jasmine" in seen:
                break  # leaves mid-answer: the connection is closed
    assert wait_for_history(kb, "p-left", 2) == [("user", QUESTION)]


def test_a_reply_that_finishes_without_done_is_filed(
    kb: Kredenc, upstream: LoopbackServer, proxy: str
) -> None:
    """A finish_reason ends the answer, with or without the [DONE] after it."""
    reply = Reply.stream([*CUT_SHORT, chunk({}, finish="stop")])
    upstream.route("POST", "/v1/chat/completions", lambda r: reply)
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    with httpx.stream(
        "POST", proxy + "/chat/completions", json=body, headers={"X-Kredenc-Session": "p-fin"}
    ) as response:
        received = b"".join(response.iter_raw())
    assert received == b"".join([*CUT_SHORT, chunk({}, finish="stop")])
    filed = wait_for_history(kb, "p-fin", 2)
    assert filed == [("user", QUESTION), ("assistant", "You like jasmine")]


def test_openai_sdk_through_the_proxy(kb: Kredenc, upstream: LoopbackServer, proxy: str) -> None:
    openai = pytest.importorskip("openai")
    with openai.OpenAI(base_url=proxy, api_key="k", max_retries=0) as client:
        stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream)
        models = client.models.list()
    assert text.strip() == REPLY
    assert [m.id for m in models.data] == ["scripted"]


def test_models_and_other_routes_pass_through(upstream: LoopbackServer, proxy: str) -> None:
    direct = httpx.get(upstream.base_url + "/models")
    via = httpx.get(proxy + "/models")
    assert (via.status_code, via.content) == (direct.status_code, direct.content)
    upstream.route("GET", "/v1/models/scripted", lambda r: Reply.json({"id": "scripted"}))
    assert httpx.get(proxy + "/models/scripted?x=1").json() == {"id": "scripted"}
    assert upstream.requests[-1].path == "/v1/models/scripted?x=1"
    missing = httpx.post(proxy + "/embeddings", json={"input": "x"})
    assert missing.status_code == 404  # the upstream's own answer
    assert missing.json()["error"]["type"] == "not_found"


def test_upstream_errors_pass_through_and_file_nothing(
    kb: Kredenc, upstream: LoopbackServer, proxy: str
) -> None:
    upstream.route(
        "POST", "/v1/chat/completions", lambda r: Reply.error(401, "bad key", "auth_error")
    )
    response = httpx.post(
        proxy + "/chat/completions",
        json={"model": "m", "messages": MESSAGES},
        headers={"X-Kredenc-Session": "p3"},
    )
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "bad key"
    time.sleep(0.2)
    assert wait_for_turns(kb, "p3", 0) == []


def test_a_body_without_messages_goes_to_the_upstream_as_is(
    upstream: LoopbackServer, proxy: str
) -> None:
    raw = b'{"model": "m",  "prompt": "x"}'
    response = httpx.post(proxy + "/chat/completions", content=raw, headers=JSON)
    assert response.status_code == 400  # the upstream's verdict
    assert upstream.requests[-1].body == raw


def test_upstream_down_is_a_502_with_the_json_error_shape(kb: Kredenc) -> None:
    with running(kb, "http://127.0.0.1:9/v1", timeout_s=5) as base_url:
        response = httpx.post(base_url + "/chat/completions", json={"messages": MESSAGES})
        models = httpx.get(base_url + "/models")
    assert response.status_code == 502
    body = response.json()
    assert list(body) == ["error"]
    assert list(body["error"]) == ["code", "message", "hint"]
    assert body["error"]["code"] == "upstream_unreachable"
    assert "127.0.0.1:9" in body["error"]["message"]
    assert models.status_code == 502 and models.json() == body


def test_upstream_timeout_is_a_504(kb: Kredenc, upstream: LoopbackServer) -> None:
    def slow(request: Request) -> Reply:
        return Reply.json({"choices": []}, delay=2.0)

    upstream.route("POST", "/v1/chat/completions", slow)
    with running(kb, upstream.base_url, timeout_s=0.3) as base_url:
        response = httpx.post(base_url + "/chat/completions", json={"messages": MESSAGES})
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"


def test_upstream_must_be_an_http_url() -> None:
    with pytest.raises(InvalidInput):
        ProxyConfig("ftp://example/v1")
    with pytest.raises(InvalidInput):
        ProxyConfig("localhost:8000")


def test_conversation_without_a_session_header(kb: Kredenc, proxy: str) -> None:
    from kredenc.recall.conversation import conversation_id

    response = httpx.post(proxy + "/chat/completions", json={"model": "m", "messages": MESSAGES})
    session = response.headers["x-kredenc-session"]
    assert session == conversation_id(MESSAGES)
    assert len(wait_for_turns(kb, session, 2)) == 2


def test_request_bytes_forwarded_unchanged_when_nothing_is_recalled(
    upstream: LoopbackServer, proxy: str
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "zebra quokka?"}]}
    raw = json.dumps(body, separators=(",", ":")).encode()
    response = httpx.post(proxy + "/chat/completions", content=raw, headers=JSON)
    assert response.headers["x-kredenc-recalled"] == "0"
    assert upstream.requests[-1].body == raw


def test_answers_carry_the_recall_time(proxy: str) -> None:
    response = httpx.post(proxy + "/chat/completions", json={"model": "m", "messages": MESSAGES})
    steps = {}
    for metric in response.headers["server-timing"].split(", "):
        name, _, duration = metric.partition(";dur=")
        steps[name] = float(duration)
    assert next(iter(steps)) == "recall" and 0 < steps["recall"] < 10_000
    # Its steps: the lexical leg, the dense leg and the embedding inside it.
    assert {"lexical", "dense", "embed"} <= set(steps)
    assert steps["embed"] <= steps["dense"] <= steps["recall"]


@pytest.fixture
def gated() -> GatedEmbedder:
    return GatedEmbedder(marker=REPLY)  # only the filing of the reply embeds REPLY


@pytest.fixture
def gated_kb(open_store: Callable[..., Kredenc], gated: GatedEmbedder) -> Iterator[Kredenc]:
    store = open_store(embedder=gated)
    store.remember("The user likes jasmine tea in the morning.", kind="preference")
    try:
        yield store
    finally:
        gated.gate.set()
        store.close()


@pytest.mark.parametrize("stream", [False, True])
def test_the_answer_does_not_wait_for_filing(
    gated_kb: Kredenc, gated: GatedEmbedder, upstream: LoopbackServer, stream: bool
) -> None:
    session = f"p-held-{stream}"
    body = {"model": "m", "messages": MESSAGES, "stream": stream}
    with running(gated_kb, upstream.base_url) as base_url, httpx.Client(timeout=5) as client:
        for _ in range(2):  # the second request too: the first one's filing is still held
            response = client.post(
                base_url + "/chat/completions", json=body, headers={"X-Kredenc-Session": session}
            )
            assert response.status_code == 200
            assert REPLY.split(maxsplit=1)[0] in response.text
            assert gated.entered.wait(WAIT)  # its filing has begun, and is held
        assert wait_for_turns(gated_kb, session, 0) == []  # nothing filed yet
        gated.gate.set()
        assert len(wait_for_turns(gated_kb, session, 4)) == 4


def test_shutdown_files_the_turns_still_waiting(
    gated_kb: Kredenc, gated: GatedEmbedder, upstream: LoopbackServer
) -> None:
    with running(gated_kb, upstream.base_url) as base_url:
        for session in ("p-late-1", "p-late-2"):
            response = httpx.post(
                base_url + "/chat/completions",
                json={"model": "m", "messages": MESSAGES},
                headers={"X-Kredenc-Session": session},
            )
            assert response.status_code == 200
        assert gated.entered.wait(WAIT)
        threading.Timer(0.3, gated.gate.set).start()
    # The proxy has stopped; both turns were filed before it did.
    assert len(wait_for_turns(gated_kb, "p-late-1", 2)) == 2
    assert len(wait_for_turns(gated_kb, "p-late-2", 2)) == 2


def test_a_sessions_turns_are_filed_in_the_order_they_were_said(
    kb: Kredenc, proxy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    prepare_turns = kb.prepare_turns  # the proxy's filer prepares, then writes in batches

    def observed(session_id: str, turns: Any, **kw: Any) -> list[dict[str, Any]]:
        order.append(turns[0]["content"])
        time.sleep(0.05)  # slower than the client, so later turns queue up
        return prepare_turns(session_id, turns, **kw)

    monkeypatch.setattr(kb, "prepare_turns", observed)
    questions = [f"Which tea do I like, take {i}?" for i in range(6)]
    with httpx.Client(timeout=5) as client:
        for q in questions:
            messages = [{"role": "user", "content": q}]
            response = client.post(
                proxy + "/chat/completions",
                json={"model": "m", "messages": messages},
                headers={"X-Kredenc-Session": "p-order"},
            )
            assert response.status_code == 200
    deadline = time.monotonic() + WAIT
    while len(order) < len(questions) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert order == questions
    assert len(wait_for_turns(kb, "p-order", 2 * len(questions))) == 2 * len(questions)
    hits = kb.search("which tea take", k=50, types=["turn"], mode="lexical")
    filed = [h for h in hits if h.meta.get("session") == "p-order" and h.meta["role"] == "user"]
    assert [h.text for h in sorted(filed, key=lambda h: h.offset)] == questions  # in order


def test_the_pure_python_stack_serves_too(
    kb: Kredenc, upstream: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without httptools and uvloop installed the proxy runs on h11 and asyncio."""
    from kredenc.interfaces import proxy as module

    monkeypatch.setattr(module, "server_stack", lambda: ("h11", "asyncio"))
    pieces = ["You ", "like ", "jasmine ", "tea", "."]
    upstream.route("POST", "/v1/chat/completions", chat_route(REPLY, pieces))
    with running(kb, upstream.base_url) as base_url:
        plain = httpx.post(
            base_url + "/chat/completions", json={"model": "m", "messages": MESSAGES}
        )
        body = {"model": "m", "messages": MESSAGES, "stream": True}
        with httpx.stream("POST", base_url + "/chat/completions", json=body) as response:
            streamed = b"".join(response.iter_raw())
    assert plain.json()["choices"][0]["message"]["content"] == REPLY
    assert streamed == sse_body(pieces)


def test_the_served_proxy_freezes_its_warmed_up_heap(kb: Kredenc, upstream: LoopbackServer) -> None:
    """``kredenc proxy`` moves what is alive after the warm-up out of the collector's
    reach (a full collection of the model's and libraries' objects took ~15 ms)."""
    import gc

    from kredenc.interfaces.proxy import ProxyServer

    assert gc.get_freeze_count() == 0
    try:
        with ProxyServer(kb, ProxyConfig(upstream.base_url), freeze_heap=True) as base_url:
            frozen = gc.get_freeze_count()
            response = httpx.post(
                base_url + "/chat/completions", json={"model": "m", "messages": MESSAGES}
            )
        assert response.status_code == 200
        assert frozen > 1000
    finally:
        gc.unfreeze()
