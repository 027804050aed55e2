"""Agent tools: typed functions that answer with a message and never raise."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.memory.tools import memory_reflect, memory_relate, memory_score, memory_search
from kredenc.testing.embedders import HashEmbedder


@pytest.fixture
def two(kb: Kredenc) -> tuple[str, str]:
    a = kb.remember("The kestrel nests on the old water tower", kind="fact").id
    b = kb.remember("Kestrels return to the water tower every spring", kind="fact").id
    return a, b


def test_search(kb: Kredenc, two: tuple[str, str]) -> None:
    out = memory_search(kb.store, kb.namespace, "kestrel water tower", k=2)
    lines = out.splitlines()
    assert lines[0] == "2 memories for 'kestrel water tower':"
    assert lines[1].startswith("1. [m") and "(fact, importance 0.50)" in lines[1]
    kb.use_namespace("empty")
    assert memory_search(kb.store, kb.namespace, "zebra") == "no memories match 'zebra'"
    kb.use_namespace("default")
    kb.score(two[0], status="validated")
    assert "validated" in memory_search(
        kb.store, kb.namespace, "kestrel nests old water tower", k=1
    )


def test_relate_and_score(kb: Kredenc, two: tuple[str, str]) -> None:
    a, b = two
    assert (
        memory_relate(kb.store, kb.namespace, b, a, "supports", 0.5)
        == f"related {b} -[supports 0.5]-> {a}"
    )
    assert kb.index.edges_among(kb.namespace, [a, b]) == [(b, a, "supports", 0.5)]
    assert (
        memory_relate(kb.store, kb.namespace, b, a, "supports", remove=True)
        == f"removed {b} -[supports]-> {a}"
    )
    assert memory_score(
        kb.store, kb.namespace, a, importance=0.9, status="validated", reason="seen it"
    ) == (f"{a}: importance 0.9, status validated")
    assert kb.get(a).importance == 0.9


BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("search", {"query": ""}, "query must be non-empty text"),
    ("search", {"query": 42}, "query must be non-empty text"),
    ("search", {"query": "x", "k": 0}, "k must be a whole number"),
    ("search", {"query": "x", "k": "5"}, "k must be a whole number"),
    ("relate", {"src": "m-nope", "dst": "A", "rel": "supports"}, "no record 'm-nope'"),
    ("relate", {"src": "A", "dst": "B", "rel": "loves"}, "unknown relation 'loves'"),
    ("relate", {"src": "A", "dst": "B", "rel": "supports", "weight": 7}, "weight must be"),
    ("relate", {"src": "A", "dst": "B", "rel": "supports", "weight": "x"}, "weight must be"),
    ("relate", {"src": "A", "dst": "A", "rel": "supports"}, "cannot be related to itself"),
    ("relate", {"src": None, "dst": "A", "rel": "supports"}, "src must be non-empty text"),
    ("score", {"id": "m-nope", "importance": 0.5}, "no record 'm-nope'"),
    ("score", {"id": "A"}, "nothing to change"),
    ("score", {"id": "A", "importance": 1.5}, "importance must be between 0 and 1"),
    ("score", {"id": "A", "importance": "high"}, "importance must be a number"),
    ("score", {"id": "A", "status": "great"}, "unknown status 'great'"),
    ("score", {"id": "A", "task_status": "done"}, "only for memories of kind 'task'"),
    ("score", {"id": "A", "valid_from": "soon"}, "is not a time"),
    ("score", {"id": "A", "colour": "red"}, "unknown field(s): colour"),
    ("score", {"id": "A", "importance": 0.2, "reason": 3}, "reason must be text"),
    ("score", {"id": "R", "importance": 0.2}, "is read-only"),
    ("reflect", {"episode_id": "nope"}, "no episode 'nope'"),
    ("reflect", {"episode_id": ""}, "episode_id must be non-empty text"),
]
TOOLS: dict[str, Callable[..., str]] = {
    "search": memory_search,
    "relate": memory_relate,
    "score": memory_score,
    "reflect": memory_reflect,
}


@pytest.mark.parametrize(("tool", "args", "expected"), BAD_CALLS)
def test_bad_calls_become_messages(
    kb: Kredenc, two: tuple[str, str], tool: str, args: dict[str, Any], expected: str
) -> None:
    ids = {"A": two[0], "B": two[1], "R": kb.remember("a rule", read_only=True).id}
    args = {k: ids.get(v, v) if isinstance(v, str) else v for k, v in args.items()}
    end = kb.haystack.end
    out = TOOLS[tool](kb.store, kb.namespace, **args)
    assert out.startswith("error: ") and "\n" not in out
    assert expected in out
    assert kb.haystack.end == end  # nothing was written


def test_reflect(kb: Kredenc) -> None:
    for text in ("Packed the tent.", "Pitched the tent by the lake.", "Took the tent down."):
        kb.remember(text, episode_id="camp")
    out = memory_reflect(kb.store, kb.namespace, "camp")
    assert out.startswith("reflected camp -> m") and "from 3 memories" in out
    assert (
        memory_reflect(kb.store, kb.namespace, "camp")
        == "nothing to reflect: episode camp already up to date"
    )
    assert (
        memory_reflect(kb.store, kb.namespace)
        == "nothing to reflect: 1 episode(s) already up to date"
    )


def test_a_read_only_store_is_a_message(kb: Kredenc, two: tuple[str, str]) -> None:
    home = kb.home
    kb.close()
    with Kredenc.open(home, embedder=HashEmbedder(), read_only=True) as ro:
        assert memory_score(ro.store, ro.namespace, two[0], importance=0.1).startswith(
            "error: the store is open"
        )
        assert memory_relate(ro.store, ro.namespace, *two, "supports").startswith(
            "error: the store is open"
        )
        assert memory_reflect(ro.store, ro.namespace).startswith("nothing to reflect")
