"""Tenants over the route list taken from the running app: every REST route and the
proxy at /v1, called as tenant A with B's ids in the path and B's words in the
query, never answer with what B filed (its canary); a foreign id answers exactly
like a missing one; nothing of B's changes; and without a key, with a wrong key or
with a revoked one every route that is not open answers 401.

The route list is the app's, not a copy: a route added later is called too (path
parameters filled with B's ids, a body from :data:`BODIES` or ``{}``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from starlette.routing import Route

from kredenc.engine import Kredenc
from kredenc.interfaces.auth import KeyRing
from kredenc.interfaces.server.app import OPEN_PATHS
from kredenc.interfaces.server.state import ServerConfig
from kredenc.testing.chat_server import chat_route, models_route
from kredenc.testing.openai_server import LoopbackServer

ErrorCheck = Callable[..., dict[str, Any]]
SECRET = "quokka4711secret"  # in every text B files; in no request A sends
WORDS = "zanzibar vault code"  # what B's texts are about: A asks about it
MISSING = "m0000000000000000000"
PARAM = re.compile(r"{(\w+)(?::\w+)?}")

#: The JSON body sent to a route, by (method, path); others get ``{}`` (or none).
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/memories"): {"text": f"alpha wonders about the {WORDS}"},
    ("PATCH", "/memories/{record_id}"): {"importance": 0.01, "status": "deprecated"},
    ("POST", "/relationships"): {"src": "{b1}", "dst": "{b2}", "rel": "supports"},
    ("POST", "/search"): {"query": WORDS, "k": 50},
    ("POST", "/recall"): {
        "messages": [{"role": "user", "content": f"What is the {WORDS}?"}],
        "session_id": "{session}",
    },
    ("POST", "/ask"): {"question": f"What is the {WORDS}?", "session_id": "{session}"},
    ("POST", "/jobs/run"): {},
    ("POST", "/v1/chat/completions"): {
        "model": "m",
        "messages": [{"role": "user", "content": f"What is the {WORDS}?"}],
    },
}
#: The query string of a GET, by path.
QUERIES: dict[str, dict[str, Any]] = {
    "/search": {"q": WORDS, "k": 50, "hops": 2},
    "/context_graph": {"query": WORDS, "seed_ids": "{b1},{b2}", "max_hops": 2},
    "/memories": {"limit": 1000},
    "/relationships": {"limit": 1000},
    "/sessions": {"limit": 1000},
}


@dataclass
class Tenants:
    served: Any
    alpha: str
    revoked: str
    b_ids: dict[str, str]  # what B filed: b1, b2 (memories), chunk, doc, session
    upstream: LoopbackServer


@pytest.fixture(scope="module")
def tenants(
    start_server: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tenants]:
    note = tmp_path_factory.mktemp("beta") / "beta-notes.md"
    note.write_text(f"# Vault\n\nThe {WORDS} is {SECRET}, kept by beta.\n")
    ids: dict[str, str] = {}

    def setup(kb: Kredenc) -> None:
        b = kb.scoped("beta")
        ids["b1"] = b.remember(f"The {WORDS} is {SECRET}.", tags=[SECRET]).id
        ids["b2"] = b.remember(f"Beta keeps the {WORDS} ({SECRET}) safe.").id
        b.relate(ids["b1"], ids["b2"], "supports")
        report = b.ingest([note])
        ids["doc"] = next(iter(report.doc_ids.values()))
        ids["chunk"] = b.search(SECRET, types=["chunk"])[0].id
        ids["session"] = "beta-session"
        b.ask(f"What is the {WORDS}?", session_id=ids["session"])
        kb.scoped("alpha").remember("Alpha likes green tea.")

    with LoopbackServer() as upstream:
        upstream.route("POST", "/v1/chat/completions", chat_route("Noted."))
        upstream.route("GET", "/v1/models", models_route())
        config = ServerConfig(mcp=False, web=False, upstream=upstream.base_url, rate_per_minute=0)
        served = start_server(config, setup)
        keys = KeyRing(served.kb.home)
        alpha, _ = keys.add("alpha", name="alpha")
        keys.add("beta", name="beta")
        revoked, _ = keys.add("alpha", name="gone")
        keys.revoke("gone")
        yield Tenants(served, alpha, revoked, ids, upstream)


def fill(value: Any, ids: dict[str, str]) -> Any:
    """``value`` with ``{b1}``-style placeholders replaced by B's ids."""
    if isinstance(value, str):
        return re.sub(r"{(\w+)}", lambda m: ids.get(m.group(1), m.group(0)), value)
    if isinstance(value, dict):
        return {k: fill(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, ids) for v in value]
    return value


#: B's id for each path parameter name (a route added later with another name gets b1).
PARAM_IDS = {"record_id": "b1", "memory_id": "b1", "session_id": "session", "document_id": "doc"}


@dataclass(frozen=True)
class Call:
    method: str
    template: str
    params: tuple[str, ...]

    def path(self, values: dict[str, str]) -> str:
        def one(m: re.Match[str]) -> str:
            if m.group(1) == "path":  # the proxy's pass-through
                return "models"
            return values[m.group(1)]

        return PARAM.sub(one, self.template)

    def send(
        self, client: httpx.Client, ids: dict[str, str], values: dict[str, str]
    ) -> httpx.Response:
        body = BODIES.get(
            (self.method, self.template), {} if self.method in ("POST", "PATCH", "PUT") else None
        )
        query = QUERIES.get(self.template) if self.method == "GET" else None
        return client.request(
            self.method,
            self.path(values),
            json=fill(body, ids),
            params=fill(query, ids) if query else None,
        )


def routes_of(routes: list[Any]) -> Iterator[Route]:
    """The app's routes, those of included routers too (FastAPI keeps an included
    router as one entry of ``app.routes`` holding the router's own list)."""
    for route in routes:
        if isinstance(route, Route):
            yield route
        elif (router := getattr(route, "original_router", None)) is not None:
            yield from routes_of(router.routes)


def calls(app: Any) -> list[Call]:
    """Every (method, route) of the app but HEAD and OPTIONS, and the open paths."""
    out = []
    for route in routes_of(app.routes):
        if route.path in OPEN_PATHS:
            continue
        for method in sorted(route.methods or ()):
            if method not in ("HEAD", "OPTIONS"):
                out.append(Call(method, route.path, tuple(PARAM.findall(route.path))))
    return out


def test_the_route_list_covers_the_api(tenants: Tenants) -> None:
    paths = {(c.method, c.template) for c in calls(tenants.served.app)}
    expected = {
        ("GET", "/memories/{record_id}"), ("PATCH", "/memories/{record_id}"),
        ("DELETE", "/memories/{record_id}"), ("GET", "/memories/{record_id}/history"),
        ("GET", "/records/{record_id}"),
        ("GET", "/relationships/{memory_id}"), ("POST", "/ask"), ("GET", "/context_graph"),
        ("POST", "/v1/chat/completions"), ("GET", "/v1/{path:path}"),
        ("DELETE", "/sessions/{session_id}"), ("GET", "/check"), ("POST", "/jobs/run"),
    }  # fmt: skip
    assert expected <= paths


def test_tenant_a_never_sees_b(tenants: Tenants) -> None:
    ids = tenants.b_ids
    values = {
        name: ids[PARAM_IDS.get(name, "b1")] for c in calls(tenants.served.app) for name in c.params
    }
    seen: list[str] = []
    with tenants.served.client(tenants.alpha) as client:
        for call in calls(tenants.served.app):
            response = call.send(client, ids, values)
            where = f"{call.method} {call.template} -> {response.status_code}"
            relayed = call.template == "/v1/{path:path}"  # the upstream's own answer
            assert relayed or response.status_code < 500, f"{where}: {response.text[:300]}"
            assert SECRET not in response.text, f"{where} leaked B's canary"
            assert "beta-notes" not in response.text, f"{where} leaked B's file"
            seen.append(where)
    for request in tenants.upstream.requests:
        assert SECRET not in request.body.decode(errors="replace")
    assert len(seen) >= 20
    b = tenants.served.kb.scoped("beta")
    assert b.get(ids["b1"]).status != "deprecated"  # A's PATCH and DELETE changed nothing
    assert b.get(ids["b2"]).text.endswith("safe.")
    assert b.relationships_of(ids["b1"])
    assert len(b.session_history(ids["session"])) == 2


def normalised(response: httpx.Response, token: str) -> tuple[int, str]:
    return response.status_code, response.text.replace(token, "<id>")


def test_a_foreign_id_answers_like_a_missing_one(tenants: Tenants) -> None:
    ids = tenants.b_ids
    with tenants.served.client(tenants.alpha) as client:
        for call in calls(tenants.served.app):
            if not call.params or call.template.startswith("/v1/"):
                continue
            for b_key in ("b1", "chunk", "doc", "session"):
                foreign = {p: ids[b_key] for p in call.params}
                missing = {p: MISSING for p in call.params}
                got = call.send(client, ids, foreign)
                expected = call.send(client, ids, missing)
                assert normalised(got, ids[b_key]) == normalised(expected, MISSING), (
                    f"{call.method} {call.template} with B's {b_key}"
                )


@pytest.mark.parametrize("who", ["none", "wrong", "revoked", "not bearer"])
def test_every_closed_route_needs_a_valid_key(
    tenants: Tenants, assert_error_shape: ErrorCheck, who: str
) -> None:
    headers = {
        "none": {},
        "wrong": {"Authorization": "Bearer kr_" + "x" * 43},
        "revoked": {"Authorization": f"Bearer {tenants.revoked}"},
        "not bearer": {"Authorization": tenants.alpha},
    }[who]
    ids = tenants.b_ids
    values = {p: ids["b1"] for c in calls(tenants.served.app) for p in c.params}
    checked = 0
    with httpx.Client(base_url=tenants.served.url, headers=headers) as client:
        for call in calls(tenants.served.app):
            assert_error_shape(call.send(client, ids, values), 401, "unauthorized")
            checked += 1
        for extra in ("/openapi.json", "/docs", "/nope"):
            assert_error_shape(client.get(extra), 401, "unauthorized")
    assert checked >= 20
    assert len(tenants.upstream.requests) == len(tenants.upstream.requests)


def test_foreign_ids_in_queries_and_bodies_answer_like_missing_ones(tenants: Tenants) -> None:
    ids = tenants.b_ids
    with tenants.served.client(tenants.alpha) as client:
        mine = client.post("/memories", json={"text": "alpha's own"}).json()["id"]

        def calls(other: str) -> list[httpx.Response]:
            return [
                client.get("/context_graph", params={"query": "", "seed_ids": other}),
                client.get(
                    "/context_graph", params={"query": WORDS, "seed_ids": f"{mine},{other}"}
                ),
                client.post("/relationships", json={"src": mine, "dst": other, "rel": "supports"}),
                client.post("/relationships", json={"src": other, "dst": mine, "rel": "supports"}),
            ]

        for b_key in ("b1", "chunk", "doc"):
            got, expected = calls(ids[b_key]), calls(MISSING)
            for g, e in zip(got, expected, strict=True):
                assert shape(g, ids[b_key]) == shape(e, MISSING), (b_key, g.text)


def shape(response: httpx.Response, token: str) -> Any:
    """What an answer says, ``token`` masked; of a graph, its nodes and edges (the
    scores move with the clock: recency)."""
    status, text = normalised(response, token)
    body = json.loads(text) if text else None
    if isinstance(body, dict) and "nodes" in body:
        return status, [n["id"] for n in body["nodes"]], body["edges"]
    return status, body
