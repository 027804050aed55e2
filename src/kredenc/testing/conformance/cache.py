"""What every operation-cache tier (:class:`~kredenc.storage.base.CacheTier`) must do.

Subclass :class:`CacheTierConformance` as ``TestMyTier`` and implement
``make_tier(path)``: open (or create) the tier stored at ``path`` (a directory that
exists, empty the first time; a server-backed tier keys its data by it). The
SQLite tier runs it in ``tests/storage/test_conformance.py``; the Redis and
PostgreSQL tiers of the scale-out issue run the same suite.

It covers the round trip (text, unicode, large values), kinds keeping equal keys
apart, replacement, persistence across a reopen, ``clear`` (empty, the epoch grows,
listeners called), and threads reading and writing at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from kredenc.storage.base import CacheTier

__all__ = ["CacheTierConformance"]


class CacheTierConformance:
    """Round trip, kinds, replacement, reopening, clear, concurrency."""

    def make_tier(self, path: Path) -> CacheTier:
        """Open the tier stored at ``path`` (create it when there is none)."""
        raise NotImplementedError

    @contextmanager
    def opened(self, path: Path) -> Iterator[CacheTier]:
        path.mkdir(parents=True, exist_ok=True)
        tier = self.make_tier(path)
        try:
            yield tier
        finally:
            tier.close()

    def test_a_value_comes_back_as_it_went_in(self, tmp_path: Path) -> None:
        values = {
            "plain": '{"text": "hello"}',
            "unicode": '["naïve café", "日本語", "emoji 🙂"]',
            "large": '"' + "x" * 1_000_000 + '"',
            "empty": "",
        }
        with self.opened(tmp_path / "t") as tier:
            assert tier.get("search", "absent") is None
            for key, value in values.items():
                tier.put("search", key, value)
            for key, value in values.items():
                assert tier.get("search", key) == value, key

    def test_kinds_keep_equal_keys_apart_and_a_put_replaces(self, tmp_path: Path) -> None:
        with self.opened(tmp_path / "t") as tier:
            tier.put("search", "k", "1")
            tier.put("llm", "k", "2")
            assert (tier.get("search", "k"), tier.get("llm", "k")) == ("1", "2")
            tier.put("llm", "k", "3")
            assert (tier.get("search", "k"), tier.get("llm", "k")) == ("1", "3")

    def test_entries_outlive_a_reopen(self, tmp_path: Path) -> None:
        with self.opened(tmp_path / "t") as tier:
            tier.put("judge", "k", '{"confidence_score": 90}')
        with self.opened(tmp_path / "t") as tier:
            assert tier.get("judge", "k") == '{"confidence_score": 90}'

    def test_clear_empties_grows_the_epoch_and_tells_listeners(self, tmp_path: Path) -> None:
        told: list[int] = []
        with self.opened(tmp_path / "t") as tier:
            tier.listen(lambda: told.append(1))
            for i in range(20):
                tier.put("search", f"k{i}", str(i))
            epoch = tier.epoch
            tier.clear()
            assert tier.epoch > epoch and told
            assert all(tier.get("search", f"k{i}") is None for i in range(20))
            tier.put("search", "after", "1")  # usable after a clear
            assert tier.get("search", "after") == "1"
        with self.opened(tmp_path / "t") as tier:
            assert tier.get("search", "k0") is None

    def test_threads_read_and_write_at_once(self, tmp_path: Path) -> None:
        with self.opened(tmp_path / "t") as tier:

            def work(n: int) -> list[str | None]:
                got = []
                for i in range(50):
                    tier.put("llm", f"{n}-{i}", f"v{n}-{i}")
                    got.append(tier.get("llm", f"{n}-{i}"))
                return got

            with ThreadPoolExecutor(4) as pool:
                results = list(pool.map(work, range(4)))
            for n, got in enumerate(results):
                assert got == [f"v{n}-{i}" for i in range(50)]
