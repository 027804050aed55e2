"""/health (open, nothing about data), /stats, /check and the lifecycle jobs."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from kredenc import __version__
from kredenc.interfaces.auth import KeyRing

ErrorCheck = Callable[..., dict[str, Any]]


@pytest.fixture(scope="module")
def served(start_server: Callable[..., Any]) -> Any:
    return start_server(setup=lambda kb: kb.remember("a memory for the counts"))


@pytest.fixture(scope="module")
def client(served: Any) -> Iterator[httpx.Client]:
    with served.client() as c:
        yield c


def test_health_reveals_nothing(client: httpx.Client) -> None:
    assert client.get("/health").json() == {"status": "ok", "version": __version__}


def test_health_needs_no_key_when_the_store_holds_keys(
    start_server: Callable[..., Any], assert_error_shape: ErrorCheck
) -> None:
    served = start_server()
    KeyRing(served.kb.home).add("somebody")
    assert httpx.get(served.url + "/health").status_code == 200
    assert_error_shape(httpx.get(served.url + "/stats"), 401, "unauthorized")
    assert_error_shape(httpx.get(served.url + "/health/x"), 401)


def test_health_is_not_rate_limited(
    start_server: Callable[..., Any], assert_error_shape: ErrorCheck
) -> None:
    """A day-one audit: a health probe sharing the caller's bucket got 429 once the
    client had spent it. /health answers whatever the rate; the routes still count."""
    served = start_server(server_rate_per_minute=3)
    with httpx.Client(base_url=served.url) as anon:
        codes = [anon.get("/stats").status_code for _ in range(5)]
        assert codes[:3] == [200, 200, 200] and codes[3:] == [429, 429]
        assert [anon.get("/health").status_code for _ in range(5)] == [200] * 5
        assert_error_shape(anon.get("/stats"), 429, "rate_limited")


def test_no_page_loads_scripts_from_the_internet(client: httpx.Client) -> None:
    """FastAPI's /docs and /redoc load Swagger UI and ReDoc from a CDN (blank offline):
    not served; the OpenAPI document is."""
    assert client.get("/openapi.json").json()["info"]["title"] == "kredenc"
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        response = client.get(path)
        assert response.status_code == 404
        assert "cdn" not in response.text.lower()


def test_stats_count_the_namespace(served: Any, client: httpx.Client) -> None:
    stats = client.get("/stats").json()
    assert stats["records"] >= 1 and stats["namespace"] == "default"
    # No keys (loopback, one user): the whole store's figures, its folder too.
    assert stats["store"] == str(served.home) and stats["log_records"] >= 1


def test_a_tenants_stats_show_its_namespace_only(start_server: Callable[..., Any]) -> None:
    """A day-one audit: /stats served to a keyed tenant was the whole store's: the
    server's folder and the log's records and bytes, which grow with every tenant's
    writes. A tenant sees its namespace's figures and no path of the server."""
    served = start_server()
    keys = KeyRing(served.kb.home)
    alpha, _ = keys.add("alpha")
    beta, _ = keys.add("beta")
    with served.client(alpha) as a, served.client(beta) as b:
        assert a.post("/memories", json={"text": "alpha's own memory"}).status_code == 201
        before = a.get("/stats")
        for i in range(3):
            made = b.post("/memories", json={"text": f"beta writes a memory, take {i}"})
            assert made.status_code == 201
        after = a.get("/stats")
        theirs = b.get("/stats").json()
    assert before.status_code == after.status_code == 200
    assert before.json() == after.json()  # B's writes do not show in A's figures
    stats = after.json()
    assert stats["namespace"] == "alpha" and stats["records"] == 1
    assert theirs["namespace"] == "beta" and theirs["records"] == 3
    home = str(served.home)
    for shown in (after.text, json.dumps(theirs)):
        assert home not in shown and home.replace("/", "\\/") not in shown
    assert not {"store", "log_records", "log_bytes"} & set(stats)


def test_a_tenants_check_tells_whether_the_store_is_sound_and_nothing_of_others(
    start_server: Callable[..., Any],
) -> None:
    """The review's find: /check gave a keyed tenant the whole store's findings (the
    server's folder, the log's records and bytes as other tenants write, and when the
    index is at fault other namespaces and record ids), and its full scan to run at
    will. A tenant gets whether the store is sound and which part is at fault."""
    served = start_server()
    keys = KeyRing(served.kb.home)
    alpha, _ = keys.add("alpha")
    beta, _ = keys.add("beta")
    with served.client(alpha) as a, served.client(beta) as b:
        before = a.get("/check")
        for i in range(3):
            assert b.post("/memories", json={"text": f"beta writes, take {i}"}).status_code == 201
        after = a.get("/check")
        full = a.get("/check", params={"full": "true"})
    assert before.status_code == after.status_code == 200
    assert before.json() == after.json() == {"sound": True, "findings": ["sound"], "faults": []}
    assert str(served.home) not in after.text
    assert full.status_code == 403 and full.json()["error"]["code"] == "operator_only"
    assert (
        "kredenc" in full.json()["error"]["hint"] and "check --full" in full.json()["error"]["hint"]
    )


def test_check_on_the_live_store_is_sound(client: httpx.Client) -> None:
    client.post("/memories", json={"text": "written just before the check"})
    report = client.get("/check").json()
    assert report["sound"] is True, report["findings"]
    assert report["faults"] == [] and report["findings"][-1] == "sound"
    assert client.get("/check", params={"full": "true"}).json()["sound"] is True


def test_jobs_run_and_their_last_run(client: httpx.Client, assert_error_shape: ErrorCheck) -> None:
    before = {j["name"]: j for j in client.get("/jobs").json()["items"]}
    assert set(before) == {"episodes", "contradictions", "reflect", "decay"}
    assert before["decay"]["last_run"] is None and before["decay"]["interval_s"] > 0
    ran = client.post("/jobs/run", json={"names": ["decay"]}).json()
    assert [r["job"] for r in ran["reports"]] == ["decay"]
    assert ran["reports"][0]["examined"] >= 1
    after = {j["name"]: j for j in client.get("/jobs").json()["items"]}
    assert after["decay"]["last_run"] is not None
    assert after["decay"]["last_result"] == ran["reports"][0]
    assert after["episodes"]["last_run"] is None
    all_jobs = client.post("/jobs/run", json={}).json()
    assert [r["job"] for r in all_jobs["reports"]] == [
        "episodes",
        "contradictions",
        "reflect",
        "decay",
    ]
    assert_error_shape(client.post("/jobs/run", json={"names": ["nope"]}), 422, "invalid_input")
