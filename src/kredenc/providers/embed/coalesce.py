"""Concurrent query embeddings coalesced into one model run.

A server that recalls for several conversations at once (the proxy, ``kredenc serve``)
calls :meth:`~kredenc.providers.embed.base.Embedder.embed_query` from several threads
at the same moment; every embedder's ``embed_query`` goes through one :class:`Coalescer`
(the base class makes it, over the embedder's ``embed_queries``). Run one by one, each
call reads the whole model on its own and the runs fight for the cores (every
onnxruntime run has its own intra-op threads), so the last of a burst waits for all the
others. A batch of short queries costs little more
than one of them (the weights are read once: on the 2-vCPU machine a batch of eight
took 2-2.7x one query, docs/benchmarks.md), so :class:`Coalescer` runs the queries that
arrive while a run is under way as the next batch.

It never waits for company: a call that finds no run under way runs at once, alone, so
a single caller pays nothing. While a run is under way, arriving calls queue; when it
ends, the first of them leads the next run with everything queued by then (at most
``max_batch``), and each caller gets its own row. An exception from a run is raised in
every caller of that batch, and the next batch still runs.

Whether batching pays depends on the CPU and the threads a run has. On the 2-vCPU
Xeon of 2026-12-05 a batch of eight short queries on the 8-bit MiniLM took 8.5x one
query on one thread and 5.8x on two: no gain. So MiniLM, whose queries run on one
thread by default (``embed_query_threads``), does not coalesce: its concurrent queries
run side by side on the cores instead (``coalesce_queries``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

#: One row per text (``base.Vectors``; named here too: ``base`` imports this module).
Vectors = npt.NDArray[np.float32]

#: Queries in one run at most (a burst of a server's recalls; more wait for the next run).
MAX_BATCH = 16


@dataclass
class _Call:
    text: str
    done: threading.Event = field(default_factory=threading.Event)
    lead: bool = False
    row: Vectors | None = None
    error: BaseException | None = None


class Coalescer:
    """Runs ``embed(texts)`` for the calls that arrive while another run is under way,
    together; thread-safe. ``embed`` returns one row per text, in order."""

    def __init__(
        self, embed: Callable[[Sequence[str]], Vectors], *, max_batch: int = MAX_BATCH
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._embed = embed
        self._max_batch = max_batch
        self._lock = threading.Lock()
        self._queue: list[_Call] = []
        self._running = False
        #: Runs made and queries they carried (for tests and the benchmark).
        self.runs = 0
        self.queries = 0

    def __call__(self, text: str) -> Vectors:
        call = _Call(text)
        with self._lock:
            self._queue.append(call)
            if self._running:
                lead = False
            else:
                self._running = lead = True
        if not lead:
            call.done.wait()
            if not call.lead:
                return self._result(call)
        self._lead()
        return self._result(call)

    def _lead(self) -> None:
        """Run one batch from the queue's head, then hand the next to its first call."""
        with self._lock:
            batch = self._queue[: self._max_batch]
            del self._queue[: self._max_batch]
        try:
            rows = self._embed([c.text for c in batch])
            if len(rows) != len(batch):
                raise RuntimeError(f"the embedder returned {len(rows)} rows for {len(batch)}")
            for c, row in zip(batch, rows, strict=True):
                c.row = np.array(row, dtype=np.float32)
        except BaseException as exc:  # noqa: BLE001 - re-raised in every caller of the batch
            for c in batch:
                c.error = exc
        with self._lock:
            self.runs += 1
            self.queries += len(batch)
            following = self._queue[0] if self._queue else None
            if following is None:
                self._running = False
            else:
                following.lead = True
        for c in batch:
            c.done.set()
        if following is not None:
            following.done.set()

    @staticmethod
    def _result(call: _Call) -> Vectors:
        if call.error is not None:
            raise call.error
        assert call.row is not None
        return call.row
