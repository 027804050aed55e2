"""A rebuild by one process of a PostgreSQL store that other processes serve: the others'
searches, after it, answer as before (a rebuild drops and refills the index tables in
place; a handle that held plans, statements or cached state must not break)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.postgres import require

pytestmark = pytest.mark.postgres

require()


@pytest.fixture
def pg(postgres_dsn: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    return {
        "backend": "postgres",
        "postgres_dsn": postgres_dsn,
        "postgres_schema": "t_shared_" + request.node.name.lower()[:40],
        "durability": "none",
    }


def test_other_handles_search_after_a_rebuild(tmp_path: Path, pg: dict[str, Any]) -> None:
    with Kredenc.open(tmp_path / "a", embedder=HashEmbedder(), **pg) as a:
        ids = [a.remember(t).id for t in ("tea with milk", "coffee at noon", "green tea")]
        with Kredenc.open(tmp_path / "b", embedder=HashEmbedder(), **pg) as b:
            for _ in range(3):  # warm plans and prepared statements
                before = [h.id for h in b.search("tea", k=5)]
                words = [h.id for h in b.search("tea", k=5, mode="lexical")]
            assert set(words) == {ids[0], ids[2]}
            a.rebuild()
            assert [h.id for h in b.search("tea", k=5)] == before
            assert [h.id for h in b.search("tea", k=5, mode="lexical")] == words
            assert [h.id for h in b.search("tea", k=5, mode="dense")]
            assert b.get(ids[1]).text == "coffee at noon"
            new = b.remember("iced tea in summer").id
            assert new in {h.id for h in a.search("iced tea", k=5)}


def test_searches_during_a_rebuild_see_the_whole_index(tmp_path: Path, pg: dict[str, Any]) -> None:
    """Another handle's searches while one rebuilds: each answers from a whole index
    (the old one or the new one), never an error and never a half-refilled one (the
    last record filed is the last one a refill writes)."""
    import threading

    texts = [f"note {i} about tea and the garden" for i in range(3000)]
    with Kredenc.open(tmp_path / "a", embedder=HashEmbedder(), **pg) as a:
        a.remember_many([{"text": t} for t in texts])
        last = a.remember("the zebra crossing by the gate").id
        with Kredenc.open(tmp_path / "b", embedder=HashEmbedder(), **pg) as b:
            assert [h.id for h in b.search("zebra", k=3, mode="lexical")] == [last]
            seen: list[object] = []
            done = threading.Event()

            def watch() -> None:
                while not done.is_set():
                    try:
                        seen.append([h.id for h in b.search("zebra", k=3, mode="lexical")])
                    except Exception as exc:  # noqa: BLE001 - what the test looks for
                        seen.append(f"{type(exc).__name__}: {exc}")
                    time.sleep(0.005)

            watcher = threading.Thread(target=watch)
            watcher.start()
            try:
                a.rebuild()
            finally:
                done.set()
                watcher.join()
    bad = [s for s in seen if s != [last]]
    assert len(seen) > 3
    assert not bad, f"{len(bad)} of {len(seen)} searches during the rebuild: {bad[:3]}"


def test_a_rebuild_that_fails_keeps_the_old_index(
    tmp_path: Path, pg: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fill of the staging index fails: the store's index is the old one, whole,
    still written to, and the next rebuild (which drops the leftover) succeeds."""
    from kredenc.storage.store import Store

    with Kredenc.open(tmp_path / "a", embedder=HashEmbedder(), **pg) as a:
        ids = [a.remember(t).id for t in ("tea with milk", "coffee at noon")]
        real = Store._catch_up

        def fill_fails(self: Store) -> None:
            raise RuntimeError("the disk is full")

        monkeypatch.setattr(Store, "_catch_up", fill_fails)
        with pytest.raises(RuntimeError, match="disk is full"):
            a.rebuild()
        monkeypatch.setattr(Store, "_catch_up", real)
        assert [h.id for h in a.search("tea", k=3, mode="lexical")] == [ids[0]]
        late = a.remember("green tea at four").id
        assert a.rebuild()["records"] == 3
        assert {h.id for h in a.search("tea", k=3, mode="lexical")} == {ids[0], late}
