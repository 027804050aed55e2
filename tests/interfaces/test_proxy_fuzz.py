"""Hypothesis against the proxy's request parsing (issue 13).

Random JSON-ish bodies (deep, wide, with lone surrogates, wrong types where messages
go), random bytes, random content types and kredenc headers, on the chat route and a
passthrough route of a proxy that holds keys. The upstream is the scripted loopback
server, which answers 200 or 400 and never 5xx, so any 5xx is the proxy's own fault:
none may come. Whatever the proxy answers itself is the one JSON error shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from kredenc.engine import Kredenc
from kredenc.interfaces.auth import KeyRing
from kredenc.interfaces.proxy import running
from kredenc.testing.chat_server import chat_route, models_route
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.openai_server import LoopbackServer, Reply, Request, Route


def tolerant(route: Route) -> Route:
    """The scripted chat route, answering 400 (as a real server does) to a body that
    is not JSON, so every upstream answer is below 500."""

    def handle(request: Request) -> Reply:
        try:
            request.json()
        except ValueError:
            return Reply.error(400, "the body is not JSON", "invalid_request_error")
        return route(request)

    return handle


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, LoopbackServer]]:
    home: Path = tmp_path_factory.mktemp("fuzz") / "store"
    with Kredenc.open(
        home, embedder=HashEmbedder(), durability="none", proxy_max_body_bytes=64 * 1024
    ) as kb:
        kb.remember("The user likes jasmine tea in the morning.", kind="preference")
        key, _ = KeyRing(home).add(kb.namespace)
        with LoopbackServer() as upstream:
            upstream.route("POST", "/v1/chat/completions", tolerant(chat_route("Noted.")))
            upstream.route("GET", "/v1/models", models_route())
            with running(kb, upstream.base_url) as base_url:
                yield base_url, key, upstream


text = st.text(
    alphabet=st.characters(codec=None, exclude_categories=()), max_size=40
) | st.sampled_from(["\ud800", "jasmine tea", "", "\x00", "\u202e", "[DONE]"])
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=30,
)
message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "system", "tool", "", 7]),
        "content": json_values,
    }
)
chat_body = st.fixed_dictionaries(
    {"messages": st.lists(message, max_size=4) | json_values},
    optional={"model": text, "stream": st.booleans() | json_values, "extra": json_values},
)


def deep(n: int) -> str:
    return '{"messages": [{"role": "user", "content": "x", "d": ' + "[" * n + "]" * n + "}]}"


bodies = (
    chat_body.map(lambda b: json.dumps(b).encode())  # ASCII: surrogates as \\u escapes
    | json_values.map(lambda b: json.dumps(b).encode())
    | st.binary(max_size=200)
    | st.integers(0, 5000).map(lambda n: deep(n).encode())
    | st.sampled_from([b"", b"{", b"null", b'{"messages": null}', b"\xff\xfe{}", b"1e999999"])
)
header_text = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30
).map(str.strip)  # what HTTP lets a client send
content_types = st.sampled_from(
    ["application/json", "application/json; charset=utf-8", "text/plain", "", "application/x+json"]
)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    body=bodies,
    content_type=content_types,
    session=st.none() | header_text | st.just("x" * 300),
    path=st.sampled_from(["/chat/completions", "/models", "/embeddings"]),
    method=st.sampled_from(["POST", "GET"]),
    stray=st.dictionaries(
        st.sampled_from(["x-kredenc-namespace", "origin", "x-kredenc-x"]), header_text, max_size=2
    ),
)
def test_no_5xx_from_the_proxys_parsing(
    target: tuple[str, str, LoopbackServer],
    body: bytes,
    content_type: str,
    session: str | None,
    path: str,
    method: str,
    stray: dict[str, str],
) -> None:
    base_url, key, _upstream = target
    headers: dict[str, str] = {"Authorization": f"Bearer {key}", **stray}
    if content_type:
        headers["Content-Type"] = content_type
    if session is not None:
        headers["X-Kredenc-Session"] = session
    response = httpx.request(method, base_url + path, content=body, headers=headers, timeout=30)
    assert response.status_code < 500, response.text
    if response.status_code in (400, 401, 403, 413, 415) and "error" in response.text:
        error: Any = response.json()["error"]
        if "hint" in error:  # the proxy's own refusals (the upstream's have no hint)
            assert list(error) == ["code", "message", "hint"]
