"""An OpenAI-compatible HTTP proxy that adds recall and filing: ``kredenc proxy``.

Any client that can change its base URL gets the recall reflex: point it at
``http://127.0.0.1:8766/v1`` and start ``kredenc proxy --upstream URL``, where URL is
the base URL the client used before (``https://api.openai.com/v1``, a local
llama.cpp or vLLM server's ``…/v1``). The proxy:

* ``POST /v1/chat/completions``: recalls (one system message appended at the tail),
  forwards the request, and returns the upstream's answer as it comes, streamed
  (server-sent events, chunk for chunk, in order) or not. After the answer has been
  sent, the call's user message(s) and the reply are filed as ``turn`` records.
* every other ``/v1/…`` route (``/v1/models`` among them) is passed through as is.
* an upstream that cannot be reached answers 502, one that times out 504, with the
  JSON error body ``{"error": {"code", "message", "hint"}}``; the upstream's own
  errors pass through unchanged.

Filing is off the response path: when the answer has been sent, the turn is handed to
a :class:`~kredenc.recall.filing.TurnFiler`, which files turns on its own thread in
the order they came (so a session's turns land in order) and files what is waiting
when the proxy shuts down. Answers to chat completions carry ``Server-Timing:
recall;dur=MS``, the milliseconds the recall added before the request went upstream,
followed by its steps (``lexical``, ``dense``, ``embed``, as they ran).

Headers pass through except hop-by-hop ones (the client's ``Authorization`` reaches
the upstream; the proxy keeps no key). The session is the ``X-Kredenc-Session``
header, else an id derived from the conversation's opening messages. Answers carry
``X-Kredenc-Session`` and ``X-Kredenc-Recalled`` (the number of memories injected).

The stack is Starlette on uvicorn, with httpx for the upstream: Starlette is what
FastAPI (planned for the REST API) builds on, so the two can later share one server;
uvicorn is its reference server; httpx is already a core dependency and streams both
ways. uvicorn parses HTTP with httptools and runs on uvloop where they are installed
(the ``proxy`` extra brings both; about 1 ms less per request than h11 on asyncio),
else on h11 and asyncio. Install with ``pip install 'kredenc[proxy]'``.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import httpx

from kredenc.errors import InvalidInput, MissingExtra
from kredenc.recall.budget import Budget
from kredenc.recall.conversation import conversation_id, new_turns
from kredenc.recall.filing import Reply, TurnFiler
from kredenc.recall.reflex import RecallResult, announce, warm_up

try:
    import anyio
    import uvicorn
    from starlette.applications import Starlette
    from starlette.background import BackgroundTask
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtra("kredenc proxy", "proxy") from exc

if TYPE_CHECKING:
    from kredenc.engine import Kredenc

log = logging.getLogger("kredenc.proxy")

DEFAULT_PORT = 8766
SESSION_HEADER = "x-kredenc-session"
# Not forwarded either way: hop-by-hop headers, and what the proxy sets itself.
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "content-encoding",
        "accept-encoding",
    }
)


@dataclass
class ProxyConfig:
    upstream: str
    timeout_s: float = 600.0
    budget: Budget | Mapping[str, Any] | None = None
    dry_run: bool | None = None
    time_budget_ms: float | None = None
    file_turns: bool = True
    transport: httpx.AsyncBaseTransport | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        url = httpx.URL(self.upstream)
        if url.scheme not in ("http", "https") or not url.host:
            raise InvalidInput(
                f"upstream must be an http(s) URL, not {self.upstream!r}",
                "pass the base URL your client used, e.g. https://api.openai.com/v1",
            )
        self.upstream = str(url).rstrip("/")


def error_response(status: int, code: str, message: str, hint: str) -> JSONResponse:
    """The one JSON error shape: ``{"error": {"code", "message", "hint"}}``."""
    return JSONResponse({"error": {"code": code, "message": message, "hint": hint}}, status)


def create_app(kb: Kredenc, config: ProxyConfig, *, freeze_heap: bool = False) -> Starlette:
    """The proxy as an ASGI app (served by :func:`serve` or :class:`ProxyServer`).

    ``freeze_heap``: after the warm-up, move everything alive to the garbage
    collector's permanent generation (``gc.freeze``): the model, the index and the
    libraries are never scanned again, so a full collection during a request costs
    well under a millisecond instead of ~15 ms. For a process that is only the proxy.
    """
    state: dict[str, httpx.AsyncClient] = {}
    filer = TurnFiler(kb)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        seconds = await anyio.to_thread.run_sync(warm_up, kb.store)
        log.info("recall warm-up took %.2f s", seconds)
        if freeze_heap:
            gc.collect()
            gc.freeze()
        announce(
            kb.store,
            kb.namespace,
            budget=config.budget,
            dry_run=config.dry_run,
            time_budget_ms=config.time_budget_ms,
        )
        log.info(
            "kredenc proxy forwards to %s (http=%s, loop=%s)", config.upstream, *server_stack()
        )
        async with httpx.AsyncClient(
            timeout=httpx.Timeout(config.timeout_s, connect=min(10.0, config.timeout_s)),
            transport=config.transport,
            follow_redirects=False,
        ) as client:
            state["client"] = client
            try:
                yield
            finally:
                # Connections are done: file what is still waiting before the store closes.
                await anyio.to_thread.run_sync(filer.close)

    async def send(request: Request, path: str, body: bytes) -> httpx.Response | JSONResponse:
        url = config.upstream + path
        if request.url.query:
            url += "?" + request.url.query
        upstream = state["client"].build_request(
            request.method, url, content=body, headers=_forward(request.headers.items())
        )
        upstream.headers["accept-encoding"] = "identity"  # relay bytes as they are
        try:
            return await state["client"].send(upstream, stream=True)
        except httpx.TimeoutException as exc:
            return error_response(
                504,
                "upstream_timeout",
                f"the upstream {config.upstream} did not answer in time ({type(exc).__name__})",
                "check the upstream server, or raise --timeout",
            )
        except httpx.TransportError as exc:
            return error_response(
                502,
                "upstream_unreachable",
                f"cannot reach the upstream {config.upstream}: {exc or type(exc).__name__}",
                "check that the upstream server is running and --upstream is its base URL",
            )

    async def chat(request: Request) -> Response:
        raw = await request.body()
        body = _json_object(raw)
        messages = body.get("messages") if body is not None else None
        if body is None or not isinstance(messages, list):
            return await relay(request, "/chat/completions", raw)  # the upstream's to judge
        session = request.headers.get(SESSION_HEADER) or conversation_id(messages)
        started = time.perf_counter()
        result: RecallResult = await anyio.to_thread.run_sync(
            partial(
                kb.recall,
                messages,
                session_id=session,
                budget=config.budget,
                dry_run=config.dry_run,
                time_budget_ms=config.time_budget_ms,
            )
        )
        recall_ms = (time.perf_counter() - started) * 1000
        if result.injected:
            raw = json.dumps({**body, "messages": result.messages}, ensure_ascii=False).encode()
        turns = new_turns(messages) if config.file_turns else []
        extra = {
            "X-Kredenc-Session": session,
            "X-Kredenc-Recalled": str(len(result.items)) if result.injected else "0",
            "Server-Timing": server_timing({"recall": recall_ms, **result.timings_ms}),
        }
        sent = await send(request, "/chat/completions", raw)
        if isinstance(sent, JSONResponse):
            return sent
        ok = 200 <= sent.status_code < 300
        headers = {**_forward(sent.headers.items()), **extra}
        if body.get("stream") and ok:
            reply = _SseText()

            async def chunks() -> AsyncIterator[bytes]:
                try:
                    async for chunk in sent.aiter_raw():
                        reply.feed(chunk)
                        yield chunk
                finally:
                    await sent.aclose()

            return StreamingResponse(
                chunks(),
                status_code=sent.status_code,
                headers=headers,
                background=_filing(filer, session, turns, reply.text),
            )
        data = await sent.aread()
        await sent.aclose()
        task = _filing(filer, session, turns, partial(_reply_text, data)) if ok else None
        return Response(data, sent.status_code, headers=headers, background=task)

    async def relay(request: Request, path: str, body: bytes | None = None) -> Response:
        if body is None:
            body = await request.body()
        sent = await send(request, path, body)
        if isinstance(sent, JSONResponse):
            return sent

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in sent.aiter_raw():
                    yield chunk
            finally:
                await sent.aclose()

        return StreamingResponse(
            chunks(), status_code=sent.status_code, headers=_forward(sent.headers.items())
        )

    async def passthrough(request: Request) -> Response:
        return await relay(request, "/" + request.path_params["path"])

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/{path:path}", passthrough, methods=methods),
        ],
        lifespan=lifespan,
    )


def _filing(
    filer: TurnFiler, session: str, turns: list[dict[str, str]], reply: Reply
) -> BackgroundTask | None:
    """Hand the turn to the filer once the answer has been sent (Starlette runs the
    task after the response's last byte). Queueing is all that happens on the event
    loop: no thread hop, no embedding on the way to the next request."""
    if not turns:
        return None

    async def hand_over() -> None:
        filer.submit(session, turns, reply)

    return BackgroundTask(hand_over)


def server_timing(steps: dict[str, float]) -> str:
    """A ``Server-Timing`` header value: ``name;dur=MS`` for each step, in order."""
    return ", ".join(f"{name};dur={ms:.2f}" for name, ms in steps.items())


def _forward(headers: Any) -> dict[str, str]:
    return {k: v for k, v in headers if k.lower() not in _HOP}


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _reply_text(data: bytes) -> str | None:
    body = _json_object(data)
    choices = body.get("choices") if body else None
    if not isinstance(choices, list):
        return None
    for choice in choices:
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            message = choice.get("message") or {}
            content = message.get("content") if isinstance(message, dict) else None
            return content if isinstance(content, str) else None
    return None


class _SseText:
    """Collects the first choice's ``delta.content`` from a chat completion SSE stream."""

    def __init__(self) -> None:
        self._buffer = b""
        self._parts: list[str] = []

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        event = _json_object(line[5:].strip())
        if event is None:
            return  # "[DONE]" or a partial/foreign event
        for choice in event.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                delta = choice.get("delta") or {}
                content = delta.get("content") if isinstance(delta, dict) else None
                if isinstance(content, str):
                    self._parts.append(content)

    def text(self) -> str:
        if self._buffer.strip():
            self._line(self._buffer.strip())
            self._buffer = b""
        return "".join(self._parts)


def server_stack() -> tuple[str, str]:
    """uvicorn's HTTP parser and event loop: httptools and uvloop where installed (C,
    about 1 ms less per proxied request on a loaded 2-core machine), else the pure
    Python h11 and asyncio."""
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    return http, loop


def _uvicorn_config(app: Starlette, host: str, port: int, log_level: str) -> uvicorn.Config:
    http, loop = server_stack()
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=http,
        ws="none",  # nothing optional loaded for websockets
        loop=loop,
        lifespan="on",
        log_level=log_level,
        access_log=False,
        # The upstream's Server and Date headers pass through instead.
        server_header=False,
        date_header=False,
    )


def serve(kb: Kredenc, config: ProxyConfig, *, host: str, port: int) -> None:
    """Run the proxy in the foreground until interrupted."""
    app = create_app(kb, config, freeze_heap=True)
    server = uvicorn.Server(_uvicorn_config(app, host, port, "info"))
    log.info("kredenc proxy listening on http://%s:%d/v1", host, port)
    server.run()


class ProxyServer:
    """The proxy on a loopback port in a background thread (tests, benchmarks)::

    with ProxyServer(kb, ProxyConfig(upstream)) as base_url:  # http://127.0.0.1:PORT/v1
        ...
    """

    def __init__(
        self,
        kb: Kredenc,
        config: ProxyConfig,
        *,
        host: str = "127.0.0.1",
        freeze_heap: bool = False,
    ) -> None:
        app = create_app(kb, config, freeze_heap=freeze_heap)
        self._server = uvicorn.Server(_uvicorn_config(app, host, 0, "warning"))
        self._thread: threading.Thread | None = None
        self.host = host

    @property
    def base_url(self) -> str:
        sockets = self._server.servers[0].sockets
        return f"http://{self.host}:{sockets[0].getsockname()[1]}/v1"

    def __enter__(self) -> str:
        self._thread = threading.Thread(target=self._server.run, name="kredenc-proxy", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the proxy did not start")
            time.sleep(0.01)
        return self.base_url

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)


@contextmanager
def running(kb: Kredenc, upstream: str, **options: Any) -> Iterator[str]:
    """``with running(kb, upstream_url) as base_url:`` — :class:`ProxyServer` in short."""
    with ProxyServer(kb, ProxyConfig(upstream, **options)) as url:
        yield url
