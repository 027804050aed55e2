"""The OpenAI-compatible proxy (:mod:`kredenc.interfaces.proxy`) at ``/v1`` of the
server, so one process owns the store and serves the REST API, MCP and the proxy.

The routes are the proxy's own (:func:`~kredenc.interfaces.proxy.proxy_parts`), behind
the server's guard (which has already checked Host, Origin, the key and the declared
size) and sharing the server's per-tenant views. With no upstream configured
(``--upstream`` / the ``server_upstream`` setting) every ``/v1/...`` request answers
503 ``no_upstream``.

When the proxy starts (the server's lifespan, after the warm-up) it writes the recall
reflex's startup line for the store's namespace, so the first chat completions do not
each count the store's memories for it on their way upstream. (The server's lifespan
then freezes the warmed-up heap: ``app.py``.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial

import anyio
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from kredenc.interfaces.guard import error_response
from kredenc.interfaces.proxy import ProxyConfig, proxy_parts
from kredenc.interfaces.server.state import ServerState
from kredenc.recall.reflex import announce

METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


async def no_upstream(_request: Request) -> JSONResponse:
    return error_response(
        503,
        "no_upstream",
        "this server has no upstream chat model for /v1",
        "start kredenc serve with --upstream URL (or set server_upstream), e.g. "
        "--upstream http://127.0.0.1:8080/v1",
    )


def mount(app: FastAPI, state: ServerState) -> AbstractAsyncContextManager[None] | None:
    """Add the proxy's routes under ``/v1``; what holds its upstream client (and, when
    entered, announces the reflex)."""
    if not state.upstream:
        app.router.routes.append(Route("/v1/{path:path}", no_upstream, methods=METHODS))
        return None
    config = ProxyConfig(
        state.upstream,
        transport=state.config.proxy_transport,
        max_body_bytes=state.limits.max_body_bytes,
        file_turns=not state.kb.read_only,  # a read-only server recalls, files nothing
    )
    parts = proxy_parts(state.kb, config, view_of=state.view)
    app.router.routes.extend(parts.routes)

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with parts.running():
            kb = state.kb
            await anyio.to_thread.run_sync(partial(announce, kb.store, kb.namespace))
            yield

    return running()
