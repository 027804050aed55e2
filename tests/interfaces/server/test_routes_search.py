"""Search, the context graph and recall over HTTP: GET and POST search agree, the
server's limits (k, query length, hops, neighbours) are 422 with the one shape, and
a chunk's record carries its provenance."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from kredenc.engine import Kredenc

ErrorCheck = Callable[..., dict[str, Any]]


@pytest.fixture(scope="module")
def served(start_server: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("notes")
    note = folder / "harbour.md"
    note.write_text("# Harbour\n\nThe harbour crane lifts forty tonnes.\n")

    def setup(kb: Kredenc) -> None:
        kb.ingest([note])
        kb.remember("The user sails a blue sloop called Petrel.", kind="fact")

    return start_server(
        setup=setup, server_max_k=20, server_max_query_chars=100, server_max_hops=2,
        server_max_fanout=50,
    )  # fmt: skip


@pytest.fixture(scope="module")
def client(served: Any) -> Iterator[httpx.Client]:
    with served.client() as c:
        yield c


def test_get_and_post_search_agree(client: httpx.Client) -> None:
    got = client.get("/search", params={"q": "harbour crane", "k": 5, "mode": "lexical"}).json()
    posted = client.post("/search", json={"query": "harbour crane", "k": 5, "mode": "lexical"})
    assert posted.json() == got
    assert got["hits"] and "crane" in got["hits"][0]["text"]


def test_search_filters(client: httpx.Client) -> None:
    chunks = client.get("/search", params={"q": "harbour sloop", "loader": "markdown"}).json()
    assert chunks["hits"] and {h["type"] for h in chunks["hits"]} == {"chunk"}
    facts = client.get("/search", params={"q": "harbour sloop", "kind": "fact"}).json()
    assert [h["kind"] for h in facts["hits"]] == ["fact"]


def test_chunk_record_has_provenance(client: httpx.Client) -> None:
    hit = client.get("/search", params={"q": "crane tonnes", "loader": "markdown"}).json()["hits"][
        0
    ]
    body = client.get(f"/records/{hit['id']}").json()
    assert body["record"]["type"] == "chunk"
    assert body["provenance"]["file"].endswith("harbour.md")
    assert body["provenance"]["title"] == "Harbour" and body["provenance"]["loader"] == "markdown"


@pytest.mark.parametrize(
    ("path", "params", "words"),
    [
        ("/search", {"q": "x", "k": 21}, "k must be at most 20"),
        ("/search", {"q": "x" * 101}, "at most 100"),
        ("/search", {"q": "x", "hops": 3}, "hops must be at most 2"),
        ("/context_graph", {"query": "x", "k": 21}, "k must be at most 20"),
        ("/context_graph", {"query": "x", "max_hops": 3}, "max_hops must be at most 2"),
        ("/context_graph", {"query": "x", "neighbors_max": 51}, "neighbors_max"),
        ("/context_graph", {"query": "x" * 101}, "at most 100"),
    ],
)
def test_limits_are_422(
    client: httpx.Client,
    assert_error_shape: ErrorCheck,
    path: str,
    params: dict[str, Any],
    words: str,
) -> None:
    detail = assert_error_shape(client.get(path, params=params), 422, "invalid_input")
    assert words in detail["message"] and detail["hint"]


def test_post_search_limits_too(client: httpx.Client, assert_error_shape: ErrorCheck) -> None:
    assert_error_shape(client.post("/search", json={"query": "x", "k": 21}), 422, "invalid_input")


def test_bad_pages_and_times_are_422(client: httpx.Client, assert_error_shape: ErrorCheck) -> None:
    assert_error_shape(client.get("/search", params={"q": "x", "pages": "5-3"}), 422)
    assert_error_shape(client.get("/search", params={"q": "x", "since": "yesterday"}), 422)


def test_recall_appends_memories(client: httpx.Client) -> None:
    messages = [{"role": "user", "content": "What is the name of my sloop Petrel?"}]
    response = client.post("/recall", json={"messages": messages, "session_id": "r1"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["injected"] is True
    assert body["messages"][0] == messages[0] and len(body["messages"]) == 2
    assert any("Petrel" in item["text"] for item in body["items"])
    dry = client.post("/recall", json={"messages": messages, "session_id": "r1", "dry_run": True})
    assert dry.json()["dry_run"] is True and dry.json()["messages"] == messages
    assert body["corrections"] == {}
    typo = [{"role": "user", "content": "What is the name of my sloop Petrl?"}]
    fixed = client.post("/recall", json={"messages": typo, "session_id": "r2", "dry_run": True})
    assert fixed.json()["corrections"] == {"petrl": "petrel"}


def test_a_bad_recall_request_is_refused_not_skipped(
    client: httpx.Client, assert_error_shape: ErrorCheck
) -> None:
    """A day-one audit: mode "zzz" answered 200 with the reason in ``skipped``, and a
    session id with a NUL was taken (X-Kredenc-Session refuses control characters)."""
    messages = [{"role": "user", "content": "What is the name of my sloop Petrel?"}]
    for body in (
        {"messages": messages, "session_id": "r1", "mode": "zzz"},
        {"messages": messages, "session_id": "a\u0000b"},
        {"messages": messages, "session_id": "a\nb"},
    ):
        assert_error_shape(client.post("/recall", json=body), 422)
    ok = client.post("/recall", json={"messages": messages, "session_id": "r3", "mode": "lexical"})
    assert ok.status_code == 200 and ok.json()["error"] is None


def test_a_reranker_is_not_the_clients_choice(
    client: httpx.Client, assert_error_shape: ErrorCheck
) -> None:
    """Any other name would be a model path the server loads from disk or the network."""
    for name in ("/etc/passwd", "cross-encoder:some/model", "evil-org/model"):
        response = client.get("/search", params={"q": "harbour", "rerank": name})
        assert (
            "rerank must be 'none'" in assert_error_shape(response, 422, "invalid_input")["message"]
        )
    assert client.get("/search", params={"q": "harbour", "rerank": "none"}).status_code == 200


def test_hits_carry_relevance_and_min_score_filters(
    client: httpx.Client, assert_error_shape: ErrorCheck
) -> None:
    every = client.get("/search", params={"q": "harbour crane sloop", "k": 5}).json()["hits"]
    assert len(every) >= 2
    scores = sorted(h["relevance"] for h in every)
    assert all(0.0 <= s <= 1.0 for s in scores)
    floor = (scores[0] + scores[-1]) / 2  # between the lowest and the highest
    expected = [h["id"] for h in every if h["relevance"] >= floor]
    assert 0 < len(expected) < len(every)
    got = client.get("/search", params={"q": "harbour crane sloop", "k": 5, "min_score": floor})
    posted = client.post(
        "/search", json={"query": "harbour crane sloop", "k": 5, "min_score": floor}
    )
    assert [h["id"] for h in got.json()["hits"]] == expected
    assert posted.json() == got.json()
    for bad in ("1.5", "-0.1", "high"):
        assert_error_shape(client.get("/search", params={"q": "x", "min_score": bad}), 422)
    assert_error_shape(client.post("/search", json={"query": "x", "min_score": 2}), 422)


def test_search_passes_iterative(client: httpx.Client) -> None:
    body = {"query": "harbour crane", "k": 5, "mode": "lexical", "hops": 1}
    rounds = client.post("/search", json=body | {"iterative": True}).json()["hits"]
    got = client.get(
        "/search",
        params={"q": "harbour crane", "k": 5, "mode": "lexical", "hops": 1, "iterative": True},
    ).json()["hits"]
    assert rounds == got and rounds and "crane" in rounds[0]["text"]
    assert all(h["graph"] is None for h in rounds)  # rounds search; they walk no edges
    too_deep = client.post("/search", json=body | {"iterative": True, "hops": 3})
    assert too_deep.status_code == 422  # the server's hop limit holds for rounds too


def test_asked_at_reads_the_time_the_query_names(start_server: Callable[..., Any]) -> None:
    """GET and POST take ``asked_at``: "two months ago" puts what was filed since then
    first; a time that is not one is 422 with the one shape."""
    day, asked = 86_400.0, 1_700_000_000.0

    def setup(kb: Kredenc) -> None:
        kb.file_turns("a", [{"role": "user", "content": "The museum trip: a museum day.",
                             "at": asked - 150 * day}])  # fmt: skip
        kb.file_turns("b", [{"role": "user", "content": "I saw a museum.", "at": asked - 58 * day}])

    served = start_server(setup=setup)
    with served.client() as c:
        query = {"q": "museum trip two months ago", "mode": "lexical", "k": 2}
        plain = [h["text"] for h in c.get("/search", params=query).json()["hits"]]
        assert plain[0].startswith("The museum trip")
        dated = c.get("/search", params={**query, "asked_at": str(asked)}).json()["hits"]
        assert [h["text"] for h in dated] == plain[::-1]
        body = {"query": query["q"], "mode": "lexical", "k": 2, "asked_at": "2023-11-14T22:13:20Z"}
        assert [h["text"] for h in c.post("/search", json=body).json()["hits"]] == plain[::-1]
        bad = c.get("/search", params={**query, "asked_at": "the other day"})
        assert bad.status_code == 422 and "asked_at" in bad.text


def test_a_misspelt_word_is_searched_as_the_held_word_and_said(client: httpx.Client) -> None:
    meant = client.get("/search", params={"q": "harbour crane", "mode": "lexical"}).json()
    typed = client.get("/search", params={"q": "harbuor cranne", "mode": "lexical"}).json()
    assert meant["corrections"] == {}
    assert typed["corrections"] == {"harbuor": "harbour", "cranne": "crane"}
    assert [h["id"] for h in typed["hits"]] == [h["id"] for h in meant["hits"]]
    posted = client.post("/search", json={"query": "harbuor cranne", "mode": "lexical"}).json()
    assert posted["corrections"] == typed["corrections"]
