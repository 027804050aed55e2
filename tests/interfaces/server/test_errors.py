"""Every kind of error the server answers has the one shape
``{"error": {"code", "message", "hint"}}``: the guard's refusals (401, 403, 413
declared and streamed), an unknown route (404) or record (404), a wrong method (405),
a body that fails validation (422 ``invalid_request``) or the facade's checks (422
``invalid_input``), the rate limit (429 with ``Retry-After``) and a fault (500,
naming nothing inside the process)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from kredenc.interfaces.auth import KeyRing
from kredenc.interfaces.server.state import ServerConfig

ErrorCheck = Callable[..., dict[str, Any]]
MAX_BODY = 4096


@pytest.fixture(scope="module")
def keyed(start_server: Callable[..., Any]) -> tuple[Any, str]:
    served = start_server(ServerConfig(mcp=False, web=False, max_body_bytes=MAX_BODY))
    key, _ = KeyRing(served.kb.home).add("alpha")
    return served, key


@pytest.fixture
def client(keyed: tuple[Any, str]) -> Iterator[httpx.Client]:
    served, key = keyed
    with served.client(key) as c:
        yield c


def test_no_key_is_401(keyed: tuple[Any, str], assert_error_shape: ErrorCheck) -> None:
    served, _ = keyed
    response = httpx.get(served.url + "/stats")
    assert_error_shape(response, 401, "unauthorized")
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_foreign_host_is_403(client: httpx.Client, assert_error_shape: ErrorCheck) -> None:
    detail = assert_error_shape(
        client.get("/stats", headers={"Host": "evil.example"}), 403, "host_not_allowed"
    )
    assert "this server" in detail["message"]


def test_foreign_origin_is_403(client: httpx.Client, assert_error_shape: ErrorCheck) -> None:
    response = client.get("/stats", headers={"Origin": "https://evil.example"})
    assert_error_shape(response, 403, "origin_not_allowed")


def test_declared_body_too_large_is_413(
    client: httpx.Client, assert_error_shape: ErrorCheck
) -> None:
    response = client.post("/memories", json={"text": "x" * (MAX_BODY + 10)})
    assert_error_shape(response, 413, "body_too_large")


def test_streamed_body_too_large_is_413(
    client: httpx.Client, assert_error_shape: ErrorCheck
) -> None:
    sent: list[int] = []

    def chunks() -> Iterator[bytes]:
        yield b'{"text": "'
        for _ in range(64):
            sent.append(1)
            yield b"x" * 1024
        yield b'"}'

    response = client.post(
        "/memories", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert "content-length" not in response.request.headers
    assert_error_shape(response, 413, "body_too_large")


def test_unknown_route_is_404(client: httpx.Client, assert_error_shape: ErrorCheck) -> None:
    assert_error_shape(client.get("/no/such/route"), 404, "not_found")


def test_unknown_record_is_404(client: httpx.Client, assert_error_shape: ErrorCheck) -> None:
    assert_error_shape(client.get("/memories/m0000000000000000000"), 404, "not_found")


def test_wrong_method_is_405(client: httpx.Client, assert_error_shape: ErrorCheck) -> None:
    assert_error_shape(client.put("/memories", json={}), 405, "method_not_allowed")


def test_validation_is_422(client: httpx.Client, assert_error_shape: ErrorCheck) -> None:
    detail = assert_error_shape(client.post("/memories", json={}), 422, "invalid_request")
    assert "text" in detail["message"]


@pytest.mark.parametrize("body", [b"{not json", b"not json", b'{"text": "x"'])
def test_not_json_is_400_in_one_clear_line(
    client: httpx.Client, assert_error_shape: ErrorCheck, body: bytes
) -> None:
    """A day-one audit: a body that is not JSON answered 422 "0: JSON decode error" (the
    parser's position left over as a field name). It is a malformed body, like one
    too deep to parse: 400, saying so and where."""
    response = client.post("/memories", content=body, headers={"Content-Type": "application/json"})
    detail = assert_error_shape(response, 400, "bad_request")
    assert detail["message"].startswith("the body is not valid JSON: ")
    assert "position" in detail["message"] and "\n" not in detail["message"]
    assert "JSON" in detail["hint"]


def test_json_too_deep_to_parse_is_400(
    client: httpx.Client, assert_error_shape: ErrorCheck
) -> None:
    depth = 1500  # past the JSON parser's recursion limit, within the body limit
    body = '{"text": "x", "tags": ' + "[" * depth + "]" * depth + "}"
    response = client.post("/memories", content=body, headers={"Content-Type": "application/json"})
    assert_error_shape(response, 400, "bad_request")


def test_not_json_to_ingest_is_400_too(
    client: httpx.Client, assert_error_shape: ErrorCheck
) -> None:
    """POST /ingest parses its JSON itself: the same answer, naming line and column."""
    response = client.post(
        "/ingest", content=b"not json", headers={"Content-Type": "application/json"}
    )
    detail = assert_error_shape(response, 400, "bad_request")
    assert detail["message"].startswith("the body is not valid JSON: ")
    assert "at line 1 column" in detail["message"]


def test_a_broken_multipart_upload_is_400_with_an_upload_hint(
    client: httpx.Client, assert_error_shape: ErrorCheck
) -> None:
    """A day-one audit: a multipart body that cannot be parsed was told to "send the
    body as JSON no deeper than a few hundred levels"."""
    response = client.post(
        "/ingest",
        content=b"garbage",
        headers={"Content-Type": "multipart/form-data; boundary=zzz"},
    )
    detail = assert_error_shape(response, 400, "bad_request")
    assert detail["message"].startswith("the multipart body cannot be read")
    assert "deep" not in detail["hint"] and "levels" not in detail["hint"]
    assert "multipart/form-data" in detail["hint"] and "'files'" in detail["hint"]


def test_json_too_deep_keeps_its_depth_hint(
    client: httpx.Client, assert_error_shape: ErrorCheck
) -> None:
    body = '{"text": "x", "tags": ' + "[" * 1500 + "]" * 1500 + "}"
    response = client.post("/memories", content=body, headers={"Content-Type": "application/json"})
    assert "deep" in assert_error_shape(response, 400, "bad_request")["hint"]


def test_invalid_input_is_422(client: httpx.Client, assert_error_shape: ErrorCheck) -> None:
    detail = assert_error_shape(
        client.post("/memories", json={"text": "x", "kind": "bogus"}), 422, "invalid_input"
    )
    assert "bogus" in detail["message"]
    assert detail["hint"]


def test_limit_is_422(client: httpx.Client, assert_error_shape: ErrorCheck) -> None:
    detail = assert_error_shape(client.get("/search", params={"q": "x", "k": 5000}), 422)
    assert "k must be at most" in detail["message"]


def test_fault_is_500_naming_nothing_inside(
    keyed: tuple[Any, str],
    client: httpx.Client,
    monkeypatch: pytest.MonkeyPatch,
    assert_error_shape: ErrorCheck,
    caplog: pytest.LogCaptureFixture,
) -> None:
    served, _ = keyed
    view = served.kb.scoped("alpha")

    def broken(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("secret detail at /very/private/path")

    monkeypatch.setattr(type(view), "stats", broken)
    response = client.get("/stats")
    detail = assert_error_shape(response, 500, "internal_error")
    assert "secret" not in response.text and "private" not in response.text
    assert detail["hint"]


def test_rate_limit_is_429_with_retry_after(
    start_server: Callable[..., Any], assert_error_shape: ErrorCheck
) -> None:
    served = start_server(ServerConfig(mcp=False, web=False, rate_per_minute=3))
    with served.client() as c:
        statuses = [c.get("/stats").status_code for _ in range(3)]
        refused = c.get("/stats")
    assert statuses == [200, 200, 200]
    detail = assert_error_shape(refused, 429, "rate_limited")
    assert int(refused.headers["retry-after"]) >= 1
    assert "server_rate_per_minute" in detail["hint"]


def test_a_body_that_is_not_json_is_415_not_a_misleading_422(
    client: httpx.Client, assert_error_shape: Any
) -> None:
    """A day-one audit: POST /memories with a JSON text sent as text/plain (or a form,
    or no type) answered 422 "Input should be a valid dictionary"."""
    for headers in (
        {"Content-Type": "text/plain"},
        {"Content-Type": "application/x-www-form-urlencoded"},
        {},
    ):
        response = client.post("/memories", content=b'{"text": "x"}', headers=headers)
        error = assert_error_shape(response, 415, "unsupported_media_type")
        assert "application/json" in error["hint"]
    ok = client.post("/memories", json={"text": "sent as JSON"})
    assert ok.status_code in (200, 201)
