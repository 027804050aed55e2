"""A scripted OpenAI-compatible HTTP server on 127.0.0.1, for tests.

It is a real server (stdlib ``http.server`` in a thread, on a free port), so tests
exercise the real HTTP client. Routes are plain functions from :class:`Request` to
:class:`Reply`; :func:`embeddings_route` speaks ``POST /v1/embeddings`` with
deterministic vectors; :mod:`kredenc.testing.chat_server` has the chat completions and
models routes. Routes are added like this::

    with LoopbackServer() as server:
        server.route("POST", "/v1/embeddings", embeddings_route(dim=8))
        server.route("POST", "/v1/chat/completions", chat_completions_route(["Hi."]))
        client = SomeClient(base_url=server.base_url)  # http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Request:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass(frozen=True)
class Reply:
    """What a route answers. ``delay`` (seconds) is slept before answering.

    A streamed reply (:meth:`stream`) is sent in ``parts``, one chunk of a chunked
    body each, ``pause`` seconds apart; with ``hang_up`` the connection is then
    dropped without the body's end, as an upstream that dies mid-answer does."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    parts: tuple[bytes, ...] = ()
    pause: float = 0.0
    hang_up: bool = False

    @classmethod
    def json(cls, obj: Any, status: int = 200, delay: float = 0.0) -> Reply:
        return cls(status, json.dumps(obj).encode(), delay=delay)

    @classmethod
    def error(
        cls,
        status: int,
        message: str,
        kind: str = "server_error",
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """An error in OpenAI's shape: ``{"error": {"message", "type", "code"}}``, with
        ``headers`` (``{"Retry-After": "1"}``)."""
        body = {"error": {"message": message, "type": kind, "code": status}}
        return cls(status, json.dumps(body).encode(), headers=dict(headers or {}))

    @classmethod
    def raw(
        cls,
        body: bytes | str,
        status: int = 200,
        content_type: str = "application/json",
        delay: float = 0.0,
    ) -> Reply:
        data = body.encode() if isinstance(body, str) else body
        return cls(status, data, content_type, delay=delay)

    @classmethod
    def stream(
        cls,
        parts: Sequence[bytes],
        *,
        pause: float = 0.0,
        hang_up: bool = False,
        content_type: str = "text/event-stream",
    ) -> Reply:
        """A 200 sent as ``parts`` (chunked, ``pause`` seconds apart); ``hang_up``:
        drop the connection after the last part instead of ending the body."""
        return cls(content_type=content_type, parts=tuple(parts), pause=pause, hang_up=hang_up)


Route = Callable[[Request], Reply]


def fake_vector(text: str, dim: int) -> list[float]:
    """A deterministic, un-normalised vector for ``text`` (values in [-1, 1))."""
    digest = hashlib.shake_256(text.encode("utf-8")).digest(2 * dim)
    return [int.from_bytes(digest[2 * i : 2 * i + 2], "little") / 32768.0 - 1.0 for i in range(dim)]


def embeddings_route(dim: int = 8, *, shuffle: bool = False) -> Route:
    """``POST /v1/embeddings``: one :func:`fake_vector` per input, OpenAI's reply shape.

    With ``shuffle`` the ``data`` items come back in reverse order (their ``index``
    still right), as servers are allowed to do.
    """

    def handle(request: Request) -> Reply:
        try:
            payload = request.json()
        except ValueError:
            return Reply.error(400, "request body is not JSON", "invalid_request_error")
        inputs = payload.get("input") if isinstance(payload, dict) else None
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not all(isinstance(t, str) for t in inputs):
            return Reply.error(
                400, "'input' must be a string or a list of strings", "invalid_request_error"
            )
        data = [
            {"object": "embedding", "index": i, "embedding": fake_vector(t, dim)}
            for i, t in enumerate(inputs)
        ]
        if shuffle:
            data.reverse()
        tokens = sum(len(t.split()) for t in inputs)
        return Reply.json(
            {
                "object": "list",
                "data": data,
                "model": payload.get("model"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    return handle


class LoopbackServer:
    """An HTTP server on 127.0.0.1 with scripted routes; records every request."""

    def __init__(self, routes: dict[tuple[str, str], Route] | None = None) -> None:
        self.routes: dict[tuple[str, str], Route] = dict(routes or {})
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def route(self, method: str, path: str, handler: Route) -> None:
        """Answer ``method path`` (e.g. ``"POST", "/v1/embeddings"``) with ``handler``."""
        self.routes[(method.upper(), path)] = handler

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, ending in ``/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LoopbackServer:
        if self._httpd is not None:
            return self
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(self))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="kredenc-loopback",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _dispatch(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
        handler = self.routes.get((request.method, request.path.split("?", 1)[0]))
        if handler is None:
            return Reply.error(404, f"no route for {request.method} {request.path}", "not_found")
        return handler(request)


def _handler_class(server: LoopbackServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # A reply leaves as one write with Nagle's algorithm off. Written as two small
        # sends (headers, body) on a Nagle socket, the body would wait for the client's
        # delayed ACK, ~40 ms per request on a keep-alive connection.
        disable_nagle_algorithm = True
        wbufsize = -1  # buffered: headers and body are flushed together

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = server._dispatch(Request(self.command, self.path, headers, body))
            if reply.delay:
                time.sleep(reply.delay)
            if reply.parts:
                self._stream(reply)
                return
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(reply.body)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                log.debug("client went away before the reply to %s", self.path)

        def _stream(self, reply: Reply) -> None:
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Transfer-Encoding", "chunked")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.flush()
                # The parts go to the socket itself: a client that left leaves nothing
                # in the buffer for the handler's own flush to fail on.
                for i, part in enumerate(reply.parts):
                    if i and reply.pause:
                        time.sleep(reply.pause)
                    self.connection.sendall(b"%x\r\n%s\r\n" % (len(part), part))
                if reply.hang_up:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)  # no end of the body
                else:
                    self.connection.sendall(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
                log.debug("client went away during the streamed reply to %s", self.path)

        def log_message(self, format: str, *args: Any) -> None:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("loopback %s: %s", self.address_string(), format % args)

    return Handler
