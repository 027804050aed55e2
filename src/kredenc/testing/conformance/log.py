"""What every :class:`~kredenc.storage.base.Log` backend must do: the conformance suite.

Subclass :class:`LogConformance` in a test module as ``TestMyLog`` and implement its
four hooks. ``make_log`` opens (and so recovers) the log stored at a path, creating
an empty one when none is there. The three damage hooks leave, with the log closed,
what a crash or a bad disk leaves: part of a record at the tail, a batch whose
commit never landed, a damaged record. A backend in which the first two cannot
happen (a database that commits whole transactions) may leave nothing behind: their
tests then check that nothing was lost. ``damage`` must damage the record (e.g. its
stored checksum no longer matches), and opening must then refuse a log in which
valid records follow it and cut it when it is the last.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from kredenc.errors import CorruptLog, StoreError
from kredenc.storage.base import Log

__all__ = ["LogConformance"]


def _put(n: int, **extra: Any) -> dict[str, Any]:
    return {"op": "put", "ns": "conformance", "id": f"r{n}", "text": f"record {n}", **extra}


class LogConformance:
    """Append, batches all-or-nothing, recovery rules, seq order, reads, iteration."""

    # -- hooks a backend implements ----------------------------------------------
    def make_log(self, path: Path) -> Log:
        """Open the log stored at ``path`` (create an empty one if there is none)."""
        raise NotImplementedError

    def tear_tail(self, path: Path) -> None:
        """With the log closed: leave part of a record after the last whole one, as
        a crash in the middle of an append does."""
        raise NotImplementedError

    def leave_uncommitted(self, path: Path, payloads: Sequence[dict[str, Any]]) -> None:
        """With the log closed: leave ``payloads`` as a batch whose commit is missing
        (every record of it whole, the crash before the commit)."""
        raise NotImplementedError

    def damage(self, path: Path, offset: int) -> None:
        """With the log closed: damage the stored record at ``offset`` (a flipped
        byte in its payload); the records after it stay whole."""
        raise NotImplementedError

    # -- helpers --------------------------------------------------------------------
    @pytest.fixture
    def log_path(self, tmp_path: Path) -> Path:
        return tmp_path / "conformance.log"

    @contextmanager
    def opened(self, path: Path) -> Iterator[Log]:
        log = self.make_log(path)
        try:
            yield log
        finally:
            log.close()

    def append(
        self, log: Log, payloads: Sequence[dict[str, Any]], *, batch: bool = False
    ) -> list[tuple[int, int]]:
        """Append copies (a log may reorder a payload's keys in place)."""
        return log.append([copy.deepcopy(p) for p in payloads], batch=batch)

    @staticmethod
    def ids(log: Log) -> list[str]:
        return [str(r.payload["id"]) for r in log.iter_from() if r.payload.get("op") == "put"]

    @staticmethod
    def assert_holds(got: dict[str, Any], want: dict[str, Any]) -> None:
        for key, value in want.items():
            assert got[key] == value, (key, got.get(key), value)

    # -- appending and reading ----------------------------------------------------------
    def test_a_new_log_is_empty_and_sound(self, log_path: Path) -> None:
        with self.opened(log_path) as log:
            assert log.last_seq == 0
            assert list(log.iter_from()) == []
            sound, findings = log.check()
            assert sound, findings
            assert isinstance(log.log_id, bytes) and log.log_id

    def test_append_assigns_consecutive_seqs_and_increasing_addresses(self, log_path: Path) -> None:
        with self.opened(log_path) as log:
            first = self.append(log, [_put(1), _put(2), _put(3)])
            assert [s for s, _ in first] == [1, 2, 3]
            second = self.append(log, [_put(4)])
            assert [s for s, _ in second] == [4]
            addresses = [a for _, a in first + second]
            assert addresses == sorted(set(addresses))
            assert log.last_seq == 4
            assert log.end > addresses[-1]
            for n, (seq, address) in enumerate(first + second, start=1):
                got = log.read(address)
                assert got["seq"] == seq
                self.assert_holds(got, _put(n))

    def test_payloads_round_trip(self, log_path: Path) -> None:
        odd = _put(
            1,
            text='"quotes", \\backslash\\, newline\n, tab\t, NUL-free unicode: żółw 🐢 עברית',
            scores={"importance": 0.125, "confidence": 1.0},
            tags=["a", "b"],
            nothing=None,
            flag=True,
            big=2**53,
            nested={"list": [1, 2.5, "x", None], "empty": {}},
        )
        with self.opened(log_path) as log:
            [(_, address)] = self.append(log, [odd])
            self.assert_holds(log.read(address), odd)
        with self.opened(log_path) as log:
            self.assert_holds(log.read(address), odd)

    def test_iterate_from_the_start_or_an_address(self, log_path: Path) -> None:
        with self.opened(log_path) as log:
            placed = self.append(log, [_put(n) for n in range(1, 6)])
            records = list(log.iter_from())
            assert [r.offset for r in records] == [a for _, a in placed]
            assert [r.seq for r in records] == [1, 2, 3, 4, 5]
            for before, after in itertools.pairwise(records):
                assert before.end == after.offset
            assert records[-1].end == log.end
            tail = list(log.iter_from(placed[2][1]))
            assert [r.seq for r in tail] == [3, 4, 5]
            assert [r.payload["id"] for r in tail] == ["r3", "r4", "r5"]
            assert list(log.iter_from(log.end)) == []

    def test_iteration_stops_at_the_end_it_started_with(self, log_path: Path) -> None:
        with self.opened(log_path) as log:
            self.append(log, [_put(n) for n in range(1, 4)])
            records = log.iter_from()
            assert next(records).seq == 1
            self.append(log, [_put(4), _put(5)])
            assert [r.seq for r in records] == [2, 3]
            assert [r.seq for r in log.iter_from()] == [1, 2, 3, 4, 5]

    def test_read_at_a_bad_address_is_a_store_error(self, log_path: Path) -> None:
        with self.opened(log_path) as log:
            [(_, address)] = self.append(log, [_put(1)])
            with pytest.raises(StoreError):
                log.read(log.end)
            with pytest.raises(StoreError):
                log.read(address + 1)
            assert log.read(address)["id"] == "r1"

    def test_reopening_keeps_every_record_and_appending_continues(self, log_path: Path) -> None:
        with self.opened(log_path) as log:
            self.append(log, [_put(1), _put(2)])
            self.append(log, [_put(3), _put(4)], batch=True)
            log_id, last_seq, end = log.log_id, log.last_seq, log.end
            before = [(r.offset, r.payload) for r in log.iter_from()]
        with self.opened(log_path) as log:
            assert (log.log_id, log.last_seq, log.end) == (log_id, last_seq, end)
            assert [(r.offset, r.payload) for r in log.iter_from()] == before
            [(seq, address)] = self.append(log, [_put(5)])
            assert seq == last_seq + 1
            assert address >= end
            assert self.ids(log) == ["r1", "r2", "r3", "r4", "r5"]

    def test_two_logs_have_different_ids(self, tmp_path: Path) -> None:
        with self.opened(tmp_path / "one.log") as one, self.opened(tmp_path / "two.log") as two:
            assert one.log_id != two.log_id

    # -- batches and seq order ---------------------------------------------------------
    def test_a_batch_is_appended_in_order_without_gaps(self, log_path: Path) -> None:
        with self.opened(log_path) as log:
            self.append(log, [_put(1)])
            placed = self.append(log, [_put(2), _put(3), _put(4)], batch=True)
            assert [s for s, _ in placed] == [2, 3, 4]
            self.append(log, [_put(5)])
            seqs = [r.seq for r in log.iter_from()]
            # A backend may spend seqs on its own records (a commit marker) but the
            # seqs stay consecutive, and the last is the log's last_seq.
            assert seqs == list(range(1, len(seqs) + 1))
            assert seqs[-1] == log.last_seq
            assert self.ids(log) == ["r1", "r2", "r3", "r4", "r5"]
        with self.opened(log_path) as log:
            assert self.ids(log) == ["r1", "r2", "r3", "r4", "r5"]

    def test_uncommitted_batch_at_the_tail_is_discarded_whole(self, log_path: Path) -> None:
        with self.opened(log_path) as log:
            self.append(log, [_put(1), _put(2)])
            last_seq, end = log.last_seq, log.end
        self.leave_uncommitted(log_path, [_put(3), _put(4), _put(5)])
        with self.opened(log_path) as log:
            assert self.ids(log) == ["r1", "r2"]
            assert (log.last_seq, log.end) == (last_seq, end)
            [(seq, _)] = self.append(log, [_put(6)])
            assert seq == last_seq + 1
        with self.opened(log_path) as log:
            assert self.ids(log) == ["r1", "r2", "r6"]
            sound, findings = log.check()
            assert sound, findings

    # -- recovery ---------------------------------------------------------------------
    def test_torn_tail_is_cut_and_appending_continues(self, log_path: Path) -> None:
        with self.opened(log_path) as log:
            placed = self.append(log, [_put(1), _put(2), _put(3)])
            last_seq, end = log.last_seq, log.end
        self.tear_tail(log_path)
        with self.opened(log_path) as log:
            assert self.ids(log) == ["r1", "r2", "r3"]
            assert (log.last_seq, log.end) == (last_seq, end)
            assert log.read(placed[-1][1])["id"] == "r3"
            [(seq, address)] = self.append(log, [_put(4)])
            assert seq == last_seq + 1
            assert log.read(address)["id"] == "r4"
        with self.opened(log_path) as log:
            assert self.ids(log) == ["r1", "r2", "r3", "r4"]
            sound, findings = log.check()
            assert sound, findings

    def test_damaged_record_followed_by_valid_ones_is_corruption(self, log_path: Path) -> None:
        with self.opened(log_path) as log:
            placed = [self.append(log, [_put(n)])[0] for n in range(1, 6)]
        bad = placed[1][1]
        self.damage(log_path, bad)
        with pytest.raises(CorruptLog) as first:
            self.make_log(log_path)
        assert first.value.offset == bad
        # Nothing was cut from the middle: the damage is still there, at the same place.
        with pytest.raises(CorruptLog) as again:
            self.make_log(log_path)
        assert again.value.offset == bad

    def test_damaged_last_record_is_a_torn_tail(self, log_path: Path) -> None:
        with self.opened(log_path) as log:
            placed = [self.append(log, [_put(n)])[0] for n in range(1, 4)]
        self.damage(log_path, placed[-1][1])
        with self.opened(log_path) as log:
            assert self.ids(log) == ["r1", "r2"]
            assert log.last_seq == 2
            [(seq, _)] = self.append(log, [_put(4)])
            assert seq == 3
        with self.opened(log_path) as log:
            assert self.ids(log) == ["r1", "r2", "r4"]
