"""The index's named queries for the memory jobs: each narrowing keeps exactly the
memories it names, in filing order, inside one namespace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.testing.embedders import HashEmbedder


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[Kredenc]:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as store:
        yield store


def ids(kb: Kredenc, **narrow: object) -> list[str]:
    rows = kb.index.live_memory_rows(kb.namespace, **narrow)  # type: ignore[arg-type]
    return [str(r[1]) for r in rows]


def test_live_memory_rows_narrowings(kb: Kredenc) -> None:
    kb.store.clock = iter(float(t) for t in range(100, 200)).__next__  # filing order
    plain = kb.remember("a plain note").id
    checked = kb.remember("a checked fact", status="validated").id
    old = kb.remember("an outdated note", status="deprecated").id
    rule = kb.remember("a rule", read_only=True, episode_id="e1").id
    member = kb.remember("a member", episode_id="e1").id
    other = kb.remember("in another episode", episode_id="e2").id
    summary = kb.remember("the summary", source="reflection", episode_id="e1").id
    gone = kb.remember("forgotten soon").id
    kb.forget(gone)
    kb.scoped("elsewhere").remember("not in this namespace")
    kb.add_passages([{"text": "a passage, not a memory"}])

    assert ids(kb) == [plain, checked, old, rule, member, other, summary]
    assert checked not in ids(kb, not_status="validated")
    assert ids(kb, not_status="deprecated", reflections=False, in_episode=True) == [
        rule,
        member,
        other,
    ]
    assert ids(kb, reflections=True) == [summary]
    assert summary not in ids(kb, reflections=False)
    assert rule not in ids(kb, writable_only=True) and member in ids(kb, writable_only=True)
    assert ids(kb, episode_id="e1") == [rule, member, summary]
    assert ids(kb, episode_id="e1", reflections=True, not_status="deprecated") == [summary]

    row = kb.index.live_memory_rows(kb.namespace, episode_id="e1", reflections=True)[0]
    named = dict(zip(kb.index.MEMORY_ROW_COLUMNS, row, strict=True))
    assert named["id"] == summary and named["source"] == "reflection"
    assert named["episode_id"] == "e1" and named["created_at"] == 106.0
    assert not named["read_only"] and named["kind"] == "note"


def test_edge_reads(kb: Kredenc) -> None:
    a, b, c = (kb.remember(t).id for t in ("one", "two", "three"))
    kb.relate(a, b, "derived_from")
    kb.relate(a, c, "derived_from")
    kb.relate(b, c, "contradicts")
    kb.scoped("other").relate(*(kb.scoped("other").remember(t).id for t in "xy"), "contradicts")
    assert kb.index.targets_of(kb.namespace, a, "derived_from") == {b, c}
    assert kb.index.targets_of(kb.namespace, a, "contradicts") == set()
    assert kb.index.edge_pairs(kb.namespace, "contradicts") == [(b, c)]


def test_live_count_spans_namespaces(kb: Kredenc) -> None:
    kb.remember("here")
    gone = kb.remember("forgotten")
    kb.forget(gone.id)
    kb.scoped("there").add_passages([{"text": "a passage there"}])
    assert kb.index.live_count() == 2
