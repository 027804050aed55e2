"""Running the server: :func:`serve` in the foreground (``kredenc serve``) and
:class:`ServerThread` on a loopback port in a background thread (tests, benchmarks)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

import uvicorn

from kredenc.engine import Kredenc
from kredenc.interfaces.guard import check_bind
from kredenc.interfaces.proxy import listen, uvicorn_config
from kredenc.interfaces.server.app import create_app
from kredenc.interfaces.server.state import ServerConfig

log = logging.getLogger("kredenc.server")


class _Server(uvicorn.Server):
    """uvicorn's server that, as it begins to shut down (SIGINT, SIGTERM, ``stop``),
    sets the app's ``closing`` first: uvicorn waits for every open response, and an
    event stream (an ask's, a job's) would otherwise keep it waiting (``sse.py``)."""

    def __init__(self, config: uvicorn.Config, closing: threading.Event) -> None:
        super().__init__(config)
        self.closing = closing

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.closing.set()
        await super().shutdown(sockets)


def _server(app: Any, host: str, port: int, log_level: str) -> uvicorn.Server:
    return _Server(uvicorn_config(app, host, port, log_level), app.state.kredenc.closing)


def serve(kb: Kredenc, config: ServerConfig, *, sock: socket.socket | None = None) -> None:
    """Serve until interrupted, on ``sock`` (from :func:`listen`; default: bound here)."""
    app = create_app(kb, config)
    check_bind(config.host, app.state.kredenc.keys)
    if sock is None:
        sock = listen(config.host, config.port)
    port = sock.getsockname()[1]
    server = _server(app, config.host, port, "info")
    log.info("kredenc serving on http://%s:%d/", config.host, port)
    server.run(sockets=[sock])


class ServerThread:
    """The server on a free loopback port in a thread::

    with ServerThread(kb) as url:  # http://127.0.0.1:PORT
        httpx.get(url + "/health")
    """

    def __init__(self, kb: Kredenc, config: ServerConfig | None = None) -> None:
        self.config = config or ServerConfig()
        self.app = create_app(kb, self.config)
        check_bind(self.config.host, self.app.state.kredenc.keys)
        self._server = _server(self.app, self.config.host, 0, "warning")
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        port = self._server.servers[0].sockets[0].getsockname()[1]
        return f"http://{self.config.host}:{port}"

    def __enter__(self) -> str:
        self._thread = threading.Thread(target=self._server.run, name="kredenc-serve", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 60
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        return self.url

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
