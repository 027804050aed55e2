"""Keys and tenants on the proxy (issue 13, finding 1), route by route.

Two tenants share one store and one proxy. Tenant B holds a canary ("the bank PIN is
4921"), as a memory and as a turn of a session whose id tenant A also uses. The
route list is read from the running app, so a route added later is checked too:
every route refuses a request without a key, with a wrong key and with a revoked
key (401, and the upstream sees nothing); with tenant A's key no route, recall or
session ever carries the canary to tenant A or to the upstream on A's behalf, while
the same question with B's key does recall it (the control that shows the canary is
findable). The kredenc key never reaches the upstream; the upstream's own key does.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from starlette.routing import Route

from kredenc.engine import Kredenc
from kredenc.interfaces.auth import KeyRing
from kredenc.interfaces.proxy import ProxyConfig, ProxyServer
from kredenc.testing.chat_server import chat_route, models_route
from kredenc.testing.openai_server import LoopbackServer, Reply

CANARY = "4921"
QUESTION = "What is the bank PIN?"
UPSTREAM_KEY = "sk-upstream-secret"


@dataclass
class Setup:
    kb: Kredenc
    upstream: LoopbackServer
    server: ProxyServer
    base_url: str
    key_a: str
    key_b: str
    revoked: str


@pytest.fixture
def setup(open_store: Callable[..., Kredenc]) -> Iterator[Setup]:
    kb = open_store(namespace="tenant-a", proxy_upstream_api_key=UPSTREAM_KEY)
    ring = KeyRing(kb.home)
    key_a, _ = ring.add("tenant-a", "a")
    key_b, _ = ring.add("tenant-b", "b")
    revoked, _ = ring.add("tenant-a", "gone")
    ring.revoke("gone")
    kb.scoped("tenant-b").remember(f"The bank PIN is {CANARY}.", kind="fact")
    kb.remember("The user banks with the Co-operative bank.", kind="fact")
    with LoopbackServer() as upstream:
        upstream.route("POST", "/v1/chat/completions", chat_route("Noted."))
        upstream.route("GET", "/v1/models", models_route())
        upstream.route("GET", "/v1/models/scripted", lambda r: Reply.json({"id": "scripted"}))
        upstream.route("POST", "/v1/embeddings", lambda r: Reply.json({"data": []}))
        server = ProxyServer(kb, ProxyConfig(upstream.base_url))
        try:
            with server as base_url:
                yield Setup(kb, upstream, server, base_url, key_a, key_b, revoked)
        finally:
            kb.close()


def chat(setup: Setup, key: str | None, session: str, text: str = QUESTION) -> httpx.Response:
    headers = {"X-Kredenc-Session": session}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(
        setup.base_url + "/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": text}]},
        headers=headers,
    )


def wait_filed(kb: Kredenc, session: str, n: int) -> list[str]:
    deadline = time.monotonic() + 10
    while True:
        got = [
            h.text
            for h in kb.search("bank PIN", k=50, types=["turn"])
            if h.meta.get("session") == session
        ]
        if len(got) >= n or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def calls(setup: Setup) -> list[tuple[str, str, dict[str, object] | None]]:
    """(method, path, JSON body) for every method of every route of the running app."""
    out: list[tuple[str, str, dict[str, object] | None]] = []
    assert setup.server.app.routes
    for route in setup.server.app.routes:
        assert isinstance(route, Route)
        path = re.sub(r"\{[^}]*\}", "models", route.path).removeprefix("/v1")
        for method in sorted((route.methods or set()) - {"HEAD"}):
            body = None
            if method in ("POST", "PUT", "PATCH"):
                body = {
                    "model": "m",
                    "input": QUESTION,
                    "messages": [{"role": "user", "content": QUESTION}],
                }
            out.append((method, path, body))
    return out


def test_every_route_refuses_a_missing_wrong_or_revoked_key(setup: Setup) -> None:
    wrong = "kr_" + "A" * 43
    headers_list: list[dict[str, str]] = [
        {},
        {"Authorization": f"Bearer {wrong}"},
        {"Authorization": f"Bearer {setup.revoked}"},
        {"Authorization": setup.key_a},  # no scheme
        {"Authorization": f"Basic {setup.key_a}"},
        {"X-Kredenc-Key": setup.key_a, "X-Kredenc-Namespace": "tenant-a"},
    ]
    routes = calls(setup)
    assert ("POST", "/chat/completions", routes[0][2]) in routes
    for method, path, body in routes:
        for headers in headers_list:
            response = httpx.request(method, setup.base_url + path, json=body, headers=headers)
            assert response.status_code == 401, (method, path, headers, response.text)
            error = response.json()["error"]
            assert error["code"] == "unauthorized" and "kredenc keys add" in error["hint"]
            assert response.headers["www-authenticate"].startswith("Bearer")
    assert setup.upstream.requests == []


def test_tenant_bs_canary_never_reaches_tenant_a(setup: Setup) -> None:
    kb, upstream = setup.kb, setup.upstream
    # Tenant B files the canary as a turn of session "shared" too.
    said = f"Remember: the bank PIN is {CANARY}."
    assert chat(setup, setup.key_b, "shared", said).status_code == 200
    assert wait_filed(kb.scoped("tenant-b"), "shared", 1)
    upstream.requests.clear()

    # Control: with B's key the same question recalls the canary.
    control = chat(setup, setup.key_b, "b-asks")
    assert control.headers["x-kredenc-recalled"] != "0"
    assert CANARY in upstream.requests[-1].body.decode()
    upstream.requests.clear()

    # Tenant A: every route, its own session, B's session id, and a namespace header.
    for session in ("a-asks", "shared"):
        response = chat(setup, setup.key_a, session)
        assert response.status_code == 200 and CANARY not in response.text
    for method, path, body in calls(setup):
        response = httpx.request(
            method,
            setup.base_url + path,
            json=body,
            headers={
                "Authorization": f"Bearer {setup.key_a}",
                "X-Kredenc-Session": "shared",
                "X-Kredenc-Namespace": "tenant-b",
            },
        )
        # The scripted upstream answers GET and POST; other methods get its own 501.
        assert response.status_code < 500 or method not in ("GET", "POST"), (method, path)
        assert CANARY not in response.text, (method, path)
    assert upstream.requests
    for request in upstream.requests:
        assert CANARY not in request.body.decode(), request.path
        assert request.headers.get("authorization") == f"Bearer {UPSTREAM_KEY}"
        assert (
            setup.key_a not in str(request.headers) and setup.key_a[3:] not in request.body.decode()
        )
        assert not [h for h in request.headers if h.startswith("x-kredenc")]

    # A's turns landed in A's namespace only, and B's session was not written by A.
    assert len(wait_filed(kb, "a-asks", 2)) == 2
    assert wait_filed(kb.scoped("tenant-b"), "a-asks", 0) == []
    b_shared = wait_filed(kb.scoped("tenant-b"), "shared", 1)
    assert b_shared and all(QUESTION not in t for t in b_shared)
    assert all(CANARY not in h.text for h in kb.search("bank PIN", k=50))


def test_keyless_mode_serves_the_stores_namespace_only_on_loopback(
    open_store: Callable[..., Kredenc],
) -> None:
    """With no key in the store, loopback clients need none (the proxy as before)."""
    with open_store() as kb, LoopbackServer() as upstream:
        upstream.route("POST", "/v1/chat/completions", chat_route("Noted."))
        with ProxyServer(kb, ProxyConfig(upstream.base_url)) as base_url:
            response = httpx.post(
                base_url + "/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": "Bearer sk-clients-own"},
            )
            assert response.status_code == 200
            # The client's own key goes upstream when the proxy holds no kredenc keys.
            assert upstream.requests[-1].headers["authorization"] == "Bearer sk-clients-own"
            # A kredenc key never does, even sent when none is needed.
            stray = httpx.post(
                base_url + "/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": "Bearer kr_" + "x" * 43},
            )
            assert stray.status_code == 200
            assert "authorization" not in upstream.requests[-1].headers
            # A key added while the proxy runs locks it at once.
            key, _ = KeyRing(kb.home).add(kb.namespace)
            refused = httpx.post(
                base_url + "/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            )
            assert refused.status_code == 401
            allowed = httpx.post(
                base_url + "/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert allowed.status_code == 200
            # No upstream key configured: the kredenc key is dropped, nothing replaces it.
            assert "authorization" not in upstream.requests[-1].headers


def test_the_openai_sdk_authenticates_with_its_api_key(setup: Setup) -> None:
    openai = pytest.importorskip("openai")
    with openai.OpenAI(base_url=setup.base_url, api_key=setup.key_a, max_retries=0) as client:
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": QUESTION}]
        )
        assert reply.choices[0].message.content == "Noted."
    with (
        openai.OpenAI(base_url=setup.base_url, api_key="kr_wrong", max_retries=0) as client,
        pytest.raises(openai.AuthenticationError),
    ):
        client.models.list()
    assert setup.upstream.requests[-1].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_with_keys_the_proxy_may_bind_beyond_loopback(setup: Setup) -> None:
    from kredenc.interfaces.guard import check_bind

    check_bind("0.0.0.0", KeyRing(setup.kb.home))  # keys exist: allowed


def test_a_proxy_beyond_loopback_refuses_everyone_once_every_key_is_revoked(
    open_store: Callable[..., Kredenc],
) -> None:
    """Bound to a non-loopback address it never falls back to keyless serving."""
    from starlette.testclient import TestClient

    from kredenc.interfaces.proxy import create_app

    with open_store() as kb, LoopbackServer() as upstream:
        upstream.route("GET", "/v1/models", models_route())
        ring = KeyRing(kb.home)
        key, _ = ring.add(kb.namespace, "only")
        app = create_app(kb, ProxyConfig(upstream.base_url), bind_host="0.0.0.0")
        with TestClient(app, base_url="http://127.0.0.1") as client:
            ok = client.get("/v1/models", headers={"Authorization": f"Bearer {key}"})
            assert ok.status_code == 200
            ring.revoke("only")
            assert client.get("/v1/models").status_code == 401


@pytest.mark.parametrize(
    "path",
    [
        "/v1/../../admin/secret?x=1",
        "/v1/%2e%2e/%2e%2e/admin",
        "/v1/..%2f..%2fadmin",
        "/v1/models/../../../admin",
        "/v1/./models",
    ],
)
def test_a_passed_through_path_never_leaves_the_upstreams_v1_base(setup: Setup, path: str) -> None:
    """A day-one audit: ``GET /v1/../../admin/secret`` reached the upstream's
    ``/admin/secret``, percent-encoded dots too. A path with a dot segment is refused
    in the error shape before anything is sent."""
    import http.client
    import json

    host, port = setup.base_url.removeprefix("http://").split("/")[0].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", path, headers={"Authorization": f"Bearer {setup.key_a}"})
    reply = conn.getresponse()
    body = json.loads(reply.read())
    conn.close()
    assert reply.status == 400
    assert body["error"]["code"] == "bad_path" and body["error"]["hint"]
    assert setup.upstream.requests == []
