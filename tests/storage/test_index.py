"""The derived SQLite index and its vector shards: what each leg returns, what a
tombstone removes, what a rebuild reuses, and answers that do not depend on layout."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kredenc.engine import Kredenc
from kredenc.errors import StoreError
from kredenc.retrieve.terms import phrases, query_terms
from kredenc.storage.index.filters import Filters
from kredenc.storage.index.schema import SCHEMA_VERSION
from kredenc.storage.index.vectors import AnnParams, VectorShard
from kredenc.testing.embedders import HashEmbedder


def open_store(home: Path, **kwargs: object) -> Kredenc:
    kwargs.setdefault("embedder", HashEmbedder())
    return Kredenc.open(home, durability="none", **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def kb(home: Path) -> Iterator[Kredenc]:
    with open_store(home) as store:
        yield store


def rowid_of(kb: Kredenc, rid: str) -> int:
    found = kb.index.lookup(kb.namespace, rid)
    assert found is not None
    return found.rowid


def count(home: Path, sql: str, *args: object) -> int:
    conn = sqlite3.connect(home / "index.db")
    try:
        return int(conn.execute(sql, args).fetchone()[0])
    finally:
        conn.close()


# -- vector shards -----------------------------------------------------------------


def unit(rows: int, dim: int, seed: int) -> np.ndarray:
    m = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_shard_ties_are_broken_by_rowid_not_by_position() -> None:
    dim = 16
    same = unit(1, dim, 1)[0]
    other = unit(5, dim, 2)
    # Rowids 1..9: 1, 4, 6, 9 hold the same vector (exact ties), the rest differ.
    ids = np.arange(1, 10, dtype=np.int64)
    vecs = np.vstack([same, other[0], other[1], same, other[2], same, other[3], other[4], same])
    live = VectorShard(dim, AnnParams())
    live.add(ids, vecs)
    live.remove(1)  # moves rowid 9 into position 0
    live.remove(3)
    fresh = VectorShard(dim, AnnParams())  # what a rebuild makes: rowid order, no holes
    keep = [i for i in range(9) if ids[i] not in (1, 3)]
    fresh.add(ids[keep], vecs[keep])
    for k in (1, 2, 3, 7, 50):
        got, want = live.search(same, k), fresh.search(same, k)
        assert got == want, k
    assert [r for r, _ in live.search(same, 3)] == [4, 6, 9]
    # The tied vectors score exactly alike wherever they sit in the matrix.
    scores = {r: s for r, s in live.search(same, 50)}
    assert scores[4] == scores[6] == scores[9]


def test_shard_search_is_exact_below_the_ann_threshold() -> None:
    dim, n = 32, 300
    vecs = unit(n, dim, 3)
    shard = VectorShard(dim, AnnParams(threshold=10_000))
    shard.add(np.arange(n, dtype=np.int64) + 1, vecs)
    query = unit(1, dim, 4)[0]
    exact = np.argsort(-(vecs.astype(np.float64) @ query), kind="stable")[:10] + 1
    assert [r for r, _ in shard.search(query, 10)] == exact.tolist()
    assert not shard.uses_ann and len(shard) == n
    assert shard.search(query, 0) == []


def _recall_at(shard: VectorShard, vecs: np.ndarray, ids: np.ndarray, k: int) -> float:
    """Mean share of the exact top ``k`` that the shard returns, over 30 queries."""
    live = np.isin(ids, np.fromiter(shard._pos, dtype=np.int64))
    found = 0
    for query in unit(30, vecs.shape[1], 11):
        scores = np.where(live, vecs @ query, -np.inf)
        exact = set(ids[np.argsort(-scores)[:k]].tolist())
        found += len(exact & {r for r, _ in shard.search(query, k)})
    return found / (30 * k)


def test_shard_switches_to_ann_past_the_threshold_and_keeps_recall() -> None:
    dim, n = 32, 3000
    vecs = unit(n, dim, 5)
    ids = np.arange(n, dtype=np.int64) + 1
    shard = VectorShard(dim, AnnParams(threshold=1000))
    shard.add(ids[:900], vecs[:900])
    assert not shard.uses_ann  # below the threshold: exact
    shard.add(ids[900:], vecs[900:])
    assert shard.uses_ann and len(shard) == n
    assert _recall_at(shard, vecs, ids, 10) >= 0.95
    for rowid in range(1, 301):  # forgotten records never come back from the graph
        shard.remove(rowid)
    query = vecs[0]  # rowid 1 itself, now removed
    assert all(r > 300 for r, _ in shard.search(query, 50))
    assert _recall_at(shard, vecs, ids, 10) >= 0.95


def test_ann_graph_is_saved_and_adopted_only_for_its_log_position(tmp_path: Path) -> None:
    dim, n = 32, 1500
    vecs = unit(n, dim, 6)
    ids = np.arange(n, dtype=np.int64) + 1
    path = tmp_path / "ann" / "shard.usearch"
    built = VectorShard(dim, AnnParams(threshold=1000), path)
    built.add(ids, vecs)
    built.save(applied_seq=42)
    assert path.is_file() and json.loads(path.with_suffix(".json").read_text()) == {
        "applied_seq": 42,
        "count": n,
    }

    def reopened(seq: int, rows: int = n) -> VectorShard:
        shard = VectorShard(dim, AnnParams(threshold=1000), path)
        shard.add(ids[:rows].copy(), vecs[:rows].copy(), build_ann=False)
        assert not shard.uses_ann
        shard.load_ann(seq)
        return shard

    adopted = reopened(42)
    assert adopted.uses_ann
    query = unit(1, dim, 7)[0]
    assert adopted.search(query, 10) == built.search(query, 10)
    assert not reopened(43).uses_ann  # the log moved on since the graph was saved
    assert not reopened(42, rows=n - 1).uses_ann  # a different set of vectors


def test_dense_merges_drawers_with_ties_by_rowid(kb: Kredenc) -> None:
    # The same text in two drawers: the same vector, an exact tie across shards.
    first = kb.remember("kestrel", drawer="a")
    notes = kb.remember("kestrel", drawer="b")
    later = kb.remember("kestrel", drawer="a")
    kb.forget(first.id)  # drawer "a" no longer holds the lowest rowid
    query = kb.embedder.embed(["kestrel"])[0]
    before = kb.index.dense(kb.namespace, query, 10, Filters())
    assert [r for r, _ in before] == [rowid_of(kb, notes.id), rowid_of(kb, later.id)]
    kb.rebuild()
    assert kb.index.dense(kb.namespace, query, 10, Filters()) == before


def test_a_scoped_dense_search_is_exact_among_what_passes(
    kb: Kredenc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a scope id the passing records are scored among themselves: the same
    answer as fetching deeper from the whole shard (below the ANN threshold, where
    both are exact), ties by rowid across drawers, forgotten records left out."""
    from kredenc.storage.index import sqlite as sqlite_index

    rows = [
        {"text": f"kestrel {i % 7} river {i % 3}", "user_id": f"u{i % 4}", "drawer": f"d{i % 2}"}
        for i in range(120)
    ]
    filed = kb.remember_many(rows)
    kb.forget(filed[0].id)
    cases = [
        Filters(user_id="u0"),
        Filters(user_id="u1", drawer="d1"),
        Filters(user_id="u2", agent_id="none"),
        Filters(run_id="nobody"),
        Filters(user_id="u3", kinds=("note",), where=(("x", 1),)),
    ]
    query = kb.embedder.embed(["kestrel 3 river"])[0]
    exact = [kb.index.dense(kb.namespace, query, 10, f) for f in cases]
    assert [len(e) for e in exact] == [10, 10, 0, 0, 0]
    assert rowid_of(kb, filed[0].id) not in {r for r, _ in exact[0]}
    monkeypatch.setattr(sqlite_index, "EXACT_AMONG_MAX", 0)  # the deeper fetch instead
    assert [kb.index.dense(kb.namespace, query, 10, f) for f in cases] == exact


def test_a_dense_search_whose_filter_passes_little_goes_exact(
    kb: Kredenc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``EXACT_AFTER_FETCH`` a filtered dense search reads what passes and scores
    it exactly (the same answer as walking the whole shard), and a filter that passes
    nothing stops there instead of fetching every vector."""
    from kredenc.storage.index import sqlite as sqlite_index

    monkeypatch.setattr(sqlite_index, "EXACT_AFTER_FETCH", 40)
    kb.remember_many(
        [{"text": f"kestrel {i % 7} river", "meta": {"n": i % 50}} for i in range(300)]
    )
    query = kb.embedder.embed(["kestrel 3 river"])[0]
    cases = [Filters(where=(("n", 3),)), Filters(where=(("n", 99),)), Filters(kinds=("task",))]
    walked: list[int] = []
    real = VectorShard.search

    def counting(self: VectorShard, q: np.ndarray, fetch: int) -> list[tuple[int, float]]:
        walked.append(fetch)
        return real(self, q, fetch)

    monkeypatch.setattr(VectorShard, "search", counting)
    exact = [kb.index.dense(kb.namespace, query, 5, f) for f in cases]
    assert [len(e) for e in exact] == [5, 0, 0]
    assert max(walked) <= 40  # never the whole shard
    walked.clear()
    assert kb.index.dense(kb.namespace, query, 60, cases[1]) == []  # k past the bound too
    assert walked == [60]
    monkeypatch.setattr(sqlite_index, "EXACT_AMONG_MAX", 0)
    walked.clear()
    assert [kb.index.dense(kb.namespace, query, 5, f) for f in cases] == exact
    assert max(walked) == 300


# -- the lexical leg -----------------------------------------------------------------


def test_lexical_binds_namespace_and_drawer(home: Path) -> None:
    with open_store(home, namespace="a") as kb:
        in_a = kb.remember("kestrel over the tower", drawer="birds")
        kb.remember("kestrel in the notes", drawer="notes")
    with open_store(home, namespace="b") as kb:
        kb.remember("kestrel kestrel kestrel", drawer="birds")
        match = phrases(query_terms("kestrel"))
        a_all = kb.index.lexical("a", match, 10, Filters())
        a_birds = kb.index.lexical("a", match, 10, Filters(drawer="birds"))
        b_all = kb.index.lexical("b", match, 10, Filters())
        assert len(a_all) == 2 and len(b_all) == 1
        assert [r for r, _ in a_birds] == [kb.index.lookup("a", in_a.id).rowid]  # type: ignore[union-attr]
        assert all(score > 0 for _, score in a_all)  # BM25, larger is better
        assert kb.index.lexical("c", match, 10, Filters()) == []


def test_lexical_orders_by_bm25(kb: Kredenc) -> None:
    kb.remember("budget")
    kb.remember("budget budget review")
    kb.remember("a long note that mentions the budget once among many other words")
    hits = kb.search("budget", mode="lexical")
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True) and len(hits) == 3
    assert hits[-1].text.startswith("a long note")


# -- what a tombstone removes, what a rebuild keeps ---------------------------------------


def test_tombstone_removes_card_vector_and_edges(kb: Kredenc, home: Path) -> None:
    a = kb.remember("kestrel nest")
    b = kb.remember("water tower")
    kb.relate(a.id, b.id, "related_to")  # symmetric: written both ways
    assert count(home, "SELECT count(*) FROM edges") == 2
    rowid = rowid_of(kb, a.id)
    kb.forget(a.id)
    assert count(home, "SELECT count(*) FROM cards WHERE rowid=?", rowid) == 0
    assert count(home, "SELECT count(*) FROM vectors WHERE rowid=?", rowid) == 0
    assert count(home, "SELECT count(*) FROM edges") == 0
    assert count(home, "SELECT deleted FROM records WHERE rowid=?", rowid) == 1
    assert kb.index.resolve(kb.namespace, [rowid]) == {}


def test_rebuild_reuses_cached_embeddings(home: Path) -> None:
    embedder = HashEmbedder()
    with open_store(home, embedder=embedder) as kb:
        kb.remember_many([{"text": f"note {i} about kestrels"} for i in range(30)])
        calls = embedder.calls
        before = kb.index.fingerprint()
        kb.rebuild()
        assert embedder.calls == calls  # nothing re-embedded
        assert kb.index.fingerprint() == before
    (home / "index.db").unlink()
    with open_store(home, embedder=embedder) as kb:  # a missing index is rebuilt on open
        assert embedder.calls == calls
        assert kb.index.fingerprint() == before
        assert kb.index.applied()[0] == 31  # 30 puts and the batch's commit record


def test_index_of_another_schema_is_rebuilt_from_the_log(
    kb: Kredenc, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kept = kb.remember("the index is derived from the log")
    before = [h.id for h in kb.search("derived log", mode="lexical")]
    kb.close()
    conn = sqlite3.connect(home / "index.db")
    conn.execute("UPDATE meta SET value='999' WHERE key='schema'")
    conn.commit()
    conn.close()
    with caplog.at_level("WARNING"), open_store(home) as again:
        assert [h.id for h in again.search("derived log", mode="lexical")] == before
        assert again.get(kept.id).text == kept.text
    assert "index schema 999" in caplog.text


def test_read_only_open_of_an_outdated_index_asks_for_a_rebuild(kb: Kredenc, home: Path) -> None:
    kb.close()
    conn = sqlite3.connect(home / "index.db")
    conn.execute("UPDATE meta SET value='999' WHERE key='schema'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="index schema 999") as info:
        open_store(home, read_only=True)
    assert "kredenc rebuild" in info.value.hint


# -- filters hold for the dense leg even when filtered-out records crowd the top ---------


def test_dense_filter_is_not_applied_after_top_k(kb: Kredenc) -> None:
    kb.remember_many([{"text": f"kestrel tower {i}", "kind": "note"} for i in range(200)])
    kb.remember_many([{"text": f"garden plan {i}", "kind": "fact"} for i in range(10)])
    hits = kb.search("kestrel tower", k=10, mode="dense", kinds=["fact"])
    assert len(hits) == 10


def test_a_store_past_the_threshold_searches_its_graph_and_reopens_it(tmp_path: Path) -> None:
    """End to end: a drawer past ``ann_threshold`` is answered by the HNSW graph, which
    is persisted under ``<store>/ann/`` and adopted on the next open (not rebuilt)."""
    home = tmp_path / "store"
    texts = [f"memory number {i} about topic {i % 37}" for i in range(400)]
    opts: dict[str, object] = {"embedder": HashEmbedder(), "durability": "none"}
    with Kredenc.open(home, ann_threshold=300, **opts) as kb:  # type: ignore[arg-type]
        kb.remember_many([{"text": t} for t in texts])
        first = [h.id for h in kb.search("topic 12", k=10, mode="dense")]
        assert any(s.uses_ann for s in kb.index.shards().values())
    saved = list((home / "ann").glob("*.usearch"))
    assert saved and all(p.with_suffix(".json").is_file() for p in saved)
    stamps = {p: p.stat().st_mtime_ns for p in saved}
    with Kredenc.open(home, ann_threshold=300, **opts) as kb:  # type: ignore[arg-type]
        assert [h.id for h in kb.search("topic 12", k=10, mode="dense")] == first
        assert any(s.uses_ann for s in kb.index.shards().values())
    # Adopted, not rebuilt: a rebuilt graph would be saved again on close.
    assert {p: p.stat().st_mtime_ns for p in saved} == stamps


def _make_schema_2(index_db: Path) -> None:
    """Turn an index into what schema 2 built: no records.session (nor its index)."""
    conn = sqlite3.connect(index_db)
    conn.execute("DROP INDEX IF EXISTS records_session")
    conn.execute("ALTER TABLE records DROP COLUMN session")
    conn.execute("UPDATE meta SET value='2' WHERE key='schema'")
    conn.commit()
    conn.close()


def test_an_index_of_an_older_schema_is_rebuilt_by_a_writer_and_named_to_a_reader(
    tmp_path: Path,
) -> None:
    from kredenc.errors import IndexOutdated

    home = tmp_path / "store"
    with Kredenc.open(home, embedder=HashEmbedder(), durability="none") as kb:
        kb.remember("The user drinks green tea")
    _make_schema_2(home / "index.db")
    with pytest.raises(IndexOutdated, match="schema 2 is not") as err:
        Kredenc.open(home, embedder=HashEmbedder(), read_only=True)
    assert "rebuild" in err.value.hint
    with Kredenc.open(home, embedder=HashEmbedder(), durability="none") as kb:
        assert [h.text for h in kb.search("green tea", mode="lexical")] == [
            "The user drinks green tea"
        ]


def _make_schema_3(index_db: Path) -> None:
    """Turn an index into what schema 3 built: no scope ids, tags nor meta (nor their
    indexes)."""
    conn = sqlite3.connect(index_db)
    for name in ("records_user", "records_agent", "records_run"):
        conn.execute(f"DROP INDEX IF EXISTS {name}")
    for column in ("user_id", "agent_id", "run_id", "tags", "meta"):
        conn.execute(f"ALTER TABLE records DROP COLUMN {column}")
    conn.execute("UPDATE meta SET value='3' WHERE key='schema'")
    conn.commit()
    conn.close()


def test_a_schema_4_index_is_rebuilt_with_the_histories(tmp_path: Path) -> None:
    home = tmp_path / "store"
    with Kredenc.open(home, embedder=HashEmbedder(), durability="none") as kb:
        mem = kb.remember("Alex drinks green tea").id
        kb.score(mem, importance=0.9, reason="every morning")
        before = kb.memory_history(mem)
    conn = sqlite3.connect(home / "index.db")  # what schema 4 built: no history table
    conn.execute("DROP TABLE history")
    conn.execute("UPDATE meta SET value='4' WHERE key='schema'")
    conn.commit()
    conn.close()
    with Kredenc.open(home, embedder=HashEmbedder(), durability="none") as kb:
        assert kb.memory_history(mem) == before
        assert [e.change for e in before] == ["created", "changed"]


def test_a_schema_3_index_is_rebuilt_with_the_scope_ids(tmp_path: Path) -> None:
    from kredenc.errors import IndexOutdated

    home = tmp_path / "store"
    with Kredenc.open(home, embedder=HashEmbedder(), durability="none") as kb:
        alex = kb.remember("Alex drinks green tea", user_id="u-alex", tags=["tea"]).id
        kb.remember("Sam drinks green tea", user_id="u-sam", meta={"team": "blue"})
    _make_schema_3(home / "index.db")
    with pytest.raises(IndexOutdated, match=f"schema 3 is not {SCHEMA_VERSION}") as err:
        Kredenc.open(home, embedder=HashEmbedder(), read_only=True)
    assert "rebuild" in err.value.hint
    with Kredenc.open(home, embedder=HashEmbedder(), durability="none") as kb:
        assert [h.id for h in kb.search("green tea", user_id="u-alex")] == [alex]
        assert [h.id for h in kb.search("green tea", tags=["tea"])] == [alex]
        assert [h.text for h in kb.search("green tea", where={"team": "blue"})] == [
            "Sam drinks green tea"
        ]
        assert [m.id for m in kb.list_memories(user_id="u-alex")] == [alex]
