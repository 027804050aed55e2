"""The operation cache's persistent tier (opcache.db) and the index's generations.

Real SQLite files in tmp_path; a store opened through the facade where the store's
own handling (rebuild, purge, read-only) is what is tested.
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.storage import opcache
from kredenc.storage.opcache import SqliteTier

from .test_purge import CANARY, _files_holding, _seed

OpenStore = Callable[..., Kredenc]


def test_a_value_survives_a_reopen_and_the_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "opcache.db"
    tier = SqliteTier(path)
    assert tier.get("llm", "k1") is None
    tier.put("llm", "k1", '{"a": 1}')
    tier.put("search", "k1", "[]")  # the same key in another kind is another entry
    tier.close()
    again = SqliteTier(path)
    assert again.get("llm", "k1") == '{"a": 1}'
    assert again.get("search", "k1") == "[]"
    assert again.stats() == {"entries": 2, "bytes": 10}
    again.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_file_that_is_not_sqlite_is_set_aside_and_recreated(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "opcache.db"
    path.write_bytes(b"this is not a database at all" * 200)
    tier = SqliteTier(path)
    with caplog.at_level(logging.WARNING):
        assert tier.get("llm", "k") is None  # never raises
    tier.put("llm", "k", "1")
    assert tier.get("llm", "k") == "1"
    aside = [p.name for p in tmp_path.iterdir() if ".bad-" in p.name]
    assert len(aside) == 1 and aside[0].startswith("opcache.db.bad-")
    assert "set aside" in caplog.text
    tier.close()


def test_damage_found_while_reading_sets_the_file_aside(tmp_path: Path) -> None:
    path = tmp_path / "opcache.db"
    tier = SqliteTier(path)
    for i in range(300):
        tier.put("llm", f"k{i}", "x" * 3000)
    tier.close()
    wal = path.with_name(path.name + "-wal")
    # Scribble over every page past the first (the schema survives, the b-trees do not).
    with open(path, "r+b") as fh:
        fh.seek(4096)
        fh.write(b"\xff" * max(0, path.stat().st_size - 4096))
    wal.unlink(missing_ok=True)
    tier = SqliteTier(path)
    epoch = tier.epoch
    found = [tier.get("llm", f"k{i}") for i in range(300)]  # misses, no exception
    assert all(v is None for v in found)
    assert tier.epoch > epoch  # the LRU above is told to let go too
    tier.put("llm", "fresh", "1")
    assert tier.get("llm", "fresh") == "1"
    assert any(".bad-" in p.name for p in tmp_path.iterdir())
    tier.close()


def test_a_read_only_tier_creates_nothing_and_stores_nothing(tmp_path: Path) -> None:
    path = tmp_path / "opcache.db"
    reader = SqliteTier(path, read_only=True)
    assert reader.get("llm", "k") is None
    reader.put("llm", "k", "1")
    assert not path.exists()
    writer = SqliteTier(path)
    writer.put("llm", "k", "2")
    assert reader.get("llm", "k") == "2"  # sees the writer's entries once the file exists
    reader.put("llm", "k2", "3")
    assert writer.get("llm", "k2") is None
    # The writer replaces the file (a rebuild or purge): the reader notices by its inode.
    epoch = reader.epoch
    writer.clear()
    writer.put("llm", "other", "4")
    assert reader.get("llm", "k") is None
    assert reader.epoch > epoch
    reader.close()
    writer.close()


def test_the_tier_is_bounded_oldest_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opcache, "PRUNE_EVERY", 10)
    tier = SqliteTier(tmp_path / "opcache.db", max_bytes=10_000)
    for i in range(100):
        tier.put("search", f"k{i:03}", "v" * 500)  # 50,000 bytes offered
    held = tier.stats()["bytes"]
    assert held <= 10_000
    assert tier.get("search", "k099") is not None  # the newest stay
    assert tier.get("search", "k000") is None  # the oldest went
    tier.close()


# -- generations ----------------------------------------------------------------
def test_generation_moves_with_each_write_that_can_change_a_search(
    open_store: OpenStore,
) -> None:
    with open_store() as kb:
        st, ns = kb.store, kb.namespace
        g0 = st.generation(ns)
        a = kb.remember("the heron stands in the reeds").id
        b = kb.remember("the otter swims at dusk").id
        g1 = st.generation(ns)
        assert g1 != g0
        mem = st.generation(ns, ["memory"])
        assert st.generation(ns, ["chunk"]) == 0

        kb.score(a, importance=0.9)  # scores and status can change what passes the filters
        assert st.generation(ns, ["memory"]) != mem
        mem = st.generation(ns, ["memory"])

        edges = st.generation(ns, ["memory"], edges=True)
        kb.relate(a, b, "related_to")  # edges change only graph expansions
        assert st.generation(ns, ["memory"]) == mem
        assert st.generation(ns, ["memory"], edges=True) != edges

        kb.file_turns("s1", [{"role": "user", "content": "hello there"}])
        assert st.generation(ns, ["memory"]) == mem  # a turn leaves a memory search alone
        assert st.generation(ns, ["turn"]) != 0

        st.note_access(ns, [a, b])
        st.flush_access()
        kb.remember("a sync write after the access record")  # waits for the queue
        before = st.generation(ns, ["chunk"])
        st.note_access(ns, [a])
        st.flush_access()
        kb.scoped("elsewhere").remember("another namespace")
        assert st.generation(ns, ["chunk"]) == before  # access counts, other namespaces

        kb.forget(b)
        assert st.generation(ns, ["memory"]) != mem


def test_a_rebuild_replays_the_same_generations(open_store: OpenStore) -> None:
    with open_store() as kb:
        for i in range(5):
            kb.remember(f"note {i} on the garden")
        kb.file_turns("s", [{"role": "user", "content": "hi"}])
        before = {t: kb.store.generation(kb.namespace, [t]) for t in ("memory", "turn")}
        kb.rebuild()
        after = {t: kb.store.generation(kb.namespace, [t]) for t in ("memory", "turn")}
    assert before == after


def test_a_reader_process_sees_the_writers_generation(
    open_store: OpenStore, store_dir: Path
) -> None:
    with open_store() as kb:
        kb.remember("first")
        with open_store(read_only=True) as reader:
            g = reader.store.generation(kb.namespace)
            kb.remember("second")
            assert reader.store.generation(kb.namespace) != g


def test_the_writer_keeps_its_generations_in_memory_and_equal_to_the_file(
    open_store: OpenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writing process reads a namespace's generations from the file once, then
    keeps them current as it applies writes (a repeated ask asks for them every time;
    each read cost ~1 ms of waiting for the interpreter while the filer ran)."""
    from kredenc.storage.index import projector

    reads: list[str] = []
    real = projector.generations

    def counted(conn: Any, ns: str) -> dict[str, int]:
        reads.append(ns)
        return real(conn, ns)

    monkeypatch.setattr(projector, "generations", counted)
    with open_store() as kb:
        st, ns = kb.store, kb.namespace
        kb.remember("first")
        for i in range(5):
            st.generation(ns)
            kb.remember(f"note {i}")
            kb.file_turns("s", [{"role": "user", "content": f"turn {i}"}])
            kept = {t: st.generation(ns, [t]) for t in ("memory", "turn")}
            on_file = real(st.index.reader(), ns)  # type: ignore[attr-defined]
            assert kept == {t: on_file.get(t, 0) for t in ("memory", "turn")}
        assert reads.count(ns) == 1


# -- the store's handling -----------------------------------------------------------
def test_rebuild_drops_the_persistent_tier(open_store: OpenStore, store_dir: Path) -> None:
    with open_store() as kb:
        tier = kb.store.opcache_tier()
        assert tier is not None
        tier.put("llm", "k", '"reply"')
        epoch = tier.epoch
        kb.rebuild()
        assert tier.get("llm", "k") is None
        assert tier.epoch > epoch
    with open_store() as kb:
        tier = kb.store.opcache_tier()
        assert tier is not None and tier.get("llm", "k") is None


def test_the_tier_is_off_with_the_setting(open_store: OpenStore, store_dir: Path) -> None:
    with open_store(opcache=False) as kb:
        assert kb.store.opcache_tier() is None
    with open_store(opcache_disk_bytes=0) as kb:
        assert kb.store.opcache_tier() is None
    assert not (store_dir / "opcache.db").exists()


def test_a_read_only_store_leaves_no_cache_file(open_store: OpenStore, store_dir: Path) -> None:
    with open_store() as kb:
        kb.remember("x")
    with open_store(read_only=True) as kb:
        tier = kb.store.opcache_tier()
        assert tier is not None
        tier.put("llm", "k", "1")
        assert tier.get("llm", "k") is None
    assert not (store_dir / "opcache.db").exists()


def test_purge_leaves_no_forgotten_text_in_the_cache(
    open_store: OpenStore, store_dir: Path
) -> None:
    with open_store() as kb:
        tier = kb.store.opcache_tier()
        assert tier is not None
        # What an ask would have cached before the forget: a hit list, a prompt, a reply.
        tier.put("search", "s", f'[{{"text": "{CANARY}"}}]')
        tier.put("llm", "l", f'{{"text": "the PIN: {CANARY}"}}')
        _seed(kb)
        assert _files_holding(store_dir, b"zebracanary")
        kb.compact(purge=True)
        assert tier.get("search", "s") is None and tier.get("llm", "l") is None
        tier.put("llm", "after", '"written after the purge"')
    assert (store_dir / "opcache.db").exists()
    assert _files_holding(store_dir, b"zebracanary") == []


def test_a_purge_with_nothing_to_purge_still_drops_the_cache(
    open_store: OpenStore, store_dir: Path
) -> None:
    with open_store() as kb:
        kb.remember("nothing forgotten here")
        tier = kb.store.opcache_tier()
        assert tier is not None
        tier.put("llm", "l", '"a reply"')
        assert kb.compact(purge=True)["purged"] == 0
        assert tier.get("llm", "l") is None


def test_a_reader_opened_alone_reads_the_writers_file(
    open_store: OpenStore, store_dir: Path
) -> None:
    with open_store() as kb:
        tier = kb.store.opcache_tier()
        assert tier is not None
        tier.put("judge", "k", '{"confidence_score": 90}')
    with open_store(read_only=True) as kb:  # no writer running: its -wal/-shm are gone
        tier = kb.store.opcache_tier()
        assert tier is not None and tier.get("judge", "k") == '{"confidence_score": 90}'


def test_embed_cached_keeps_vectors_in_memory_until_a_purge(
    open_store: OpenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store() as kb:
        store = kb.store
        first = store.embed_cached(["a sentence", "another sentence"])
        reads: list[int] = []
        real = store.index.cached_vectors
        monkeypatch.setattr(
            store.index, "cached_vectors", lambda hs: reads.append(len(hs)) or real(hs)
        )
        again = store.embed_cached(["another sentence", "a sentence", "a new one"])
        assert reads == [1]  # only the new text went to embeddings.db
        assert (again[0] == first[1]).all() and (again[1] == first[0]).all()
        again[0][:] = 0  # the caller's copy: the cache is not changed through it
        assert (store.embed_cached(["another sentence"])[0] == first[1]).all()
        kb.compact(purge=True)
        reads.clear()
        fresh = store.index.cached_vectors  # the purge reopened the index
        monkeypatch.setattr(
            store.index, "cached_vectors", lambda hs: reads.append(len(hs)) or fresh(hs)
        )
        store.embed_cached(["a sentence"])
        assert reads == [1]  # the purge emptied the in-memory vectors
