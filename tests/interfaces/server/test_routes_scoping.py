"""user_id / agent_id / run_id, tags and meta over HTTP: filed through POST /memories and
filtering search (GET and POST), the listing, the context graph and recall, inside the
caller's namespace."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest


@pytest.fixture(scope="module")
def client(start_server: Callable[..., Any]) -> Iterator[httpx.Client]:
    with start_server().client() as c:
        for user, tea, project in (("ana", "oolong", "apollo"), ("ben", "rooibos", "hermes")):
            body = {
                "text": f"The user drinks {tea} tea every morning",
                "kind": "preference",
                "user_id": user,
                "agent_id": "tutor",
                "tags": ["tea", user],
                "meta": {"project": project, "priority": 1 if user == "ana" else 2},
            }
            made = c.post("/memories", json=body)
            assert made.status_code == 201, made.text
            assert made.json()["user_id"] == user
        for user, text in (
            ("ana", "The weekly report goes out on Fridays"),
            ("ben", "The staging database runs on the second rack"),
            (None, "Office plants are watered by the facilities team"),
        ):  # other words, so the query's words are rare in the store (BM25's idf)
            filler = {"text": text, "kind": "fact"} | ({"user_id": user} if user else {})
            assert c.post("/memories", json=filler).status_code == 201
        yield c


def _users(hits: list[dict[str, Any]]) -> set[str]:
    return {h["user_id"] for h in hits}


def test_search_by_user_get_and_post(client: httpx.Client) -> None:
    everyone = client.get("/search", params={"q": "tea morning", "kind": "preference"}).json()
    assert _users(everyone["hits"]) == {"ana", "ben"}
    params = {"q": "tea morning", "user_id": "ana", "kind": "preference"}
    got = client.get("/search", params=params).json()["hits"]
    body = {"query": "tea morning", "user_id": "ana", "kind": ["preference"]}
    posted = client.post("/search", json=body).json()
    assert _users(got) == {"ana"} and posted["hits"] == got
    assert client.get("/search", params={"q": "tea", "agent_id": "other"}).json()["hits"] == []


def test_search_by_tag_and_meta(client: httpx.Client) -> None:
    by_tag = client.get("/search", params={"q": "tea", "tag": ["tea", "ben"]}).json()["hits"]
    assert _users(by_tag) == {"ben"}
    where = client.get("/search", params={"q": "tea", "where": "project=apollo"}).json()
    assert _users(where["hits"]) == {"ana"}
    typed = client.post("/search", json={"query": "tea", "where": {"priority": 2}}).json()
    assert _users(typed["hits"]) == {"ben"}
    text = client.post("/search", json={"query": "tea", "where": {"priority": "2"}}).json()
    assert text["hits"] == []  # "2" is not 2


def test_bad_where_is_one_line_422(client: httpx.Client) -> None:
    got = client.get("/search", params={"q": "tea", "where": "project"})
    assert got.status_code == 422
    assert "where 'project' is not key=value" in got.json()["error"]["message"]


def test_listing_graph_and_recall_by_user(client: httpx.Client) -> None:
    page = client.get("/memories", params={"user_id": "ben"}).json()
    assert _users(page["items"]) == {"ben"} and len(page["items"]) == 2
    graph = client.get("/context_graph", params={"query": "tea morning", "user_id": "ana"})
    assert graph.status_code == 200 and graph.json()["nodes"]
    assert {n["user_id"] for n in graph.json()["nodes"]} == {"ana"}
    body = {
        "messages": [{"role": "user", "content": "Which tea do I drink every morning?"}],
        "session_id": "s1",
        "user_id": "ben",
        "dry_run": True,
        "mode": "lexical",  # words only: no 50 ms race with the dense leg on a loaded box
    }
    recalled = client.post("/recall", json=body).json()
    assert recalled["items"], repr({k: v for k, v in recalled.items() if k != "messages"})
    assert all("rooibos" in i["text"] for i in recalled["items"])


def test_a_session_id_of_another_store_does_not_start_this_ones_session(
    start_server: Callable[..., Any],
) -> None:
    """Sessions are per store and namespace: "s9" first seen on one store (before this
    store's memories were filed) does not hide those memories from "s9" here."""
    say = {"messages": [{"role": "user", "content": "Which kayak do I paddle?"}]}
    ask = {**say, "session_id": "s9", "dry_run": True, "mode": "lexical"}
    with start_server().client() as first:
        assert first.post("/recall", json=ask).status_code == 200
    with start_server().client() as second:
        for text in ("The user paddles a red kayak", "Lunch is at noon", "Rain is due"):
            assert second.post("/memories", json={"text": text}).status_code == 201
        items = second.post("/recall", json=ask).json()["items"]
        assert [i["text"] for i in items] == ["The user paddles a red kayak"]
