"""A memory's history: each kind of change, in log order, with old and new values,
kept through a rebuild, redacted once forgotten, erased with the text, per namespace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput, NotFound
from kredenc.memory.history import HistoryEntry
from kredenc.memory.lifecycle.decay import run_decay
from kredenc.memory.lifecycle.episodes import run_episodes
from kredenc.testing.embedders import HashEmbedder
from kredenc.wire import to_wire

from ._support import DAY, T0, Clock


def _fields(e: HistoryEntry) -> dict[str, tuple[object, object]]:
    return {f.field: (f.old, f.new) for f in e.fields}


def test_each_change_in_order_with_old_and_new(kb: Kredenc, clock: Clock) -> None:
    a = kb.remember("the kettle is in the left cupboard", kind="fact", importance=0.4)
    b = kb.remember("the teapot is beside the kettle")
    clock.t = T0 + 60
    kb.score(a.id, importance=0.9, confidence=0.7, reason="checked in the kitchen")
    clock.t = T0 + 120
    kb.score(a.id, status="validated", valid_to=T0 + 10 * DAY)
    kb.relate(a.id, b.id, "supports", weight=0.6)
    kb.relate(b.id, a.id, "depends_on")
    kb.relate(a.id, b.id, "supports", remove=True)
    got = kb.memory_history(a.id)
    changes = ["created", "changed", "changed", "related", "related", "unrelated"]
    assert [e.change for e in got] == changes
    seqs = [e.seq for e in got]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    created = got[0]
    assert (created.text, created.kind, created.source, created.at) == (
        "the kettle is in the left cupboard",
        "fact",
        "user",
        T0,
    )
    assert _fields(created)["importance"] == (None, 0.4)
    assert _fields(created)["status"] == (None, "unvalidated")
    assert _fields(got[1]) == {"importance": (0.4, 0.9), "confidence": (0.5, 0.7)}
    assert (got[1].reason, got[1].at, got[1].by) == ("checked in the kitchen", T0 + 60, None)
    assert _fields(got[2]) == {
        "status": ("unvalidated", "validated"),
        "valid_to": (None, T0 + 10 * DAY),
    }
    assert (got[3].rel, got[3].other, got[3].outgoing, got[3].weight) == (
        "supports",
        b.id,
        True,
        0.6,
    )
    assert (got[4].rel, got[4].other, got[4].outgoing) == ("depends_on", b.id, False)
    assert (got[5].rel, got[5].other, got[5].weight) == ("supports", b.id, None)
    assert not any(e.redacted for e in got)


def test_lifecycle_jobs_are_named_and_decay_shows_old_to_new(kb: Kredenc, clock: Clock) -> None:
    m = kb.remember("the boiler is serviced in March", importance=0.5)
    run_decay(kb.store, kb.namespace, now=T0 + 3 * DAY)
    last = kb.memory_history(m.id)[-1]
    assert (last.change, last.by) == ("changed", "decay")
    old, new = _fields(last)["importance"]
    assert old == 0.5 and new == pytest.approx(0.5 * 0.98**3)
    assert last.reason is not None and last.reason.startswith("decay: 3 day(s)")
    kb.remember("the boiler was serviced today", importance=0.5)
    kb.remember("the boiler man comes back in a year", importance=0.5)  # three: an episode
    run_episodes(kb.store, kb.namespace, now=T0 + 3 * DAY)
    episode = kb.memory_history(m.id)[-1]
    assert (episode.by, list(_fields(episode))) == ("episodes", ["episode_id"])


def test_forgetting_the_other_end_removes_the_relation_in_the_history(kb: Kredenc) -> None:
    a = kb.remember("the spare key is under the blue pot")
    b = kb.remember("the blue pot is by the door")
    kb.relate(a.id, b.id, "related_to")  # symmetric: two edges
    kb.forget(b.id)
    lost = [e for e in kb.memory_history(a.id) if e.change == "unrelated"]
    assert [(e.rel, e.other, e.reason) for e in lost] == [
        ("related_to", b.id, f"{b.id} was forgotten"),
        ("related_to", b.id, f"{b.id} was forgotten"),
    ]
    assert {e.outgoing for e in lost} == {True, False}
    assert len({e.seq for e in lost}) == 1  # one tombstone


def test_a_forgotten_memory_keeps_its_history_without_text(kb: Kredenc) -> None:
    m = kb.remember("the safe code is 4711 zebracanary", tags=["zebratag"])
    kb.score(m.id, importance=0.8, reason="zebrareason")
    kb.forget(m.id)
    got = kb.memory_history(m.id)
    assert [e.change for e in got] == ["created", "changed", "forgotten"]
    assert all(e.redacted for e in got)
    assert got[0].text is None and got[1].reason is None
    assert _fields(got[1])["importance"] == (None, 0.8)  # numbers stay, as a purge keeps them
    assert "zebra" not in json.dumps(to_wire(got))


def test_erasure_leaves_the_same_history_and_no_text(kb: Kredenc) -> None:
    keep = kb.remember("the gate code changed in May")
    m = kb.remember("the old gate code was 1234 zebracanary")
    kb.relate(keep.id, m.id, "supports")
    kb.score(m.id, importance=0.2, reason="zebrareason")
    kb.forget(m.id)
    before = (kb.memory_history(m.id), kb.memory_history(keep.id))
    kb.compact(purge=True)
    after = (kb.memory_history(m.id), kb.memory_history(keep.id))
    assert after == before
    assert "zebra" not in json.dumps(to_wire(after))
    assert [e.change for e in after[1]] == ["created", "related", "unrelated"]


def test_a_rebuild_restores_every_history(tmp_path: Path) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        a = kb.remember("the router reboots at 4am", importance=0.3)
        b = kb.remember("the modem is in the hall")
        kb.score(a.id, importance=0.6, reason="seen it")
        kb.relate(a.id, b.id, "depends_on")
        kb.forget(b.id)
        before = {rid: kb.memory_history(rid) for rid in (a.id, b.id)}
        kb.rebuild()
        assert {rid: kb.memory_history(rid) for rid in (a.id, b.id)} == before
    (tmp_path / "s" / "index.db").unlink()  # the index is derived: gone, made again on open
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        assert {rid: kb.memory_history(rid) for rid in (a.id, b.id)} == before


def test_paging_and_bad_input(kb: Kredenc) -> None:
    m = kb.remember("the bins go out on Tuesday")
    for n in range(5):
        kb.score(m.id, importance=n / 10)
    whole = kb.memory_history(m.id)
    assert len(whole) == 6
    assert kb.memory_history(m.id, limit=2, offset=1) == whole[1:3]
    assert kb.memory_history(m.id, offset=6) == []
    with pytest.raises(InvalidInput, match="limit"):
        kb.memory_history(m.id, limit=0)
    with pytest.raises(InvalidInput, match="offset"):
        kb.memory_history(m.id, offset=-1)
    with pytest.raises(InvalidInput, match="string"):
        kb.memory_history(7)  # type: ignore[arg-type]


def test_other_namespaces_and_other_records_have_none(kb: Kredenc, tmp_path: Path) -> None:
    m = kb.remember("alpha's note about the shed")
    other = kb.scoped("beta")
    with pytest.raises(NotFound) as foreign:
        other.memory_history(m.id)
    with pytest.raises(NotFound) as missing:
        other.memory_history("m0000000000000000000")
    assert str(foreign.value).replace(m.id, "<id>") == str(missing.value).replace(
        "m0000000000000000000", "<id>"
    )
    doc = tmp_path / "note.md"
    doc.write_text("# Shed\n\nThe shed key hangs by the back door.\n")
    kb.ingest([doc])
    chunk = kb.search("shed key", types=["chunk"])[0].id
    with pytest.raises(NotFound, match="no memory"):
        kb.memory_history(chunk)
