"""OpenAIEmbedder against a real HTTP server on 127.0.0.1 (kredenc.testing.openai_server)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from kredenc.config import Settings
from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.embed.openai import OpenAIEmbedder
from kredenc.testing.openai_server import (
    LoopbackServer,
    Reply,
    Request,
    embeddings_route,
    fake_vector,
)

EMBEDDINGS = ("POST", "/v1/embeddings")


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer({EMBEDDINGS: embeddings_route(dim=8)}) as srv:
        yield srv


def make(server: LoopbackServer, **options: object) -> OpenAIEmbedder:
    options.setdefault("timeout", 5.0)
    return OpenAIEmbedder(server.base_url, "test-embed", **options)  # type: ignore[arg-type]


def expected(text: str, dim: int = 8) -> np.ndarray:
    v = np.asarray(fake_vector(text, dim), dtype=np.float32)
    return v / np.linalg.norm(v)


def test_embeds_normalises_and_keeps_order(server: LoopbackServer) -> None:
    server.route(*EMBEDDINGS, embeddings_route(dim=8, shuffle=True))
    texts = ["alpha", "beta", "gamma", "delta", "epsilon"]
    with make(server, batch_size=2) as emb:
        out = emb.embed(texts)
        assert out.shape == (5, 8) and out.dtype == np.float32
        np.testing.assert_allclose(out, np.stack([expected(t) for t in texts]), atol=1e-6)
        assert emb.dim == 8 and emb.model_id == "openai:test-embed"
    bodies = [r.json() for r in server.requests]
    assert [b["input"] for b in bodies] == [["alpha", "beta"], ["gamma", "delta"], ["epsilon"]]
    assert all(b == {"model": "test-embed", "input": b["input"]} for b in bodies)
    assert server.requests[0].path == "/v1/embeddings"


def test_api_key_sent_but_never_printed(server: LoopbackServer) -> None:
    with make(server, api_key="sk-secret-123") as emb:
        emb.embed(["x"])
        assert "sk-secret-123" not in repr(emb) + repr(vars(emb)) + repr(vars(emb._http))
    assert server.requests[0].headers["authorization"] == "Bearer sk-secret-123"


def test_no_auth_header_without_key(server: LoopbackServer) -> None:
    with make(server) as emb:
        emb.embed(["x"])
    assert "authorization" not in server.requests[0].headers


def test_dim_learned_once_then_fixed(server: LoopbackServer) -> None:
    with make(server) as emb:
        assert emb.dim == 8  # asks the server once
        assert len(server.requests) == 1
        server.route(*EMBEDDINGS, embeddings_route(dim=16))
        with pytest.raises(ProviderError, match="16-d vectors, expected 8-d"):
            emb.embed(["y"])


def test_given_dim_is_checked(server: LoopbackServer) -> None:
    with make(server, dim=4) as emb:
        assert emb.dim == 4 and not server.requests
        assert emb.embed([]).shape == (0, 4)
        with pytest.raises(ProviderError, match="expected 4-d"):
            emb.embed(["x"])


def test_server_error_message_is_surfaced(server: LoopbackServer) -> None:
    server.route(*EMBEDDINGS, lambda _req: Reply.error(500, "CUDA out of memory\nat layer 3"))
    with make(server) as emb, pytest.raises(ProviderError) as info:
        emb.embed(["x"])
    text = str(info.value)
    assert "HTTP 500: CUDA out of memory at layer 3" in text
    assert server.base_url + "/embeddings" in text and "\n" not in text
    assert info.value.hint


@pytest.mark.parametrize(("status", "hint"), [(401, "API key"), (404, "base_url")])
def test_status_hints(server: LoopbackServer, status: int, hint: str) -> None:
    server.route(*EMBEDDINGS, lambda _req: Reply.raw("nope", status, "text/plain"))
    with make(server) as emb, pytest.raises(ProviderError, match=f"HTTP {status}: nope") as info:
        emb.embed(["x"])
    assert hint in info.value.hint


def test_malformed_json(server: LoopbackServer) -> None:
    server.route(*EMBEDDINGS, lambda _req: Reply.raw('{"data": [ oops'))
    with make(server) as emb, pytest.raises(ProviderError, match="not JSON"):
        emb.embed(["x"])


@pytest.mark.parametrize(
    "body",
    [
        {"object": "list"},
        {"data": [{"index": 0, "embedding": [1.0, 2.0]}]},
        {"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]},
        {"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0]}]},
        {"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": "AAAA"}]},
        {"data": [{"index": 0}, {"index": 1}]},
    ],
)
def test_wrong_shapes_are_provider_errors(server: LoopbackServer, body: object) -> None:
    server.route(*EMBEDDINGS, lambda _req: Reply.json(body))
    with make(server) as emb, pytest.raises(ProviderError, match="embeddings endpoint"):
        emb.embed(["a", "b"])


def test_closed_port() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    emb = OpenAIEmbedder(f"http://127.0.0.1:{port}/v1", "m", timeout=2.0, max_retries=0)
    with emb, pytest.raises(ProviderError, match="cannot connect") as info:
        emb.embed(["x"])
    assert f"127.0.0.1:{port}" in str(info.value) and "server running" in info.value.hint


def test_timeout(server: LoopbackServer) -> None:
    def slow(request: Request) -> Reply:
        reply = embeddings_route(dim=8)(request)
        return Reply(reply.status, reply.body, delay=0.5)

    server.route(*EMBEDDINGS, slow)
    with make(server, timeout=0.1) as emb, pytest.raises(ProviderError, match="no answer within"):
        emb.embed(["x"])
    assert len(server.requests) == 1  # a slow server is not asked again


def test_closed_embedder(server: LoopbackServer) -> None:
    emb = make(server)
    emb.close()
    with pytest.raises(ProviderError, match="closed"):
        emb.embed(["x"])


def test_bad_arguments() -> None:
    with pytest.raises(InvalidInput):
        OpenAIEmbedder("127.0.0.1:8000/v1", "m")
    with pytest.raises(InvalidInput):
        OpenAIEmbedder("http://127.0.0.1:8000/v1", "m", dim=0)
    with pytest.raises(InvalidInput, match="base_url"):
        OpenAIEmbedder(None, "m")  # type: ignore[arg-type]  # unset in configuration
    with pytest.raises(InvalidInput, match="model"):
        OpenAIEmbedder("http://127.0.0.1:8000/v1", "")


def test_unknown_route_is_404_from_the_test_server(server: LoopbackServer) -> None:
    emb = OpenAIEmbedder(server.base_url + "/wrong", "m", timeout=5.0)
    with emb, pytest.raises(ProviderError, match="HTTP 404: no route"):
        emb.embed(["x"])


def test_a_503_is_retried_because_embeddings_are_safe_to_repeat(server: LoopbackServer) -> None:
    replies = [Reply.error(503, "loading model"), Reply.error(502, "bad gateway")]
    route = embeddings_route(dim=8)
    server.route(*EMBEDDINGS, lambda req: replies.pop(0) if replies else route(req))
    with make(server) as emb:
        emb._http.backoff_s = 0.01
        np.testing.assert_allclose(emb.embed(["x"])[0], expected("x"), atol=1e-6)
    assert len(server.requests) == 3


def test_from_settings_reads_the_embed_settings(server: LoopbackServer) -> None:
    settings = Settings(
        embed_provider="openai",
        embed_url=server.base_url,
        embed_model="m",
        embed_api_key="sk-from-settings",
    )
    with OpenAIEmbedder.from_settings(settings) as emb:
        assert emb.model_id == "openai:m" and emb.dim == 8
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-settings"
    with pytest.raises(InvalidInput, match="needs embed_url and embed_model") as info:
        OpenAIEmbedder.from_settings(Settings(embed_provider="openai"))
    assert "KREDENC_EMBED_URL" in info.value.hint


def test_concurrent_queries_are_concurrent_requests_not_one_batch(
    server: LoopbackServer,
) -> None:
    inner = embeddings_route(dim=8)
    together = threading.Barrier(4)

    def all_four_in_flight(request: Request) -> Reply:
        together.wait(10)  # breaks (a 500) unless four requests are open at once
        return inner(request)

    server.route(*EMBEDDINGS, all_four_in_flight)
    texts = ["alpha", "beta", "gamma", "delta"]
    with make(server, dim=8, max_retries=0) as emb, ThreadPoolExecutor(4) as pool:
        got = list(pool.map(emb.embed_query, texts))
    np.testing.assert_allclose(np.stack(got), np.stack([expected(t) for t in texts]), atol=1e-6)
    assert sorted(r.json()["input"][0] for r in server.requests) == sorted(texts)
