"""Fixtures for the server's tests: real stores in a temporary folder and the real
server (uvicorn on a loopback port in a thread), one per test module where it can."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from kredenc.engine import Kredenc
from kredenc.interfaces.server.run import ServerThread
from kredenc.interfaces.server.state import ServerConfig
from kredenc.testing.embedders import HashEmbedder


@dataclass
class Served:
    """A running server: its owner handle, base URL, store folder and app."""

    kb: Kredenc
    url: str
    home: Path
    app: Any

    def client(self, key: str | None = None, **options: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60, **options)


StartServer = Callable[..., Served]


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    """The one error shape, with this status (and code); the detail."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    detail = body["error"]
    assert set(detail) == {"code", "message", "hint"}, detail
    assert all(isinstance(v, str) for v in detail.values())
    assert detail["message"]
    if code is not None:
        assert detail["code"] == code, detail
    return dict(detail)


@pytest.fixture(scope="module")
def start_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartServer]:
    """``start_server(config=None, setup=None, **settings)``: a fresh store (test
    embedder, no durability), ``setup(kb)`` run on it, then the server over it; all
    stopped and closed when the module's tests are done. MCP and the page are off
    unless ``config`` says otherwise."""
    with ExitStack() as stack:

        def start(
            config: ServerConfig | None = None,
            setup: Callable[[Kredenc], None] | None = None,
            **settings: Any,
        ) -> Served:
            home = tmp_path_factory.mktemp("served") / "store"
            settings.setdefault("durability", "none")
            kb = stack.enter_context(Kredenc.open(home, embedder=HashEmbedder(), **settings))
            if setup is not None:
                setup(kb)
            thread = ServerThread(kb, config or ServerConfig(mcp=False, web=False))
            url = stack.enter_context(thread)
            return Served(kb, url, home, thread.app)

        yield start


@pytest.fixture(scope="module")
def assert_error_shape() -> Callable[..., dict[str, Any]]:
    """:func:`assert_error` as a fixture (test modules never import from tests/)."""
    return assert_error
