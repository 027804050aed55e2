"""Export and import (issue 16): lossless round trips, checked lines, batches, mem0."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput, ReadOnlyRecord
from kredenc.memory import transfer

OpenStore = Callable[..., Kredenc]

DOC = """# Tea guide

Green tea is steeped at eighty degrees for two minutes.

## Coffee

Espresso needs finely ground beans and nine bars of pressure.
"""


def _export(kb: Kredenc, namespaces: list[str] | None = None) -> list[str]:
    out = io.StringIO()
    n = kb.export(out, namespaces)
    lines = out.getvalue().splitlines()
    assert n == len(lines)
    return lines


def _fill(kb: Kredenc, tmp_path: Path) -> dict[str, str]:
    src = tmp_path / "guide.md"
    src.write_text(DOC, encoding="utf-8")
    kb.ingest([src])
    src.write_text(DOC + "\nMatcha is whisked, never steeped.\n", encoding="utf-8")
    kb.ingest([src])  # refiled: version 2 replaces version 1
    kb.remember("The user's name is Ada", kind="fact", read_only=True)
    tea = kb.remember(
        "The user drinks oolong every morning",
        kind="preference",
        tags=["drink", "morning"],
        importance=0.9,
        confidence=0.7,
        status="validated",
        valid_from="2026-01-01T00:00:00Z",
        valid_to="2027-01-01T00:00:00Z",
        meta={"origin": "chat"},
    )
    job = kb.remember("Renew the passport", kind="task", task_status="pending")
    kb.score(job.id, importance=0.2, status="disputed", task_status="active", reason="later")
    gone = kb.remember("The user's old phone number is 555-0100", kind="fact")
    derived = kb.remember("The user can be called at home", kind="fact")
    kb.relate(tea.id, job.id, "related_to", weight=0.5)
    kb.relate(derived.id, gone.id, "derived_from")
    kb.forget(gone.id)  # derived becomes disputed; the edge goes
    kb.file_turns("s1", [{"role": "user", "content": "I like oolong"}])
    kb.scoped("other").remember("A memory in another namespace", kind="note")
    return {"tea": tea.id, "job": job.id, "gone": gone.id, "derived": derived.id}


def test_round_trip_is_lossless(open_store: OpenStore, tmp_path: Path) -> None:
    with open_store(tmp_path / "a") as a:
        ids = _fill(a, tmp_path)
        first = _export(a)
        hits_a = [(h.id, round(h.score, 6)) for h in a.search("oolong tea morning", k=8)]
        docs_a = [(d.id, d.origin, d.chunks) for d in a.list_documents()]
    header = json.loads(first[0])
    assert header["format"] == "kredenc-export" and header["version"] == 1
    assert header["embedding_model"] and header["namespaces"] == ["default", "other"]
    body = [json.loads(line) for line in first[1:]]
    by_id = {o["id"]: o for o in body if o["op"] == "put"}
    assert ids["gone"] not in by_id  # forgotten records are not exported
    assert {o["type"] for o in by_id.values()} == {"document", "chunk", "memory", "turn"}
    (doc,) = [o for o in by_id.values() if o["type"] == "document" and o["ns"] == "default"]
    assert doc["version"] == 2  # only the live version of a refiled document
    assert any("Matcha" in o.get("text", "") for o in by_id.values())
    assert [o["read_only"] for o in by_id.values() if o.get("read_only")] == [True]
    job = by_id[ids["job"]]
    assert job["scores"]["importance"] == 0.2  # the state now, not as filed
    assert (job["status"], job["task_status"]) == ("disputed", "active")
    assert by_id[ids["derived"]]["status"] == "disputed"
    tea = by_id[ids["tea"]]
    assert tea["valid_from"] == 1767225600.0 and tea["tags"] == ["drink", "morning"]
    edges = [o for o in body if o["op"] == "edge"]
    assert (ids["tea"], ids["job"], "related_to", 0.5) in {
        (e["src"], e["dst"], e["rel"], e["weight"]) for e in edges
    }
    assert not any(ids["gone"] in (e["src"], e["dst"]) for e in edges)

    with open_store(tmp_path / "b") as b:
        report = b.import_lines(first)
        assert report.records == len(by_id) and report.edges == len(edges)
        assert report.namespaces == ["default", "other"]
        second = _export(b)
        hits_b = [(h.id, round(h.score, 6)) for h in b.search("oolong tea morning", k=8)]
        docs_b = [(d.id, d.origin, d.chunks) for d in b.list_documents()]
        got = b.get(ids["job"])
        assert (got.importance, got.status, got.task_status) == (0.2, "disputed", "active")
        assert b.session_history("s1") == [{"role": "user", "content": "I like oolong"}]
        (ada,) = [i for i, o in by_id.items() if o.get("read_only")]
        with pytest.raises(ReadOnlyRecord):
            b.forget(ada)
    assert sorted(second[1:]) == sorted(first[1:])
    assert second[0] == first[0]
    assert hits_b == hits_a and hits_a
    assert docs_b == docs_a and docs_a[0][2] >= 1


def test_one_namespace_only(open_store: OpenStore, tmp_path: Path) -> None:
    with open_store() as kb:
        _fill(kb, tmp_path)
        lines = _export(kb, ["other"])
    assert json.loads(lines[0])["namespaces"] == ["other"]
    assert [json.loads(line)["ns"] for line in lines[1:]] == ["other"]


def test_existing_ids_refused_then_skipped(open_store: OpenStore, tmp_path: Path) -> None:
    with open_store() as kb:
        _fill(kb, tmp_path)
        lines = _export(kb)
        before = kb.haystack.last_seq
        with pytest.raises(InvalidInput, match=r"already exist.*") as err:
            kb.import_lines(lines)
        assert "--skip-existing" in err.value.hint
        assert kb.haystack.last_seq == before  # nothing written
        report = kb.import_lines(lines, skip_existing=True)
        assert report.records == 0 and report.skipped == len(
            [line for line in lines[1:] if '"op":"put"' in line]
        )
        # The edges the store holds as they are are not filed again (a re-import grew
        # the log by every edge and reported them as imported).
        edges = [line for line in lines[1:] if '"op":"edge"' in line]
        assert edges and (report.edges, report.held_edges) == (0, len(edges))
        assert kb.haystack.last_seq == before


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", r"line 3 is not JSON"),
        (
            '{"op": "put", "ns": "default", "id": "x1", "type": "blob", "drawer": "d"}',
            r"line 3: type",
        ),
        (
            '{"op": "put", "ns": "", "id": "x1", "type": "memory", "drawer": "d"}',
            r"line 3: namespace",
        ),
        ('{"op": "score", "ns": "default", "id": "x1"}', r"line 3: op 'score'"),
        ('{"op": "edge", "ns": "default", "src": "a", "rel": "r"}', r"line 3: an edge needs"),
    ],
)
def test_a_bad_line_writes_nothing(
    open_store: OpenStore, tmp_path: Path, bad: str, message: str
) -> None:
    with open_store(tmp_path / "a") as a:
        a.remember("first memory to carry over")
        lines = _export(a)
    assert len(lines) == 2
    with open_store(tmp_path / "b") as b:
        with pytest.raises(InvalidInput, match=message):
            b.import_lines([*lines, bad], name="store.jsonl")
        assert b.haystack.last_seq == 0
        assert b.list_memories() == []


def test_header_is_required_and_versioned(open_store: OpenStore) -> None:
    with open_store() as kb:
        with pytest.raises(InvalidInput, match="line 1 is not a kredenc export header"):
            kb.import_lines(['{"op": "put"}'])
        with pytest.raises(InvalidInput, match="version 2 is not supported"):
            kb.import_lines(['{"format": "kredenc-export", "version": 2}'])
        with pytest.raises(InvalidInput, match="is empty"):
            kb.import_lines([])


def test_batches_are_whole(open_store: OpenStore, tmp_path: Path) -> None:
    with open_store(tmp_path / "a") as a:
        a.remember_many([{"text": f"memory number {i} about birds"} for i in range(7)])
        lines = _export(a)
    with open_store(tmp_path / "b") as b:
        _header, items = transfer.parse_lines(lines)
        report = transfer.import_items(b.store, items, batch_size=3)
        assert report.batches == 3 and report.records == 7
        assert len(b.list_memories()) == 7


MEM0: list[dict[str, Any]] = [
    {
        "id": "f38b689d-6b24-45b7-bced-17fbb4d8bac7",
        "memory": "Travelling to Paris in May",
        "user_id": "alex",
        "agent_id": "planner",
        "hash": "62bc074f56d1f909f1b4c2b639f56f6a",
        "metadata": {"category": "travel"},
        "categories": ["travel"],
        "created_at": "2024-02-25T23:57:00.108347-07:00",
        "updated_at": "2024-07-25T23:57:00.108367-07:00",
    },
    {
        "id": "0b1e2c3d-0000-4000-8000-000000000002",
        "memory": "Is vegetarian",
        "user_id": "alex",
        "metadata": None,
        "created_at": "2024-03-01T10:00:00Z",
    },
]


@pytest.mark.parametrize("shape", ["list", "results"])
def test_mem0_export_is_accepted(open_store: OpenStore, shape: str) -> None:
    data = MEM0 if shape == "list" else {"results": MEM0, "relations": []}
    with open_store(namespace="alex") as kb:
        report = kb.import_mem0(data)
        assert report.records == 2 and report.namespaces == ["alex"]
        paris = kb.get(MEM0[0]["id"])
        assert paris.text == "Travelling to Paris in May" and paris.kind == "fact"
        assert (paris.user_id, paris.agent_id) == ("alex", "planner")
        assert "user_id" not in paris.meta and "agent_id" not in paris.meta
        assert [m.id for m in kb.list_memories(agent_id="planner")] == [MEM0[0]["id"]]
        assert kb.search("vegetarian", k=1, user_id="alex")[0].id == MEM0[1]["id"]
        assert kb.search("vegetarian", k=1, user_id="sam") == []
        assert paris.meta["category"] == "travel" and paris.tags == ("travel",)
        assert paris.created_at == pytest.approx(1708930620.108347)
        assert kb.search("vegetarian", k=1)[0].id == MEM0[1]["id"]
        with pytest.raises(InvalidInput, match="already exist"):
            kb.import_mem0(data)


def test_mem0_bad_shapes(open_store: OpenStore) -> None:
    with open_store() as kb:
        with pytest.raises(InvalidInput, match="a list of memories"):
            kb.import_mem0({"nope": 1})
        with pytest.raises(InvalidInput, match="mem0 memory 2 has no 'memory'"):
            kb.import_mem0([MEM0[0], {"id": "x"}])
        with pytest.raises(InvalidInput, match="created_at"):
            kb.import_mem0([{"memory": "x", "created_at": "yesterday"}])
        assert kb.haystack.last_seq == 0


def test_an_import_into_its_own_namespace_ignores_the_namespaces_lines_name(
    open_store: OpenStore, tmp_path: Path
) -> None:
    with open_store(tmp_path / "a") as src:
        src.scoped("alice").remember("Alice likes sencha.")
        src.scoped("carol").remember("Carol likes assam.")
        lines = _export(src)
    with open_store(tmp_path / "b") as dst:
        bob = dst.scoped("bob")
        report = bob.import_lines(lines, own_namespace=True)
        assert report.namespaces == ["bob"] and report.records == 2
        assert sorted(m.text for m in bob.list_memories()) == [
            "Alice likes sencha.",
            "Carol likes assam.",
        ]
        assert dst.scoped("alice").list_memories() == []
