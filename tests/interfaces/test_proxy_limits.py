"""The proxy's limits (issue 13, finding 8): bodies, JSON depth, and text recall cannot read.

A body over ``proxy_max_body_bytes`` is refused with 413 before it is read (the
declared length) or as soon as it passes the limit (a chunked body); JSON nested
deeper than ``proxy_max_json_depth`` is a 400; a message holding text that is not
valid Unicode (a lone surrogate) goes to the upstream byte for byte, without recall
and without being filed, because the recall reflex never breaks a turn.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import httpx
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from kredenc.engine import Kredenc
from kredenc.interfaces.proxy import running
from kredenc.testing.chat_server import chat_route
from kredenc.testing.openai_server import LoopbackServer

LIMIT = 256 * 1024
MESSAGES = [{"role": "user", "content": "Which tea do I like?"}]


@pytest.fixture
def kb(open_store: Callable[..., Kredenc]) -> Iterator[Kredenc]:
    store = open_store(proxy_max_body_bytes=LIMIT, proxy_max_json_depth=32)
    store.remember("The user likes jasmine tea in the morning.", kind="preference")
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def upstream() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        srv.route("POST", "/v1/chat/completions", chat_route("Noted."))
        yield srv


@pytest.fixture
def proxy(kb: Kredenc, upstream: LoopbackServer) -> Iterator[str]:
    with running(kb, upstream.base_url) as base_url:
        yield base_url


def test_a_declared_oversized_body_is_refused_before_it_is_read(
    upstream: LoopbackServer, proxy: str
) -> None:
    """Headers claim a gigabyte and not one byte of it is sent: the answer comes anyway."""
    url = urlsplit(proxy)
    with socket.create_connection((url.hostname, url.port), timeout=5) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
        )
        answer = sock.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), head
    assert json.loads(body)["error"]["code"] == "body_too_large"
    assert upstream.requests == []


def test_a_chunked_body_is_cut_off_at_the_limit(upstream: LoopbackServer, proxy: str) -> None:
    def pieces() -> Iterator[bytes]:
        yield b'{"messages": [{"role": "user", "content": "'
        for _ in range(300):
            yield b"x" * 1024
        yield b'"}]}'

    for path in ("/chat/completions", "/embeddings"):
        response = httpx.post(
            proxy + path, content=pieces(), headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "body_too_large"
    assert upstream.requests == []


def test_a_body_at_the_limit_is_served(upstream: LoopbackServer, proxy: str) -> None:
    body = {"model": "m", "messages": MESSAGES, "pad": ""}
    raw = json.dumps(body).encode()
    body["pad"] = "x" * (LIMIT - len(raw))
    raw = json.dumps(body).encode()
    assert len(raw) == LIMIT
    response = httpx.post(
        proxy + "/chat/completions", content=raw, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 200


@pytest.mark.parametrize("depth", [33, 1500, 100_000])
def test_deep_json_is_a_400(upstream: LoopbackServer, proxy: str, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    raw = ('{"messages": [{"role": "user", "content": "hi", "x": ' + nested + "}]}").encode()
    response = httpx.post(
        proxy + "/chat/completions",
        content=raw,
        headers={"Content-Type": "application/json"},
    )
    assert len(raw) < LIMIT
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "json_too_deep" and "32" in error["message"]
    assert upstream.requests == []


def test_json_at_the_depth_limit_is_served(proxy: str) -> None:
    nested: object = []
    for _ in range(32 - 4):  # the body, messages, a message, the key: 4 levels
        nested = [nested]
    body = {"model": "m", "messages": [{"role": "user", "content": "hi", "x": nested}]}
    assert httpx.post(proxy + "/chat/completions", json=body).status_code == 200


@pytest.mark.parametrize("bad", ["\ud800", "tea \udfff time", "\udbff"])
def test_text_recall_cannot_read_is_forwarded_unchanged(
    kb: Kredenc, upstream: LoopbackServer, proxy: str, bad: str
) -> None:
    """A lone surrogate gave a 500 and the request was never forwarded."""
    body = {"model": "m", "messages": [{"role": "user", "content": f"Which jasmine tea? {bad}"}]}
    raw = json.dumps(body).encode()  # ASCII JSON: the surrogate as a \\u escape
    response = httpx.post(
        proxy + "/chat/completions",
        content=raw,
        headers={"Content-Type": "application/json", "X-Kredenc-Session": "s-bad"},
    )
    assert response.status_code == 200
    assert response.headers["x-kredenc-recalled"] == "0"
    assert upstream.requests[-1].body == raw
    time.sleep(0.3)  # nothing to file: the text cannot be stored as UTF-8
    assert not [h for h in kb.search("jasmine tea", k=20) if h.meta.get("session") == "s-bad"]


def test_a_streamed_request_with_bad_text_is_forwarded_too(
    upstream: LoopbackServer, proxy: str
) -> None:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "\ud800"}]}
    raw = json.dumps(body).encode()
    response = httpx.post(
        proxy + "/chat/completions", content=raw, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 200 and b"[DONE]" in response.content
    assert upstream.requests[-1].body == raw


@pytest.mark.parametrize("session", ["x" * 201, "tab\there"])
def test_a_bad_session_header_is_a_400(upstream: LoopbackServer, proxy: str, session: str) -> None:
    response = httpx.post(
        proxy + "/chat/completions",
        json={"model": "m", "messages": MESSAGES},
        headers={"X-Kredenc-Session": session},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_session"
    assert upstream.requests == []
