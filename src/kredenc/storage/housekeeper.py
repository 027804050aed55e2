"""The housekeeper: the one writer of a store.

It holds an exclusive ``flock`` on ``<store>/lock`` for its whole life, so a second
writer (in any process) is refused at once. A log that several processes may write
(``Log.shared``: PostgreSQL) takes no file lock: each group is written under the log's
writers' lock (``Log.exclusive``) instead, after feeding the index any records another
process appended and did not apply (it died in between, or its index update failed).

Any number of threads submit writes; one thread appends them to the haystack, makes
them durable under the policy (several waiting requests share one fsync), applies
them to the index, and only then answers each caller with where its records landed.
"""

from __future__ import annotations

import fcntl
import logging
import os
import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kredenc.errors import KredencError, StoreError, StoreLocked
from kredenc.records import Appended
from kredenc.storage.base import Index, Log
from kredenc.storage.index.projector import EmbedFn
from kredenc.storage.index.vectors import F32

log = logging.getLogger(__name__)

_GROUP_MAX = 256  # requests that may share one fsync


class StoreLock:
    """An exclusive, process-wide lock on a store, released when the process dies."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(self._fd)
            raise StoreLocked(
                f"store is locked by pid {holder}",
                f"writes go through process {holder} while it runs; stop it to write from here "
                "(read commands such as search, get, recall, stats and check work beside it)",
            ) from None
        pid = f"{os.getpid()}\n".encode()
        os.pwrite(self._fd, pid, 0)  # write before truncating: never an empty file
        os.ftruncate(self._fd, len(pid))

    def release(self) -> None:
        if self._fd >= 0:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


@dataclass
class _Request:
    payloads: list[dict[str, Any]]
    batch: bool
    vectors: dict[str, F32] | None
    future: Future[list[Appended]] = field(default_factory=Future)


_STOP = object()


class Housekeeper:
    """Serialises every write to the haystack and the index."""

    def __init__(self, haystack: Log, index: Index, embed: EmbedFn | None) -> None:
        self.haystack = haystack
        self.index = index
        self.embed = embed
        self._queue: queue.Queue[_Request | object] = queue.Queue()
        self._closed = False
        # Set when records reached the log but not the index: the next group then
        # replays the log from where the index stopped, so the gap cannot persist.
        self._index_behind = False
        self._thread = threading.Thread(target=self._run, name="kredenc-housekeeper", daemon=True)
        self._thread.start()

    def submit(
        self,
        payloads: list[dict[str, Any]],
        *,
        batch: bool = False,
        vectors: dict[str, F32] | None = None,
    ) -> Future[list[Appended]]:
        """Queue records for appending; the future resolves once they are durable."""
        if self._closed:
            raise StoreError("the store is closed", "open it again")
        req = _Request(payloads, batch, vectors)
        self._queue.put(req)
        return req.future

    def write(
        self,
        payloads: list[dict[str, Any]],
        *,
        batch: bool = False,
        vectors: dict[str, F32] | None = None,
    ) -> list[Appended]:
        return self.submit(payloads, batch=batch, vectors=vectors).result()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join()

    # -- the writer thread ----------------------------------------------------
    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            group: list[_Request] = [first]  # type: ignore[list-item]
            stop = False
            while len(group) < _GROUP_MAX:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stop = True
                    break
                group.append(nxt)  # type: ignore[arg-type]
            try:
                self._write_group(group)
            except KredencError as exc:  # a known failure (the database went away): one line
                log.warning("housekeeper: write failed: %s", exc)
                for req in group:
                    if not req.future.done():
                        req.future.set_exception(exc)
            except Exception as exc:
                log.exception("housekeeper: write failed")
                for req in group:
                    if not req.future.done():
                        req.future.set_exception(_as_store_error(exc))
            if stop:
                return
            if self._queue.empty():
                self._maintain()

    def _maintain(self) -> None:
        """Index upkeep between writes, when none is waiting: merge the card index once
        it has grown enough (``SqliteIndex.compaction_due``). A failure only delays it."""
        failures: tuple[type[Exception], ...] = (KredencError, *self.index.errors)
        try:
            if self.index.compaction_due():
                seconds = self.index.compact()
                log.info("housekeeper: merged the card index in %.2f s", seconds)
        except failures as exc:
            log.warning("housekeeper: could not merge the card index (%s); will retry", exc)

    def _write_group(self, group: list[_Request]) -> None:
        with self.haystack.exclusive():
            if self.haystack.shared:
                self._take_in_others()
            self._write_locked(group)

    def _take_in_others(self) -> None:
        """Under the writers' lock of a shared log: if the index stops short of the log
        (records another process appended but did not apply), replay from there with
        this group. A failure here leaves that to the group's own error handling."""
        failures: tuple[type[Exception], ...] = (KredencError, *self.index.errors)
        try:
            applied_seq, _ = self.index.applied()
        except failures as exc:
            log.warning("housekeeper: cannot read the index position (%s)", exc)
            return
        if applied_seq < self.haystack.last_seq:
            self._index_behind = True

    def _write_locked(self, group: list[_Request]) -> None:
        hay = self.haystack
        done: list[tuple[_Request, list[tuple[int, int]]]] = []
        for req in group:
            try:
                placed = hay.append(req.payloads, batch=req.batch, sync=False)
            except (KredencError, OSError, ValueError, TypeError) as exc:
                req.future.set_exception(_as_store_error(exc))
                continue
            done.append((req, placed))
        if not done:
            return
        try:
            if hay.durability == "append" or (
                hay.durability == "batch" and any(r.batch for r, _ in done)
            ):
                hay.sync()
        except (KredencError, OSError) as exc:
            for req, _ in done:
                req.future.set_exception(_as_store_error(exc))
            return
        entries: list[tuple[int, dict[str, Any]]] = []
        vectors: dict[str, F32] = {}
        for req, placed in done:
            entries.extend((off, p) for (_, off), p in zip(placed, req.payloads, strict=True))
            if req.vectors:
                vectors.update(req.vectors)
        failures: tuple[type[Exception], ...] = (
            KredencError,
            OSError,
            ValueError,
            *self.index.errors,
        )
        try:
            if self._index_behind:
                _, applied_end = self.index.applied()
                records = hay.iter_from(applied_end) if applied_end > 0 else hay.iter_from()
                entries = [(rec.offset, rec.payload) for rec in records]
            self.index.apply(entries, vectors, self.embed, hay.end, hay.last_seq)
            self._index_behind = False
        except failures as exc:
            # The log has the records (it is the truth); only the index lags.
            self._index_behind = True
            log.error("index update failed after append (run 'kredenc rebuild'): %s", exc)
            for req, _ in done:
                req.future.set_exception(
                    StoreError(
                        f"records were logged but the index update failed: {exc}",
                        "run 'kredenc rebuild'",
                    )
                )
            return
        for req, placed in done:
            req.future.set_result([Appended(seq, off) for seq, off in placed])


def _as_store_error(exc: BaseException) -> KredencError:
    if isinstance(exc, KredencError):
        return exc
    if isinstance(exc, OSError):
        return StoreError(f"append failed: {exc}", "check the disk and the store directory")
    return StoreError(f"append failed: {exc}", "retry; if it fails again, run 'kredenc check'")
