"""The opened Store: opening and closing, catch-up after a lost index, rebuild, writes,
the embedding cache, access counts and the clock; all on real files, no namespace held."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kredenc.config import load_settings
from kredenc.errors import StoreClosed, StoreError, StoreLocked
from kredenc.records import new_id
from kredenc.storage import layout
from kredenc.storage.index.sqlite import IndexOutdated
from kredenc.storage.store import Store
from kredenc.testing.embedders import HashEmbedder


def open_at(home: Path, **kwargs: Any) -> Store:
    read_only = bool(kwargs.pop("read_only", False))
    embedder = kwargs.pop("embedder", None) or HashEmbedder()
    clock = kwargs.pop("clock", None)
    settings = load_settings(home, durability="none", **kwargs)
    return Store.open(settings, embedder, read_only, clock=clock)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(home: Path) -> Iterator[Store]:
    s = open_at(home)
    yield s
    s.close()


def put(ns: str, text: str, **extra: Any) -> dict[str, Any]:
    return {
        "op": "put",
        "ns": ns,
        "id": new_id("memory"),
        "type": "memory",
        "drawer": "memories",
        "kind": "note",
        "ts": 1.0,
        "text": text,
        **extra,
    }


def live_ids(store: Store, ns: str) -> list[str]:
    return [str(row[1]) for row in store.index.live_memory_rows(ns)]


def test_open_creates_a_store_and_close_releases_it(home: Path) -> None:
    with pytest.raises(StoreError, match="no store at"):
        open_at(home, read_only=True)
    first = open_at(home)
    assert layout.is_store(home) and first.meta.model_id == "test-hash-384"
    with pytest.raises(StoreLocked):
        open_at(home)  # one writer at a time
    first.close()
    first.close()  # idempotent
    assert first.closed
    with pytest.raises(StoreClosed, match="store is closed"):
        first.write([put("a", "too late")])
    again = open_at(home)  # the lock went with close()
    again.close()


def test_the_store_is_namespace_free(store: Store) -> None:
    a, b = put("alpha", "kettle in the cupboard"), put("beta", "kettle on the stove")
    placed = store.write([a, b], batch=True, vectors=store.vectors_for([a, b]))
    assert [p.seq for p in placed] == [1, 2]
    assert live_ids(store, "alpha") == [a["id"]] and live_ids(store, "beta") == [b["id"]]
    assert store.stats("alpha")["records"] == 1 and store.stats("alpha")["namespace"] == "alpha"
    assert store.stats("beta")["log_records"] == 3  # two puts and the batch's commit


def test_read_only_store_reads_but_never_writes(store: Store, home: Path) -> None:
    p = put("ns", "filed before")
    store.write([p])
    store.close()
    ro = open_at(home, read_only=True)
    try:
        assert live_ids(ro, "ns") == [p["id"]]
        with pytest.raises(StoreError, match="read-only"):
            ro.check_writable()
        with pytest.raises(StoreError, match="read-only"):
            ro.rebuild()
        ro.note_access("ns", [p["id"]])  # counts nothing, writes nothing
        ro.flush_access()
    finally:
        ro.close()
    assert not (home / layout.LOCK_FILE).read_text()  # a reader never took the lock


def test_vectors_come_from_the_cache_by_text(store: Store) -> None:
    embedder = store.embedder
    assert isinstance(embedder, HashEmbedder)
    first = put("ns", "the blue kettle")
    store.write([first], vectors=store.vectors_for([first]))
    calls = embedder.calls
    same_text = put("ns", "the blue kettle")
    vecs = store.vectors_for([same_text])
    assert embedder.calls == calls  # cached by text hash: nothing embedded
    assert list(vecs) == [same_text["id"]] and vecs[same_text["id"]].shape == (384,)
    store.vectors_for([put("ns", "a new text")])
    assert embedder.calls == calls + 1


def test_query_vectors_are_cached(store: Store) -> None:
    embedder = store.embedder
    assert isinstance(embedder, HashEmbedder)
    calls = embedder.calls
    one = store.embed_query("where is the kettle")
    two = store.embed_query("where is the kettle")
    assert one is two and embedder.calls == calls + 1
    assert store.embed_many(["a", "b"]).shape == (2, 384)
    store.embed_query.clear()  # what a benchmark timing the embedding does
    assert "where is the kettle" not in store.embed_query
    store.embed_query("where is the kettle")
    assert embedder.calls == calls + 3  # the batch of two, then embedded again


def test_primed_query_vectors_are_embedded_in_one_call_and_kept(store: Store) -> None:
    embedder = store.embedder
    assert isinstance(embedder, HashEmbedder)
    alone = store.embed_query("where is the kettle")
    calls = embedder.calls
    store.embed_query.prime(["where is the kettle", "who fed the cat", "when is the bin day"])
    assert embedder.calls == calls + 1  # the two not held yet, in one batch
    assert "who fed the cat" in store.embed_query and "when is the bin day" in store.embed_query
    got = store.embed_query("who fed the cat")
    assert embedder.calls == calls + 1 and got.shape == (384,)
    assert store.embed_query("where is the kettle") is alone
    assert (got == embedder.embed(["who fed the cat"])[0]).all()


def test_embed_cached_embeds_each_text_once_and_keeps_order(store: Store, home: Path) -> None:
    embedder = store.embedder
    assert isinstance(embedder, HashEmbedder)
    calls = embedder.calls
    texts = ["one sentence", "another sentence", "one sentence"]
    first = store.embed_cached(texts)
    assert first.shape == (3, 384) and embedder.calls == calls + 1
    assert (first[0] == first[2]).all() and not (first[0] == first[1]).all()
    again = store.embed_cached(["another sentence", "one sentence"])
    assert embedder.calls == calls + 1  # both from the cache
    assert (again[0] == first[1]).all() and (again[1] == first[0]).all()
    assert store.embed_cached([]).shape == (0, 384)
    store.close()
    reopened = open_at(home)
    try:
        reopened.embed_cached(["one sentence"])  # the cache is on disk
        assert reopened.embedder.calls == 0  # type: ignore[attr-defined]
    finally:
        reopened.close()


def test_catch_up_replays_what_the_index_lost(store: Store, home: Path) -> None:
    ids = []
    for n in range(5):
        p = put("ns", f"note number {n}")
        store.write([p])
        ids.append(p["id"])
        if n == 2:
            applied = store.index.applied()
    store.close()
    conn = sqlite3.connect(home / layout.INDEX_FILE)
    try:  # roll the index back, as if its last transactions never reached the disk
        for table in ("cards", "vectors"):
            conn.execute(
                f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM records WHERE seq > 3)"
            )
        conn.execute("DELETE FROM records WHERE seq > 3")
        conn.execute("UPDATE meta SET value=? WHERE key='applied_seq'", (str(applied[0]),))
        conn.execute("UPDATE meta SET value=? WHERE key='applied_end'", (str(applied[1]),))
        conn.commit()
    finally:
        conn.close()
    again = open_at(home)
    try:
        assert live_ids(again, "ns") == ids
        assert again.index.applied()[0] == 5
    finally:
        again.close()


def test_a_dropped_index_is_rebuilt_on_open(store: Store, home: Path) -> None:
    p = put("ns", "survives a lost index")
    store.write([p])
    store.close()
    layout.drop_index(home)
    again = open_at(home)
    try:
        assert live_ids(again, "ns") == [p["id"]]
    finally:
        again.close()


def test_an_outdated_index_is_dropped_unless_read_only(store: Store, home: Path) -> None:
    p = put("ns", "outlives its index schema")
    store.write([p])
    store.close()
    conn = sqlite3.connect(home / layout.INDEX_FILE)
    conn.execute("UPDATE meta SET value='999' WHERE key='schema'")
    conn.commit()
    conn.close()
    with pytest.raises(IndexOutdated):
        open_at(home, read_only=True)
    again = open_at(home)
    try:
        assert live_ids(again, "ns") == [p["id"]]
    finally:
        again.close()


def test_rebuild_gives_the_same_index_and_counts_live_records(store: Store) -> None:
    a, b, c = put("x", "one"), put("x", "two"), put("y", "three")
    store.write([a, b, c], batch=True)
    store.write([{"op": "tombstone", "ns": "x", "id": b["id"], "ts": 2.0}])
    before = store.index.fingerprint()
    assert store.rebuild() == {"records": 2, "last_seq": 5}
    assert store.index.fingerprint() == before
    d = put("x", "written after the rebuild")
    store.write([d])  # the writer is back
    assert live_ids(store, "x") == [a["id"], d["id"]]


def test_access_counts_are_batched_per_namespace(home: Path) -> None:
    store = open_at(home, access_batch=3, clock=lambda: 1234.5)
    try:
        a, b = put("x", "alpha"), put("y", "beta")
        store.write([a, b], batch=True)
        store.note_access("x", [a["id"]])
        store.note_access("y", [b["id"]])
        assert store.haystack.last_seq == 3  # pending: below the batch size
        store.note_access("x", [a["id"], "m-other"])  # three ids pending: flushed
        store.write([put("x", "queued behind the access records")])
        ops = [r.payload["op"] for r in store.haystack.iter_from()]
        assert ops[3:] == ["access", "access", "put"]  # one record per namespace
    finally:
        store.close()
    reopened = open_at(home)
    try:
        records = [r.payload for r in reopened.haystack.iter_from()]
    finally:
        reopened.close()
    access = [p for p in records if p["op"] == "access"]
    assert sorted((p["ns"], p["counts"]) for p in access) == [  # type: ignore[type-var]
        ("x", {a["id"]: 2, "m-other": 1}),
        ("y", {b["id"]: 1}),
    ]
    assert {p["ts"] for p in access} == {1234.5}  # stamped by the store's clock


def test_the_clock_defaults_to_wall_time_and_can_be_set(store: Store) -> None:
    import time

    before = time.time()
    assert before <= store.now() <= time.time()
    store.clock = lambda: 42.0
    assert store.now() == 42.0


def test_an_embedding_cache_in_a_directory_not_made_yet_is_made(home: Path, tmp_path: Path) -> None:
    cache = tmp_path / "caches" / "kredenc" / "embeddings.db"
    s = open_at(home, embed_cache=cache)
    try:
        s.embed_many(["a text whose vector goes to the cache"])
    finally:
        s.close()
    assert cache.is_file()
    assert (cache.parent.stat().st_mode & 0o777) == 0o700


def test_an_embedding_cache_that_cannot_be_made_is_named_and_nothing_is_left(
    home: Path, tmp_path: Path
) -> None:
    (tmp_path / "plain").write_text("a file, not a directory")
    cache = tmp_path / "plain" / "embeddings.db"
    with pytest.raises(StoreError) as caught:
        open_at(home, embed_cache=cache)
    # The cache is named: not the index, and no rebuild that would fail the same way.
    assert str(cache) in caught.value.message
    assert "index.db" not in caught.value.message
    assert "rebuild" not in (caught.value.hint or "")
    assert not (home / layout.INDEX_FILE).exists()
