"""Memories, records and relationships over HTTP against a real store: a filed memory
is found by search, listed with its filters and pages, scored, related (the relation
shows in the context graph and in /relationships), and forgotten (gone from search and
reads alike)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

ErrorCheck = Callable[..., dict[str, Any]]


@pytest.fixture(scope="module")
def client(start_server: Callable[..., Any]) -> Iterator[httpx.Client]:
    with start_server().client() as c:
        yield c


def file(client: httpx.Client, text: str, **fields: Any) -> dict[str, Any]:
    response = client.post("/memories", json={"text": text, **fields})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def hit_ids(client: httpx.Client, query: str) -> list[str]:
    response = client.get("/search", params={"q": query, "k": 20})
    assert response.status_code == 200, response.text
    return [h["id"] for h in response.json()["hits"]]


def test_filed_memory_is_read_and_found(client: httpx.Client) -> None:
    made = file(client, "The kettle whistles at dawn", kind="fact", tags=["kitchen"])
    assert made["kind"] == "fact" and made["tags"] == ["kitchen"]
    assert client.get(f"/memories/{made['id']}").json()["text"] == made["text"]
    assert made["id"] in hit_ids(client, "kettle whistles")
    posted = client.post("/search", json={"query": "kettle whistles", "k": 20}).json()
    assert posted["query"] == "kettle whistles"
    assert made["id"] in [h["id"] for h in posted["hits"]]


def test_scores_given_at_filing(client: httpx.Client) -> None:
    made = file(client, "Scored at birth", importance=0.9, stability=0.2, status="validated")
    assert (made["importance"], made["stability"], made["status"]) == (0.9, 0.2, "validated")


def test_list_filters_and_pages(client: httpx.Client) -> None:
    ids = [
        file(client, f"paged preference {i}", kind="preference", tags=["paged"])["id"]
        for i in range(5)
    ]
    file(client, "paged but a fact", kind="fact", tags=["paged"])
    first = client.get("/memories", params={"tag": "paged", "kind": "preference", "limit": 2})
    assert first.status_code == 200, first.text
    page = first.json()
    assert [m["id"] for m in page["items"]] == ids[:2]
    assert (page["limit"], page["offset"], page["next_offset"]) == (2, 0, 2)
    last = client.get(
        "/memories", params={"tag": "paged", "kind": "preference", "limit": 2, "offset": 4}
    ).json()
    assert [m["id"] for m in last["items"]] == ids[4:]
    assert last["next_offset"] is None
    both = client.get(
        "/memories", params=[("tag", "paged"), ("kind", "preference"), ("kind", "fact")]
    )
    assert len(both.json()["items"]) == 6


def test_list_by_time(client: httpx.Client) -> None:
    made = file(client, "timed memory", tags=["timed"])
    at = made["created_at"]
    after = client.get("/memories", params={"tag": "timed", "since": str(at + 1)}).json()
    before = client.get("/memories", params={"tag": "timed", "until": str(at + 1)}).json()
    assert after["items"] == [] and [m["id"] for m in before["items"]] == [made["id"]]


def test_list_refuses_an_unknown_kind(client: httpx.Client, assert_error_shape: ErrorCheck) -> None:
    assert_error_shape(client.get("/memories", params={"kind": "bogus"}), 422, "invalid_input")


def test_score_changes_the_memory(client: httpx.Client) -> None:
    made = file(client, "A memory to rescore")
    response = client.patch(
        f"/memories/{made['id']}",
        json={"importance": 0.95, "status": "deprecated", "reason": "old"},
    )
    assert response.status_code == 200, response.text
    assert (response.json()["importance"], response.json()["status"]) == (0.95, "deprecated")
    again = client.get(f"/memories/{made['id']}").json()
    assert (again["importance"], again["status"]) == (0.95, "deprecated")


def test_score_without_fields_is_refused(
    client: httpx.Client, assert_error_shape: ErrorCheck
) -> None:
    made = file(client, "Nothing to change")
    assert_error_shape(client.patch(f"/memories/{made['id']}", json={}), 422, "invalid_input")


def test_history_pages_the_changes_and_404s_like_a_read(
    client: httpx.Client, assert_error_shape: ErrorCheck
) -> None:
    made = file(client, "The shed key hangs by the back door", importance=0.4)
    for n, why in enumerate(("moved it", "moved it back", None)):
        body = {"importance": 0.5 + n / 10, **({"reason": why} if why else {})}
        assert client.patch(f"/memories/{made['id']}", json=body).status_code == 200
    first = client.get(f"/memories/{made['id']}/history", params={"limit": 2})
    assert first.status_code == 200, first.text
    page = first.json()
    assert (page["limit"], page["offset"], page["next_offset"]) == (2, 0, 2)
    assert [e["change"] for e in page["items"]] == ["created", "changed"]
    assert page["items"][0]["text"] == made["text"]
    assert page["items"][1]["fields"] == [{"field": "importance", "old": 0.4, "new": 0.5}]
    assert page["items"][1]["reason"] == "moved it"
    rest = client.get(f"/memories/{made['id']}/history", params={"offset": 2}).json()
    assert [e["reason"] for e in rest["items"]] == ["moved it back", None]
    assert rest["next_offset"] is None
    assert client.delete(f"/memories/{made['id']}").status_code == 204
    gone = client.get(f"/memories/{made['id']}/history").json()["items"]
    assert [e["change"] for e in gone][-1] == "forgotten"
    assert gone[0]["text"] is None and gone[0]["redacted"] is True
    missing = client.get("/memories/m0000000000000000000/history")
    assert_error_shape(missing, 404, "not_found")
    assert_error_shape(
        client.get(f"/memories/{made['id']}/history", params={"limit": 0}), 422, "invalid_request"
    )


def test_forget_removes_it_everywhere(client: httpx.Client, assert_error_shape: ErrorCheck) -> None:
    made = file(client, "The zeppelin hangar code is blue")
    assert made["id"] in hit_ids(client, "zeppelin hangar")
    response = client.delete(f"/memories/{made['id']}")
    assert response.status_code == 204 and response.content == b""
    assert made["id"] not in hit_ids(client, "zeppelin hangar")
    assert_error_shape(client.get(f"/memories/{made['id']}"), 404, "not_found")
    assert_error_shape(client.delete(f"/memories/{made['id']}"), 404, "not_found")


def test_relations_show_in_the_graph(client: httpx.Client, assert_error_shape: ErrorCheck) -> None:
    a = file(client, "The lighthouse keeper is Marta")
    b = file(client, "Marta keeps a logbook of storms")
    response = client.post(
        "/relationships", json={"src": a["id"], "dst": b["id"], "rel": "supports"}
    )
    assert response.status_code == 204, response.text
    edge = {"src": a["id"], "dst": b["id"], "rel": "supports", "weight": 1.0}
    assert client.get(f"/relationships/{a['id']}").json() == {"items": [edge]}
    assert client.get(f"/relationships/{b['id']}").json() == {"items": [edge]}
    everything = client.get("/relationships", params={"limit": 1000}).json()
    assert edge in everything["items"]
    graph = client.get(
        "/context_graph", params={"query": "lighthouse keeper", "max_hops": 1, "seed_ids": a["id"]}
    )
    assert graph.status_code == 200, graph.text
    body = graph.json()
    assert {a["id"], b["id"]} <= {n["id"] for n in body["nodes"]}
    assert edge in body["edges"]
    removed = client.post(
        "/relationships", json={"src": a["id"], "dst": b["id"], "rel": "supports", "remove": True}
    )
    assert removed.status_code == 204
    assert client.get(f"/relationships/{a['id']}").json() == {"items": []}
    assert_error_shape(client.get("/relationships/m0000000000000000000"), 404, "not_found")


def test_relating_a_missing_record_is_404(
    client: httpx.Client, assert_error_shape: ErrorCheck
) -> None:
    a = file(client, "alone")
    response = client.post(
        "/relationships", json={"src": a["id"], "dst": "m0000000000000000000", "rel": "supports"}
    )
    assert_error_shape(response, 404, "not_found")


def test_record_of_a_memory_has_no_provenance(client: httpx.Client) -> None:
    made = file(client, "Not from a document")
    body = client.get(f"/records/{made['id']}").json()
    assert body["record"]["id"] == made["id"] and body["provenance"] is None


@pytest.mark.parametrize(
    "body",
    [
        {"text": "x", "confidence": False},  # not a number
        {"text": "x", "importance": "0.5"},  # text, not a number
        {"text": 5},
        {"text": "x", "tags": "one"},
    ],
)
def test_bodies_take_the_documented_types_only(
    client: httpx.Client, assert_error_shape: ErrorCheck, body: dict[str, Any]
) -> None:
    assert_error_shape(client.post("/memories", json=body), 422, "invalid_request")


def test_an_error_does_not_send_back_a_huge_value(client: httpx.Client) -> None:
    """A 100,000-character kind or relation came back whole in the error (twice over
    MCP): an error is one short line whatever was sent."""
    for path, body in (
        ("/memories", {"text": "t", "kind": "k" * 100_000}),
        ("/memories?kind=" + "k" * 5_000, None),
    ):
        r = client.post(path, json=body) if body else client.get(path)
        assert r.status_code == 422, r.text
        assert len(r.content) < 1_500, len(r.content)
    a, b = file(client, "first"), file(client, "second")
    r = client.post("/relationships", json={"src": a["id"], "dst": b["id"], "rel": "r" * 50_000})
    assert r.status_code == 422 and len(r.content) < 1_500, len(r.content)


def test_a_field_the_route_does_not_take_is_refused_not_ignored(client: httpx.Client) -> None:
    """A mistyped field ("imprtance") was ignored: the memory was filed with the default
    importance and the caller never knew. Now it is refused, naming the field, and
    nothing is filed."""
    before = client.get("/memories", params={"limit": 9999}).json()["items"]
    r = client.post("/memories", json={"text": "typo test", "imprtance": 0.9})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_request" and "imprtance" in error["message"]
    assert client.get("/memories", params={"limit": 9999}).json()["items"] == before
