"""Listing memories, documents and sessions (issue 16): filters and paging."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput, NotFound

OpenStore = Callable[..., Kredenc]


def test_memories_filters_and_paging(open_store: OpenStore) -> None:
    with open_store() as kb:
        made = [
            kb.remember(
                f"memory {i}", kind="fact" if i % 2 else "task", tags=["even"] if i % 2 == 0 else []
            )
            for i in range(6)
        ]
        kb.score(made[1].id, status="validated")
        kb.forget(made[3].id)
        kb.scoped("elsewhere").remember("not here", kind="fact")
        everything = [m.id for m in kb.list_memories()]
        assert everything == [m.id for m in made if m.id != made[3].id]  # filing order
        assert [m.id for m in kb.list_memories(limit=2, offset=1)] == everything[1:3]
        assert [m.id for m in kb.list_memories(kinds=["fact"])] == [made[1].id, made[5].id]
        assert [m.id for m in kb.list_memories(statuses=["validated"])] == [made[1].id]
        assert [m.id for m in kb.list_memories(tags=["even"], offset=1, limit=1)] == [made[2].id]
        cut = made[2].created_at
        assert [m.id for m in kb.list_memories(until=cut)] == [made[0].id, made[1].id]
        assert made[2].id in [m.id for m in kb.list_memories(since=cut)]
        assert kb.list_memories(drawer="nowhere") == []
        with pytest.raises(InvalidInput, match="unknown kind 'fcat'"):
            kb.list_memories(kinds=["fcat"])
        with pytest.raises(InvalidInput, match="limit"):
            kb.list_memories(limit=0)


def test_documents_and_sessions(open_store: OpenStore, tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Alpha\n\nAlpha text about owls.\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("Beta text about bats.\n", encoding="utf-8")
    with open_store() as kb:
        kb.ingest([tmp_path / "a.md", tmp_path / "b.txt"])
        docs = kb.list_documents()
        assert [Path(d.origin).name for d in docs] == ["a.md", "b.txt"]
        assert all(d.chunks >= 1 for d in docs)
        md = kb.list_documents(source="*.md")
        assert [Path(d.origin).name for d in md] == ["a.md"]
        assert kb.list_documents(loaders=[md[0].loader])[0].id == md[0].id
        with pytest.raises(InvalidInput, match="unknown loader 'nosuch'"):
            kb.list_documents(loaders=["nosuch"])
        kb.file_turns(
            "s1", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        )
        kb.file_turns("s2", [{"role": "user", "content": "later"}])
        sessions = kb.list_sessions()
        assert [(s.session, s.turns) for s in sessions] == [("s2", 1), ("s1", 2)]
        assert [s.session for s in kb.list_sessions(offset=1)] == ["s1"]
        chunk = kb.search("owls", k=1)[0]
        where = kb.provenance(chunk.id)
        assert where is not None and where["document"] == md[0].id
        assert Path(where["file"]).name == "a.md" and where["title"] == "Alpha"
        assert kb.provenance(kb.remember("plain").id) is None


def test_relationships_listed_and_per_record(open_store: OpenStore) -> None:
    with open_store() as kb:
        a, b, c = (kb.remember(f"node {i}") for i in range(3))
        kb.relate(a.id, b.id, "supports")
        kb.relate(c.id, a.id, "contradicts", weight=0.5)
        kb.relate(b.id, c.id, "precedes")
        other = kb.scoped("elsewhere")
        x, y = other.remember("x"), other.remember("y")
        other.relate(x.id, y.id, "supports")
        edges = [(e.src, e.dst, e.rel) for e in kb.list_relationships()]
        assert edges == [
            (a.id, b.id, "supports"),
            (c.id, a.id, "contradicts"),
            (b.id, c.id, "precedes"),
        ]
        assert [(e.src, e.dst) for e in kb.list_relationships(limit=1, offset=1)] == [(c.id, a.id)]
        assert [(e.src, e.dst, e.weight) for e in kb.relationships_of(a.id)] == [
            (a.id, b.id, 1.0),
            (c.id, a.id, 0.5),
        ]
        with pytest.raises(NotFound):
            kb.relationships_of(x.id)  # another namespace's record: not found, like a missing one
        kb.forget(b.id)
        assert [(e.src, e.dst) for e in kb.list_relationships()] == [(c.id, a.id)]
