"""kill -9 of a writer process at random moments: nothing that was acknowledged is lost.

Each trial starts ``_writer_proc.py`` on a store; the writer attempts up to 10,000
appends (single records and batches) and prints one line per record as soon as its
append returned. The parent kills it with SIGKILL at a random point: once a random
number of appends (0-10,000) have been acknowledged, plus a random few milliseconds
in which the writer keeps going. Then the store is reopened with ``Kredenc.open``
(recovery, then the index catching up with the log) and checked:

* the log bytes that earlier trials verified are unchanged;
* every record whose append returned is in the log at the seq and offset the writer
  was told, with the payload it wrote (``engine`` trials: ``get()`` of every id);
* the seqs are 1..N with no gap, every batch is closed by its commit record, and the
  trial's records are a prefix of its plan that ends on an append boundary: a batch
  is all or nothing;
* before recovery the index holds no record the log lacks; after it, the index holds
  exactly the log's put records (ids, seqs, offsets; one card and one vector each),
  and they are found by search.

Trials run in chains that keep writing to one store, so each also checks that a
store recovered from a crash takes appends again. Seeds are fixed; every failure
message names the trial's seed (``_writer_proc.plan(seed, 10000)`` rebuilds it).
"""

from __future__ import annotations

import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.storage.haystack import HEADER_SIZE, scan
from kredenc.testing.embedders import HashEmbedder

from . import parse_log
from ._writer_proc import Plan, item_id, item_text, item_token, plan

SEED = 20261130
WRITER = Path(__file__).with_name("_writer_proc.py")
APPENDS = 10_000  # the most one trial attempts
READY_TIMEOUT = 60.0


@dataclass(frozen=True)
class Trial:
    mode: str  # "log" (haystack + housekeeper) or "engine" (Kredenc.remember)
    seed: int
    durability: str
    kill_after: int  # acknowledged records before the kill ...
    jitter: float  # ... plus this many seconds
    max_wait: float  # or this long after the writer is ready, whichever comes first
    new_store: bool

    def __str__(self) -> str:
        return (
            f"seed {self.seed} ({self.mode}, {self.durability}, kill after "
            f"{self.kill_after} + {self.jitter * 1000:.1f} ms; module SEED {SEED})"
        )


def _trials(mode: str, count: int, chain: int, base: int) -> list[Trial]:
    rng = random.Random(base)
    out = []
    for n in range(count):
        durability = "append" if n % 10 == 9 else "none"
        if durability == "append":  # an fsync per group: a few hundred appends a second
            kill_after, max_wait = rng.randint(0, 400), 1.5
        elif n % 2:  # uniform over the whole run
            kill_after, max_wait = rng.randint(0, APPENDS), 10.0
        else:  # log-uniform: more kills early in a run (cheaper, as telling)
            kill_after, max_wait = int(math.exp(rng.uniform(0, math.log(APPENDS)))), 10.0
        jitter = rng.uniform(0.0, 0.02)
        out.append(Trial(mode, base + n, durability, kill_after, jitter, max_wait, n % chain == 0))
    return out


@dataclass
class Killed:
    """What a killed writer said before it died."""

    reported: dict[int, tuple[int, int, str]] = field(default_factory=dict)  # item: seq, off, id
    finished: bool = False


class Writer:
    """A writer child; a thread drains its stdout so that it never blocks on the pipe."""

    def __init__(self, trial: Trial, home: Path) -> None:
        self.trial = trial
        args = [trial.mode, str(home), str(trial.seed), str(APPENDS), trial.durability]
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.enough = threading.Event()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.endswith("\n"):
                break  # cut by the kill: that append is not known to have returned
            self.lines.append(line)
            if line == "ready\n":
                self.ready.set()
            if len(self.lines) > self.trial.kill_after or line == "done\n":
                self.enough.set()
        self.ready.set()  # EOF: wake the waiter even if the child died early
        self.enough.set()

    def run(self) -> Killed:
        """Wait for the kill point, SIGKILL the writer, return what it acknowledged."""
        try:
            self.ready.wait(READY_TIMEOUT)
            if self.proc.poll() is not None or self.lines[:1] != ["ready\n"]:
                self._reap()
                err = self.proc.stderr.read() if self.proc.stderr else ""
                pytest.fail(f"{self.trial}: writer did not start:\n{err}")
            self.enough.wait(self.trial.max_wait)
            time.sleep(self.trial.jitter)
        finally:
            self._reap()
        out = Killed()
        for line in self.lines[1:]:
            if line == "done\n":
                out.finished = True
                continue
            item, seq, offset, rid = line.split()
            out.reported[int(item)] = (int(seq), int(offset), rid)
        return out

    def _reap(self) -> None:
        """SIGKILL (unless dead already), wait, and close the pipes; safe to repeat."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)
        self._reader.join(timeout=60)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def close(self) -> None:
        self._reap()
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@dataclass
class Verified:
    """The state of a chain's store after its last check."""

    data: bytes = b""
    last_seq: int = 0
    puts: int = 0


def _check(home: Path, trial: Trial, p: Plan, killed: Killed, prior: Verified) -> Verified:
    """Reopen after the kill and check everything the module docstring promises."""
    log_path = home / "haystack.log"
    raw = log_path.read_bytes()
    assert raw[: len(prior.data)] == prior.data, f"{trial}: verified log bytes changed"
    found = scan(raw, log_path)  # a crash leaves at most a torn tail, never damage
    start = max(len(prior.data), HEADER_SIZE)
    new = parse_log(raw[: found.end], start)
    new_puts = {(r.payload["id"], r.seq, r.offset) for r in new if r.op == "put"}

    conn = sqlite3.connect(home / "index.db")
    try:
        indexed = set(
            conn.execute("SELECT id, seq, offset FROM records WHERE offset >= ?", (start,))
        )
    finally:
        conn.close()
    assert indexed <= new_puts, f"{trial}: index ahead of the log: {sorted(indexed - new_puts)[:3]}"

    with Kredenc.open(home, embedder=HashEmbedder(), durability=trial.durability) as kb:
        assert kb.haystack.end == found.end == log_path.stat().st_size, trial
        assert log_path.read_bytes() == raw[: found.end], trial
        seqs = [r.seq for r in new]
        assert seqs == list(range(prior.last_seq + 1, prior.last_seq + 1 + len(new))), (
            f"{trial}: seqs after {prior.last_seq} are not gap-free: {seqs[:5]}..."
        )
        # Every batch is closed by its commit record (the log starts outside a batch
        # at ``start``: the previous check ended there).
        open_txn = None
        for r in new:
            txn = r.payload.get("txn")
            if r.op == "commit":
                assert txn is not None and open_txn == txn, f"{trial}: stray commit at {r.offset}"
                open_txn = None
            else:
                assert open_txn in (None, txn), f"{trial}: batch {open_txn} unclosed at {r.offset}"
                open_txn = txn
        assert open_txn is None, f"{trial}: batch {open_txn} unclosed at the end"

        # This trial's records: a prefix of its plan ending on an append boundary.
        mine = {r.payload["meta"]["i"]: r for r in new if r.op == "put"}
        assert all(r.payload["meta"]["seed"] == trial.seed for r in mine.values()), trial
        items = sorted(mine)
        assert items == list(range(len(items))), f"{trial}: not a prefix of the plan"
        assert [mine[i].seq for i in items] == sorted(mine[i].seq for i in items), trial
        assert len(items) in p.boundaries(), f"{trial}: {len(items)} items end inside a batch"

        # Everything acknowledged survived, where and as it was written.
        for item, (seq, offset, rid) in killed.reported.items():
            rec = mine.get(item)
            assert rec is not None, f"{trial}: acknowledged item {item} (seq {seq}) was lost"
            assert (rec.seq, rec.offset, rec.payload["id"]) == (seq, offset, rid), trial
            assert rec.payload["text"] == item_text(trial.seed, item), trial
            if trial.mode == "log":
                assert rid == item_id(trial.seed, item), trial
            else:
                mem = kb.get(rid)
                assert (mem.seq, mem.offset, mem.meta["i"]) == (seq, offset, item), trial
                assert mem.text == rec.payload["text"], trial

        # The index holds exactly the log's put records.
        reader = kb.index.reader()
        rows = set(
            reader.execute("SELECT id, seq, offset FROM records WHERE offset >= ?", (start,))
        )
        assert rows == new_puts, f"{trial}: index != log ({len(rows)} rows, {len(new_puts)})"
        puts = prior.puts + len(new_puts)
        counts = [
            reader.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("records", "cards", "vectors")
        ]
        assert counts == [puts] * 3, f"{trial}: {counts} != {puts}"
        assert kb.index.applied()[1] == kb.haystack.end, trial
        rng = random.Random(trial.seed)
        for item in {*rng.sample(items, min(2, len(items))), *items[-1:]}:
            hits = kb.search(item_token(trial.seed, item), mode="lexical", k=2)
            assert [h.id for h in hits] == [mine[item].payload["id"]], f"{trial}: item {item}"
        return Verified(raw[: found.end], kb.haystack.last_seq, puts)


def _run_trials(tmp_path: Path, trials: list[Trial]) -> dict[str, int]:
    totals = {"trials": 0, "acknowledged": 0, "found": 0, "torn": 0, "finished": 0}
    home = tmp_path
    prior = Verified()
    for n, trial in enumerate(trials):
        if trial.new_store:
            home = tmp_path / f"store{n}"
            Kredenc.open(home, embedder=HashEmbedder(), durability="none").close()
            prior = Verified()
        writer = Writer(trial, home)
        try:
            killed = writer.run()
        finally:
            writer.close()
        size = (home / "haystack.log").stat().st_size
        after = _check(home, trial, plan(trial.seed, APPENDS), killed, prior)
        totals["trials"] += 1
        totals["acknowledged"] += len(killed.reported)
        totals["found"] += after.puts - prior.puts
        totals["torn"] += int(len(after.data) < size)
        totals["finished"] += int(killed.finished)
        prior = after
    return totals


@pytest.mark.slow
def test_kill_9_during_appends_through_the_housekeeper(tmp_path: Path) -> None:
    """100 trials in 20 chains of 5; every tenth trial with durability 'append'."""
    totals = _run_trials(tmp_path, _trials("log", 100, chain=5, base=SEED))
    assert totals["trials"] == 100
    # Kills must land mid-run: not all before the first append or after the last.
    assert totals["acknowledged"] > 20_000, totals
    assert totals["finished"] < 10, totals
    print(f"housekeeper kill trials: {totals}")


@pytest.mark.slow
def test_kill_9_during_remember(tmp_path: Path) -> None:
    """20 trials through Kredenc.remember()/remember_many() in 4 chains of 5."""
    totals = _run_trials(tmp_path, _trials("engine", 20, chain=5, base=SEED + 1_000))
    assert totals["trials"] == 20
    assert totals["acknowledged"] > 4_000, totals
    assert totals["finished"] < 4, totals
    print(f"engine kill trials: {totals}")
