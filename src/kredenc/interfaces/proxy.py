"""An OpenAI-compatible HTTP proxy that adds recall and filing: ``kredenc proxy``.

Any client that can change its base URL gets the recall reflex: point it at
``http://127.0.0.1:8766/v1`` and start ``kredenc proxy --upstream URL``, where URL is
the base URL the client used before (``https://api.openai.com/v1``, a local
llama.cpp or vLLM server's ``…/v1``). The proxy:

* ``POST /v1/chat/completions``: recalls (one system message appended at the tail),
  forwards the request, and returns the upstream's answer as it comes, streamed
  (server-sent events, chunk for chunk, in order) or not. After the answer has been
  sent, the call's user message(s) and the reply are filed as ``turn`` records; a
  streamed reply only when its stream ended properly (a ``finish_reason`` or
  ``[DONE]``): one cut short, by the client leaving or the upstream breaking off, is
  not filed, and one the upstream cut short ends with an error event in the shape below.
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

Who may call it (docs/security.md): when the store holds API keys
(``kredenc keys add``, :mod:`kredenc.interfaces.auth`), every request needs
``Authorization: Bearer <key>`` (what the OpenAI SDK sends as its ``api_key``) and is
served in the key's namespace, never one the request names; the kredenc key is not
forwarded, the ``proxy_upstream_api_key`` setting is sent upstream in its place.
Without keys the proxy listens on loopback only (:func:`check_bind`), serves the
store's namespace, and the client's own ``Authorization`` reaches the upstream. In
both cases the ``Host`` must be a loopback address, ``localhost`` or a name in
``proxy_allowed_hosts`` (403), an ``Origin`` must name one of those too (403), the
chat route takes JSON bodies only (415), bodies are at most ``proxy_max_body_bytes``
(413, before reading a body whose length is declared) and JSON at most
``proxy_max_json_depth`` deep (400). A message with text that is not valid Unicode
(a lone surrogate) is forwarded unchanged, without recall and without filing.

Headers pass through except hop-by-hop ones and kredenc's own (``X-Kredenc-*``).
The session is the ``X-Kredenc-Session`` header, else an id derived from the
conversation's opening messages; a session lives in its namespace (two tenants'
sessions of the same id are two sessions). Answers carry ``X-Kredenc-Session`` and
``X-Kredenc-Recalled`` (the number of memories injected).

The stack is Starlette on uvicorn, with httpx for the upstream: Starlette is what
FastAPI (planned for the REST API) builds on, so the two can later share one server;
uvicorn is its reference server; httpx is already a core dependency and streams both
ways. uvicorn parses HTTP with httptools and runs on uvloop where they are installed
(the ``proxy`` extra brings both; about 1 ms less per request than h11 on asyncio),
else on h11 and asyncio. Install with ``pip install 'kredenc[proxy]'``.

The front door (Host, Origin, keys, declared size) is :mod:`kredenc.interfaces.guard`.
This module stays one file of about 650 lines because :func:`proxy_parts`'s routes
share one closure of per-app state (the tenants' views and filers, the upstream client,
the session clocks); splitting it would mean passing that state through every route.
:func:`create_app` serves those routes behind its own guard; ``kredenc serve`` mounts
the same routes at ``/v1`` of its app (``interfaces/server/proxy_mount.py``).
"""

from __future__ import annotations

import gc
import importlib.util
import json
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import httpx

from kredenc.errors import CannotListen, InvalidInput, MissingExtra
from kredenc.interfaces.auth import KEY_PREFIX, KeyRing, bearer_token
from kredenc.interfaces.guard import (
    TENANT_KEY,
    Gate,
    Guard,
    Tenant,
    check_bind,
    error_response,
    is_json,
    json_shape,
    media_type,
    session_refusal,
    too_large,
)
from kredenc.recall.budget import Budget
from kredenc.recall.conversation import SessionClock, conversation_id, new_turns
from kredenc.recall.filing import Reply, TurnFiler
from kredenc.recall.reflex import RecallResult, announce, warm_up

try:
    import anyio
    import uvicorn
    from starlette.applications import Starlette
    from starlette.background import BackgroundTask
    from starlette.exceptions import HTTPException as StarletteHTTPException
    from starlette.middleware import Middleware
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
INTERNAL_PREFIX = "x-kredenc-"  # kredenc's own headers: never forwarded upstream
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
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


@dataclass
class ProxyConfig:
    """How the proxy runs. The limits left ``None`` come from the store's settings
    (``proxy_allowed_hosts``, ``proxy_max_body_bytes``, ``proxy_max_json_depth``,
    ``proxy_upstream_api_key``); ``allowed_hosts`` adds to the setting's names."""

    upstream: str
    timeout_s: float = 600.0
    budget: Budget | Mapping[str, Any] | None = None
    dry_run: bool | None = None
    time_budget_ms: float | None = None
    file_turns: bool = True
    transport: httpx.AsyncBaseTransport | None = field(default=None, repr=False)
    allowed_hosts: Sequence[str] = ()
    max_body_bytes: int | None = None
    max_json_depth: int | None = None
    upstream_api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        url = httpx.URL(self.upstream)
        if url.scheme not in ("http", "https") or not url.host:
            raise InvalidInput(
                f"upstream must be an http(s) URL, not {self.upstream!r}",
                "pass the base URL your client used, e.g. https://api.openai.com/v1",
            )
        self.upstream = str(url).rstrip("/")


@dataclass
class ProxyParts:
    """The proxy without an app of its own: its ``routes`` (which read the caller's
    tenant from the scope, so a guard must run first) and ``running()``, the context
    manager that holds the upstream client for their life and files what is still
    waiting when it ends. :func:`create_app` serves them behind its own guard; the
    server (``kredenc serve``) mounts them at ``/v1`` behind its guard."""

    routes: list[Route]
    running: Callable[[], AbstractAsyncContextManager[None]]


def proxy_parts(
    kb: Kredenc, config: ProxyConfig, *, view_of: Callable[[str], Kredenc] | None = None
) -> ProxyParts:
    """The proxy's routes and their lifetime over the open handle ``kb``.

    ``view_of(namespace)``: the tenant's view of the store (default: one ``kb.scoped``
    view per namespace, made here); a server passes its own, so the proxy and the REST
    routes share one view (and one turn context) per tenant.
    """
    s = kb.settings
    max_body = config.max_body_bytes or s.proxy_max_body_bytes
    max_depth = config.max_json_depth or s.proxy_max_json_depth
    upstream_key = (
        config.upstream_api_key
        if config.upstream_api_key is not None
        else s.proxy_upstream_api_key.get_secret_value()
    )
    state: dict[str, httpx.AsyncClient] = {}
    views: dict[str, Kredenc] = {kb.namespace: kb}
    filers: dict[str, TurnFiler] = {}
    sessions = SessionClock()

    def own_view(namespace: str) -> Kredenc:
        view = views.get(namespace)
        if view is None:
            view = views[namespace] = kb.scoped(namespace)
        return view

    find_view = view_of or own_view

    def tenant_of(request: Request) -> tuple[Tenant, Kredenc]:
        tenant: Tenant = request.scope[TENANT_KEY]
        return tenant, find_view(tenant.namespace)

    def filer_for(view: Kredenc) -> TurnFiler:
        filer = filers.get(view.namespace)
        if filer is None:
            filer = filers[view.namespace] = TurnFiler(view)
        return filer

    def shut_down() -> None:
        for filer in list(filers.values()):
            filer.close()
        for view in views.values():
            if view is not kb:
                view.flush_access()  # the access counts a view holds (kb flushes its own)

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
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
                await anyio.to_thread.run_sync(shut_down)

    def upstream_headers(request: Request, tenant: Tenant) -> dict[str, str]:
        out = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in _HOP and not k.lower().startswith(INTERNAL_PREFIX)
        }
        token = bearer_token(out.get("authorization")) or ""
        if tenant.keyed or upstream_key or token.startswith(KEY_PREFIX):
            # A kredenc key never leaves the proxy, even one sent when none is needed.
            out = {k: v for k, v in out.items() if k.lower() != "authorization"}
        if upstream_key:
            out["authorization"] = f"Bearer {upstream_key}"
        return out

    async def read_body(request: Request) -> bytes | JSONResponse:
        """The body, counted as it arrives: past the limit the rest is never read."""
        parts: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body:
                return too_large(max_body)
            parts.append(chunk)
        return b"".join(parts)

    async def send(
        request: Request, tenant: Tenant, path: str, body: bytes
    ) -> httpx.Response | JSONResponse:
        url = config.upstream + path
        if request.url.query:
            url += "?" + request.url.query
        upstream = state["client"].build_request(
            request.method, url, content=body, headers=upstream_headers(request, tenant)
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
        tenant, view = tenant_of(request)
        if not is_json(media_type(request.headers)):
            return _unsupported("application/json")
        session_header = request.headers.get(SESSION_HEADER)
        if session_header is not None and (refused := session_refusal(session_header)):
            return refused
        raw = await read_body(request)
        if isinstance(raw, JSONResponse):
            return raw
        try:
            body = _json_object(raw)
        except RecursionError:
            body, too_deep, clean = None, True, False
        else:
            too_deep, clean = json_shape(body, max_depth) if body is not None else (False, True)
        if too_deep:
            return error_response(
                400,
                "json_too_deep",
                f"the JSON body is nested more than {max_depth} levels deep",
                "send flatter JSON, or raise the proxy_max_json_depth setting",
            )
        messages = body.get("messages") if body is not None else None
        if body is None or not isinstance(messages, list):
            return await relay(request, "/chat/completions", raw)  # the upstream's to judge
        extra: dict[str, str] = {}
        session = session_header
        turns: list[dict[str, str]] = []
        if not clean:
            # The reflex never breaks a turn: text it cannot read goes on as it came.
            log.warning("recall skipped: the request holds text that is not valid Unicode")
            extra["X-Kredenc-Recalled"] = "0"
        else:
            session = session or conversation_id(messages)
            key = f"{view.namespace}\n{session}"  # a session lives in its namespace
            started = time.perf_counter()
            result: RecallResult = await anyio.to_thread.run_sync(
                partial(
                    view.recall,
                    messages,
                    session_id=session,
                    budget=config.budget,
                    dry_run=config.dry_run,
                    time_budget_ms=config.time_budget_ms,
                    session_start=sessions.start(key),
                )
            )
            recall_ms = (time.perf_counter() - started) * 1000
            injected = result.injected
            if injected:
                try:
                    text = json.dumps({**body, "messages": result.messages}, ensure_ascii=False)
                    raw = text.encode()
                except (ValueError, RecursionError) as exc:
                    log.warning("recall skipped: the request cannot be re-encoded: %s", exc)
                    injected = False
            turns = new_turns(messages) if config.file_turns else []
            extra["X-Kredenc-Recalled"] = str(len(result.items)) if injected else "0"
            extra["Server-Timing"] = server_timing({"recall": recall_ms, **result.timings_ms})
        if session is not None:
            extra["X-Kredenc-Session"] = session
        sent = await send(request, tenant, "/chat/completions", raw)
        if isinstance(sent, JSONResponse):
            return sent
        ok = 200 <= sent.status_code < 300
        headers = {**_forward(sent.headers.items()), **extra}
        filer = filer_for(view)
        if body.get("stream") and ok:
            reply = _SseText()
            events = media_type(sent.headers) == "text/event-stream"

            async def chunks() -> AsyncIterator[bytes]:
                tail = b"\n\n"
                broke: httpx.HTTPError | None = None
                try:
                    async for chunk in sent.aiter_raw():
                        reply.feed(chunk)
                        tail = (tail + chunk)[-2:]
                        yield chunk
                except httpx.HTTPError as exc:
                    broke = exc
                finally:
                    await sent.aclose()
                if events and not reply.finished:
                    # Cut short: the client hears it, and the part is not filed as a turn.
                    yield (b"" if tail == b"\n\n" else b"\n\n") + _cut_off(broke)

            return StreamingResponse(
                chunks(),
                status_code=sent.status_code,
                headers=headers,
                background=_filing(filer, session or "", turns, reply.text),
            )
        try:
            data = await sent.aread()
        except httpx.HTTPError as exc:  # the upstream broke off mid-body: no answer
            code, message, hint = _cut_off_error(exc)
            refused = error_response(
                504 if code == "upstream_timeout" else 502, code, message, hint
            )
            refused.background = _filing(filer, session or "", turns, lambda: None)
            return refused
        finally:
            await sent.aclose()
        task = _filing(filer, session or "", turns, partial(_reply_text, data)) if ok else None
        return Response(data, sent.status_code, headers=headers, background=task)

    async def relay(request: Request, path: str, body: bytes | None = None) -> Response:
        tenant: Tenant = request.scope[TENANT_KEY]
        if body is None:
            media = media_type(request.headers)
            if media and not (is_json(media) or media == "multipart/form-data"):
                return _unsupported("application/json or multipart/form-data")
            read = await read_body(request)
            if isinstance(read, JSONResponse):
                return read
            if read and not media and request.method in _BODY_METHODS:
                return _unsupported("application/json or multipart/form-data")
            body = read
        sent = await send(request, tenant, path, body)
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
        path = "/" + request.path_params["path"]  # percent-decoded by the router
        if any(part in (".", "..") for part in path.replace("\\", "/").split("/")):
            # The upstream URL joins it to its /v1 base, and a dot segment would walk
            # out of it ("/v1/../../admin" reached the upstream's /admin).
            return error_response(
                400,
                "bad_path",
                "the path has a '.' or '..' segment",
                "name a route under /v1/ without dot segments, e.g. /v1/models",
            )
        return await relay(request, path)

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    return ProxyParts(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/{path:path}", passthrough, methods=methods),
        ],
        running=running,
    )


def create_app(
    kb: Kredenc,
    config: ProxyConfig,
    *,
    freeze_heap: bool = False,
    bind_host: str = "127.0.0.1",
) -> Starlette:
    """The proxy as an ASGI app (served by :func:`serve` or :class:`ProxyServer`).

    ``freeze_heap``: after the warm-up, move everything alive to the garbage
    collector's permanent generation (``gc.freeze``): the model, the index and the
    libraries are never scanned again, so a full collection during a request costs
    well under a millisecond instead of ~15 ms. For a process that is only the proxy.
    ``bind_host``: the address it listens on; beyond loopback every request needs a
    key, whatever the key file holds.
    """
    s = kb.settings
    gate = Gate(
        KeyRing(kb.home),
        kb.namespace,
        bind_host,
        [*s.proxy_allowed_hosts, *config.allowed_hosts],
        config.max_body_bytes or s.proxy_max_body_bytes,
    )
    parts = proxy_parts(kb, config)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        seconds = await anyio.to_thread.run_sync(warm_up, kb.store)
        log.info("recall warm-up took %.2f s", seconds)
        if freeze_heap:
            freeze_warm_heap()
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
        keys = len(gate.keys.active())
        log.info(
            "%s",
            f"{keys} API key(s): every request needs one"
            if keys or gate.always_keyed
            else f"no API keys: loopback clients are served in namespace {kb.namespace}",
        )
        async with parts.running():
            yield

    return Starlette(
        routes=list(parts.routes),
        middleware=[Middleware(Guard, gate=gate)],
        lifespan=lifespan,
        exception_handlers={StarletteHTTPException: _refused},
    )


async def _refused(_request: Request, exc: Exception) -> Response:
    """A route or method the proxy lacks, in the one error shape (Starlette answers
    plain text otherwise)."""
    status = exc.status_code if isinstance(exc, StarletteHTTPException) else 404
    if status == 405:
        return error_response(
            405,
            "method_not_allowed",
            "this route does not take that method",
            "POST /v1/chat/completions; the upstream's other /v1 routes pass through",
        )
    return error_response(
        status,
        "not_found",
        "no such route on this proxy",
        "it serves /v1/... only (kredenc serve has /health, /stats and the REST routes)",
    )


def freeze_warm_heap() -> int:
    """Collect once, then move everything alive (the model, the index, the libraries:
    the warmed-up process) to the collector's permanent generation (``gc.freeze``), so
    that no later full collection scans it. Unfrozen, a full collection of a warm
    server over 100,000 memories stops every thread for tens to hundreds of ms on a
    loaded 2-core machine (docs/benchmarks.md, the proxy's added latency). For a
    process that is the server; the number of objects frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def _unsupported(wanted: str) -> JSONResponse:
    return error_response(
        415,
        "unsupported_media_type",
        f"this route takes {wanted} bodies",
        "send the body with Content-Type: application/json",
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


def _cut_off_error(exc: httpx.HTTPError | None, what: str = "answer") -> tuple[str, str, str]:
    """(code, message, hint) of an answer the upstream cut short (``exc``: how it broke;
    ``None``: a stream that ended before a ``finish_reason`` or ``[DONE]``)."""
    if isinstance(exc, httpx.TimeoutException):
        code, how = "upstream_timeout", f"went quiet for too long ({type(exc).__name__})"
    elif exc is not None:
        code, how = "upstream_cut_off", f"broke off: {exc or type(exc).__name__}"
    else:
        code, how = "upstream_cut_off", "ended before a finish_reason or [DONE]"
    hint = "the answer is incomplete and was not filed; check the upstream server and ask again"
    return code, f"the upstream's {what} {how}", hint


def _cut_off(exc: httpx.HTTPError | None) -> bytes:
    """The event that ends a streamed answer the upstream cut short, in the one error
    shape, as a ``data:`` event (the OpenAI SDK raises ``APIError`` on it)."""
    code, message, hint = _cut_off_error(exc, "streamed answer")
    error = {"code": code, "message": message, "hint": hint}
    return b"data: " + json.dumps({"error": error}).encode() + b"\n\n"


class _SseText:
    """Collects the first choice's ``delta.content`` from a chat completion SSE stream,
    and whether the stream ended properly (:attr:`finished`: a ``finish_reason`` on the
    first choice, or ``data: [DONE]``)."""

    def __init__(self) -> None:
        self._buffer = b""
        self._parts: list[str] = []
        self.finished = False

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if data == b"[DONE]":
            self.finished = True
            return
        event = _json_object(data)
        if event is None:
            return  # a partial or foreign event
        for choice in event.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                delta = choice.get("delta") or {}
                content = delta.get("content") if isinstance(delta, dict) else None
                if isinstance(content, str):
                    self._parts.append(content)
                if choice.get("finish_reason"):
                    self.finished = True

    def text(self) -> str | None:
        """The reply to file: its text, or ``None`` when the stream was cut short (the
        client left, or the upstream broke off): a part is never filed as the answer."""
        if self._buffer.strip():
            self._line(self._buffer.strip())
            self._buffer = b""
        return "".join(self._parts) if self.finished else None


def server_stack() -> tuple[str, str]:
    """uvicorn's HTTP parser and event loop: httptools and uvloop where installed (C,
    about 1 ms less per proxied request on a loaded 2-core machine), else the pure
    Python h11 and asyncio."""
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    return http, loop


def uvicorn_config(app: Any, host: str, port: int, log_level: str) -> uvicorn.Config:
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


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` for :func:`serve`: bound before the store and
    the model load, so a busy port fails at once with one line (exit 1)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise CannotListen(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            "stop what uses that port, or pass another --port",
        ) from None
    sock.set_inheritable(True)
    return sock


def serve(
    kb: Kredenc,
    config: ProxyConfig,
    *,
    host: str,
    port: int,
    sock: socket.socket | None = None,
) -> None:
    """Run the proxy in the foreground until interrupted, on ``sock`` (from
    :func:`listen`; default: bound here)."""
    check_bind(host, KeyRing(kb.home))
    if sock is None:
        sock = listen(host, port)
    port = sock.getsockname()[1]
    app = create_app(kb, config, freeze_heap=True, bind_host=host)
    server = uvicorn.Server(uvicorn_config(app, host, port, "info"))
    log.info("kredenc proxy listening on http://%s:%d/v1", host, port)
    server.run(sockets=[sock])


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
        check_bind(host, KeyRing(kb.home))
        self.app = create_app(kb, config, freeze_heap=freeze_heap, bind_host=host)
        self._server = uvicorn.Server(uvicorn_config(self.app, host, 0, "warning"))
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
