"""user_id / agent_id / run_id, tags and meta (``where``) in every leg of search, in graph
expansion and in the context graph, inside the namespace; a rebuild keeps them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.testing.embedders import HashEmbedder

MODES = ("lexical", "dense", "hybrid")


def open_store(home: Path) -> Kredenc:
    return Kredenc.open(home, embedder=HashEmbedder(), durability="none")


def file(kb: Kredenc) -> dict[str, str]:
    """The records of every test here, by a short name."""
    rows: dict[str, dict[str, Any]] = {
        "alex_tea": {
            "text": "Alex drinks green tea every morning",
            "user_id": "u-alex", "agent_id": "planner", "run_id": "r1",
            "tags": ["drinks", "morning"], "meta": {"project": "apollo", "priority": 1},
        },
        "sam_tea": {
            "text": "Sam drinks green tea at night",
            "user_id": "u-sam", "agent_id": "planner", "run_id": "r2",
            "tags": ["drinks"], "meta": {"project": "apollo", "priority": "1"},
        },
        "alex_coffee": {
            "text": "Alex likes black coffee",
            "user_id": "u-alex", "agent_id": "coach",
            "tags": ["drinks"], "meta": {"project": "gemini", "urgent": True},
        },
        "shared": {"text": "Green tea is grown in Japan"},
    }  # fmt: skip
    ids = {name: kb.remember(**row).id for name, row in rows.items()}
    kb.relate(ids["alex_tea"], ids["shared"], "related_to")
    kb.relate(ids["alex_tea"], ids["alex_coffee"], "related_to")
    return ids


@pytest.fixture(scope="module")
def scoped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kredenc, dict[str, str]]]:
    with open_store(tmp_path_factory.mktemp("scoping") / "store") as kb:
        ids = file(kb)
        other = kb.scoped("other")
        ids["other_alex"] = other.remember(
            "Alex drinks green tea in another namespace", user_id="u-alex", tags=["drinks"]
        ).id
        yield kb, ids


def names(ids: dict[str, str], hits: list[Any]) -> set[str]:
    by_id = {v: k for k, v in ids.items()}
    return {by_id.get(h.id, h.id) for h in hits}


@pytest.mark.parametrize("mode", MODES)
def test_each_leg_keeps_only_the_user_asked_for(
    scoped: tuple[Kredenc, dict[str, str]], mode: str
) -> None:
    kb, ids = scoped
    everyone = names(ids, kb.search("green tea drinks", mode=mode))
    assert {"alex_tea", "sam_tea"} <= everyone  # the filter is what takes them out
    alex = kb.search("green tea drinks", mode=mode, user_id="u-alex")
    assert "alex_tea" in names(ids, alex)
    assert names(ids, alex) <= {"alex_tea", "alex_coffee"}
    assert all(h.user_id == "u-alex" for h in alex)
    sam = kb.search("green tea", mode=mode, user_id="u-sam")
    assert names(ids, sam) == {"sam_tea"}
    assert (sam[0].agent_id, sam[0].run_id) == ("planner", "r2")
    assert kb.search("green tea", mode=mode, user_id="nobody") == []


@pytest.mark.parametrize("mode", MODES)
def test_agent_run_tags_and_where_in_each_leg(
    scoped: tuple[Kredenc, dict[str, str]], mode: str
) -> None:
    kb, ids = scoped

    def found(**filters: Any) -> set[str]:
        return names(ids, kb.search("green tea coffee drinks", mode=mode, **filters))

    assert found(agent_id="planner") == {"alex_tea", "sam_tea"}
    assert found(agent_id="coach") == {"alex_coffee"}
    assert found(run_id="r1") == {"alex_tea"}
    assert found(user_id="u-alex", agent_id="planner") == {"alex_tea"}
    assert found(tags=["morning"]) == {"alex_tea"}
    assert found(tags=["drinks", "morning"]) == {"alex_tea"}
    assert found(tags=["drinks"], user_id="u-sam") == {"sam_tea"}
    assert found(tags=["nowhere"]) == set()
    assert found(where={"project": "apollo"}) == {"alex_tea", "sam_tea"}
    assert found(where={"priority": 1}) == {"alex_tea"}  # the number, not the string
    assert found(where={"priority": 1.0}) == {"alex_tea"}  # JSON has one number type
    assert found(where={"priority": "1"}) == {"sam_tea"}
    assert found(where={"urgent": True}) == {"alex_coffee"}
    assert found(where={"urgent": 1}) == set()  # true is not 1
    assert found(where={"project": "apollo", "priority": 1}) == {"alex_tea"}
    assert found(where={"missing": None}) == set()


def test_graph_neighbours_pass_the_same_filters(scoped: tuple[Kredenc, dict[str, str]]) -> None:
    kb, ids = scoped
    plain = kb.search("morning", mode="lexical", hops=1)
    assert names(ids, plain) == {"alex_tea", "shared", "alex_coffee"}
    alex = kb.search("morning", mode="lexical", hops=1, user_id="u-alex")
    assert names(ids, alex) == {"alex_tea", "alex_coffee"}  # the shared fact has no user
    assert [h.graph for h in alex if h.id == ids["alex_coffee"]] == [
        f"related_to of {ids['alex_tea']}"
    ]
    tagged = kb.search("morning", mode="lexical", hops=1, tags=["drinks"])
    assert names(ids, tagged) == {"alex_tea", "alex_coffee"}


def test_the_context_graph_keeps_seeds_and_neighbours_in_scope(
    scoped: tuple[Kredenc, dict[str, str]],
) -> None:
    kb, ids = scoped
    graph = kb.context_graph("green tea", hops=1)
    assert {"alex_tea", "sam_tea", "shared"} <= names(ids, graph.nodes)
    sam = kb.context_graph("green tea", hops=1, user_id="u-sam")
    assert names(ids, sam.nodes) == {"sam_tea"}
    assert sam.nodes[0].user_id == "u-sam" and sam.nodes[0].agent_id == "planner"
    alex = kb.context_graph("", seed_ids=[ids["alex_tea"]], hops=1, user_id="u-alex")
    assert names(ids, alex.nodes) == {"alex_tea", "alex_coffee"}
    assert kb.context_graph("", seed_ids=[ids["alex_tea"]], user_id="u-sam").nodes == []
    where = kb.context_graph("black coffee", hops=1, where={"project": "gemini"})
    assert names(ids, where.nodes) == {"alex_coffee"}
    # The one record that passes shares nothing with "green tea": not a node by
    # meaning alone (context_graph.MIN_SIMILARITY).
    assert kb.context_graph("green tea", hops=1, where={"project": "gemini"}).nodes == []


def test_the_scope_stays_inside_the_namespace(scoped: tuple[Kredenc, dict[str, str]]) -> None:
    kb, ids = scoped
    for mode in MODES:
        mine = names(ids, kb.search("green tea", mode=mode, user_id="u-alex"))
        assert "other_alex" not in mine
        theirs = kb.scoped("other").search("green tea", mode=mode, user_id="u-alex")
        assert names(ids, theirs) == {"other_alex"}
    assert kb.scoped("other").context_graph("green tea", user_id="u-sam").nodes == []


@pytest.mark.parametrize(
    ("filters", "why"),
    [
        ({"user_id": ""}, "user_id must be a non-empty name"),
        ({"agent_id": "a\x00"}, "agent_id must not contain control characters"),
        ({"run_id": 5}, "run_id must be a non-empty name"),
        ({"tags": "drinks"}, "tags must be a list"),
        ({"where": {"a": [1]}}, "must be a string, number"),
        ({"where": {'a"': 1}}, "quote"),
        ({"where": "project=apollo"}, "where must map meta keys"),
    ],
)
def test_bad_filters_are_one_line_errors(
    scoped: tuple[Kredenc, dict[str, str]], filters: dict[str, Any], why: str
) -> None:
    kb, _ = scoped
    with pytest.raises(InvalidInput, match=why):
        kb.search("green tea", **filters)
    with pytest.raises(InvalidInput, match=why):
        kb.context_graph("green tea", **filters)


def test_a_rebuild_keeps_the_ids_tags_and_meta(tmp_path: Path) -> None:
    with open_store(tmp_path / "store") as kb:
        ids = file(kb)
        cases: list[dict[str, Any]] = [
            {"user_id": "u-alex"},
            {"agent_id": "planner"},
            {"run_id": "r2"},
            {"tags": ["morning"]},
            {"where": {"priority": "1"}},
        ]
        before = [names(ids, kb.search("green tea coffee", **c)) for c in cases]
        assert all(before)
        kb.rebuild()
        assert [names(ids, kb.search("green tea coffee", **c)) for c in cases] == before
        assert kb.get(ids["sam_tea"]).user_id == "u-sam"
