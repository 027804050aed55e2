"""The server as one FastAPI application: :func:`create_app`.

Order of a request: the guard (Host, Origin, API key → tenant, declared size; see
:mod:`kredenc.interfaces.guard`), then the limits middleware (rate per key, streamed
body size), then a route. The routes are the routers of ``routes/`` (REST), the proxy
at ``/v1``, MCP at ``/mcp`` and the page at ``/``; each part has one ``mount(app,
state)`` that adds its routes and returns what it needs to run for the server's life
(an async context manager, or ``None``), entered in order by the lifespan.

In a process that is the server (its event loop on the main thread: ``kredenc serve``,
not a test's :class:`~kredenc.interfaces.server.run.ServerThread`) the lifespan then
freezes the warmed-up heap (:func:`~kredenc.interfaces.proxy.freeze_warm_heap`): a full
garbage collection of an unfrozen server stopped every request in flight for 80–530 ms
on a loaded 2-core machine (docs/benchmarks.md, the proxy's added latency).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
from fastapi import FastAPI

from kredenc import __version__
from kredenc.engine import Kredenc
from kredenc.interfaces.guard import Guard
from kredenc.interfaces.server import errors, routes
from kredenc.interfaces.server.state import ServerConfig, ServerState

log = logging.getLogger("kredenc.server")

#: Served without an API key (Host and Origin still checked): they reveal no data.
OPEN_PATHS = frozenset({"/health", "/", "/static/", "/favicon.ico"})


def create_app(
    kb: Kredenc, config: ServerConfig | None = None, *, freeze_heap: bool | None = None
) -> FastAPI:
    """The whole server over the open handle ``kb`` (which the caller closes).
    ``freeze_heap``: None freezes the warmed-up heap when the event loop runs on the
    main thread (the module doc)."""
    from kredenc.interfaces.proxy import freeze_warm_heap
    from kredenc.interfaces.server import mcp_http, page, proxy_mount
    from kredenc.recall.reflex import warm_up

    config = config or ServerConfig()
    state = ServerState(kb, config)
    parts: list[Any] = []

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        seconds = await anyio.to_thread.run_sync(warm_up, kb.store)
        log.info("recall warm-up took %.2f s", seconds)
        async with AsyncExitStack() as stack:
            for part in parts:
                if part is not None:
                    await stack.enter_async_context(part)
            freeze = freeze_heap
            if freeze is None:
                freeze = threading.current_thread() is threading.main_thread()
            if freeze:
                log.info("froze the warmed-up heap: %d objects", freeze_warm_heap())
            try:
                state.start_clock()
                yield
            finally:
                await anyio.to_thread.run_sync(state.close)

    app = FastAPI(
        title="kredenc",
        version=__version__,
        description="A local-first memory and retrieval engine for LLM agents.",
        lifespan=lifespan,
        responses=errors.COMMON_ERRORS,
        # FastAPI's /docs and /redoc pages load their scripts from a CDN: offline they
        # are blank, and nothing here may reach the internet. /openapi.json stays.
        docs_url=None,
        redoc_url=None,
    )
    app.state.kredenc = state
    errors.install(app)
    for router in routes.ROUTERS:
        app.include_router(router)
    parts.append(proxy_mount.mount(app, state))
    if config.mcp:
        parts.append(mcp_http.mount(app, state))
    if config.web:
        parts.append(page.mount(app, state))
    # Middleware runs outside in: the guard first, then the limits.
    from kredenc.interfaces.server.limits import Limiter

    app.add_middleware(Limiter, state=state)
    app.add_middleware(Guard, gate=state.gate, open_paths=OPEN_PATHS)
    return app
