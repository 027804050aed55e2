"""The OpenAI-compatible proxy at ``/v1`` of the server: the same process, store and
tenants as the REST routes. Without an upstream every /v1 route answers 503
``no_upstream`` naming ``--upstream``; with one, a chat completion carries the
tenant's memories upstream, never another tenant's, and its turns are filed in the
tenant's namespace (where REST sees them)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from kredenc.engine import Kredenc
from kredenc.interfaces.auth import KeyRing
from kredenc.interfaces.server.state import ServerConfig
from kredenc.testing.chat_server import chat_route, models_route, sent_messages
from kredenc.testing.openai_server import LoopbackServer

ErrorCheck = Callable[..., dict[str, Any]]
REPLY = "You like jasmine tea."


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        srv.route("POST", "/v1/chat/completions", chat_route(REPLY))
        srv.route("GET", "/v1/models", models_route())
        yield srv


@pytest.fixture(scope="module")
def served(start_server: Callable[..., Any], upstream: LoopbackServer) -> tuple[Any, str, str]:
    def setup(kb: Kredenc) -> None:
        kb.scoped("alpha").remember("The user likes jasmine tea in the morning.")
        kb.scoped("beta").remember("Beta's canary: the jasmine tea vault code is 4711.")

    served = start_server(ServerConfig(mcp=False, web=False, upstream=upstream.base_url), setup)
    keys = KeyRing(served.kb.home)
    return served, keys.add("alpha")[0], keys.add("beta")[0]


def test_no_upstream_is_503(
    start_server: Callable[..., Any], assert_error_shape: ErrorCheck
) -> None:
    served = start_server()
    with served.client() as c:
        for response in (
            c.post("/v1/chat/completions", json={"model": "m", "messages": []}),
            c.get("/v1/models"),
        ):
            detail = assert_error_shape(response, 503, "no_upstream")
            assert "--upstream" in detail["hint"] and "server_upstream" in detail["hint"]


def test_chat_recalls_the_tenants_memories(
    served: tuple[Any, str, str], upstream: LoopbackServer
) -> None:
    server, alpha, _ = served
    question = {"role": "user", "content": "Which jasmine tea do I like?"}
    with server.client(alpha) as c:
        response = c.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [question]},
            headers={"X-Kredenc-Session": "tea-1"},
        )
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["message"]["content"] == REPLY
        assert int(response.headers["x-kredenc-recalled"]) >= 1
        sent = sent_messages(upstream.requests[-1])
        assert "jasmine tea in the morning" in sent[-1]["content"]
        assert "4711" not in str(sent)
        assert "authorization" not in {k.lower() for k in upstream.requests[-1].headers}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # filed after the answer, off its path
            messages = c.get("/sessions/tea-1").json()["messages"]
            if len(messages) == 2:
                break
            time.sleep(0.05)
        assert [m["content"] for m in messages] == [question["content"], REPLY]
        assert c.get("/v1/models").json()["data"][0]["id"] == "scripted"


def test_chat_needs_a_key(served: tuple[Any, str, str], assert_error_shape: ErrorCheck) -> None:
    server, _, _ = served
    response = httpx.post(server.url + "/v1/chat/completions", json={"model": "m", "messages": []})
    assert_error_shape(response, 401, "unauthorized")


def test_a_streamed_body_past_the_limit_is_413_on_v1_too(
    start_server: Callable[..., Any], upstream: LoopbackServer, assert_error_shape: ErrorCheck
) -> None:
    config = ServerConfig(mcp=False, web=False, upstream=upstream.base_url, max_body_bytes=2048)
    served = start_server(config)
    before = len(upstream.requests)

    def chunks() -> Iterator[bytes]:
        yield b'{"model": "m", "messages": [{"role": "user", "content": "'
        for _ in range(8):
            yield b"x" * 1024
        yield b'"}]}'

    with served.client() as c:
        response = c.post(
            "/v1/chat/completions", content=chunks(), headers={"Content-Type": "application/json"}
        )
    assert_error_shape(response, 413, "body_too_large")
    assert len(upstream.requests) == before  # nothing went upstream


def _lifespan(kb: Kredenc, upstream: str | None, freeze_heap: bool | None) -> int:
    """Run the server's lifespan on this (the main) thread, as ``kredenc serve`` does;
    the objects frozen while it ran."""
    import asyncio
    import gc

    from kredenc.interfaces.server.app import create_app

    app = create_app(kb, ServerConfig(upstream=upstream), freeze_heap=freeze_heap)

    async def enter() -> int:
        async with app.router.lifespan_context(app):
            return gc.get_freeze_count()

    return asyncio.run(enter())


def test_the_mount_announces_the_reflex_at_startup(
    tmp_path: Any, upstream: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The reflex's startup line is written when the server starts, not by the first
    chat completions (each of which counted the store for it)."""
    import logging

    from kredenc.recall import reflex
    from kredenc.testing.embedders import HashEmbedder

    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        kb.remember("The deploy window is Tuesday.")
        with caplog.at_level(logging.INFO, logger="kredenc.recall"):
            _lifespan(kb, upstream.base_url, False)
        assert any("recall reflex online" in r.getMessage() for r in caplog.records)
        assert reflex._announced(kb.store, kb.namespace)


@pytest.mark.parametrize("proxied", [True, False], ids=["with an upstream", "REST only"])
def test_the_server_freezes_its_warmed_up_heap(
    tmp_path: Any, upstream: LoopbackServer, proxied: bool
) -> None:
    """``kredenc serve`` (its loop on the main thread) freezes the warmed-up heap, as
    ``kredenc proxy`` does, with or without an upstream: a full collection of the
    unfrozen server stopped the requests in flight."""
    import gc

    from kredenc.testing.embedders import HashEmbedder

    assert gc.get_freeze_count() == 0
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        target = upstream.base_url if proxied else None
        try:
            frozen = _lifespan(kb, target, None)
        finally:
            gc.unfreeze()
        assert frozen > 1000
        assert _lifespan(kb, target, False) == 0


def test_a_server_on_a_thread_leaves_the_heap_alone(
    served: tuple[Any, str, str], upstream: LoopbackServer
) -> None:
    import gc

    server, alpha, _ = served
    with server.client(alpha) as c:
        question = {"role": "user", "content": "Which tea?"}
        response = c.post("/v1/chat/completions", json={"model": "m", "messages": [question]})
    assert response.status_code == 200
    assert gc.get_freeze_count() == 0  # ServerThread: the loop is not on the main thread
