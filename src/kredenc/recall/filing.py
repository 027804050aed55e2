"""Filing turns off the response path: one background thread, in the order handed in.

Filing a turn embeds its texts and appends them through the housekeeper: milliseconds
of CPU that a caller waiting for the model's answer must not pay. :class:`TurnFiler`
takes the turn (:meth:`~TurnFiler.submit`) and files it on its own thread, one turn
after another, so that the turns of a session land in the order they were said (each
turn's index card names the turns just before it).

Group commit: the thread takes everything waiting (up to ``group_max``, 256, jobs).
When fewer wait it lingers for more while they keep coming (one at least every
``quiet_s``, 5 ms; up to ``linger_s``, 50 ms; not while a :meth:`flush` or
:meth:`close` waits), so a burst is filed in batches and a caller that pauses between
calls has its filing done in the pause. Jobs that hand back log payloads for a store
(the asks' turns: ``submit_call(..., into=store)``; the turns of :meth:`~TurnFiler.submit`
when the sink can prepare them, a ``BatchTurnSink`` such as the facade) are prepared one
after another, in order (so each session's turns keep their order and context), and
the payloads of neighbouring ones written as ONE batch through the housekeeper
(``ingest.passages.write_payloads``: one embedding call, one log append and fsync, one
index transaction) instead of one write each: 8 proxied turns handed over together
cost 4.4 ms of CPU each instead of 7.7-8.0 (docs/benchmarks.md, the proxy's CPU per
request). The batch lands all or none: a job whose
preparation fails is a WARNING and is left out; a write that fails is a WARNING naming
the jobs of the batch.

It loses nothing for being busy: when ``max_pending`` jobs are waiting, :meth:`submit`
waits (up to ``wait_s``, 5 s) for room rather than dropping, so a burst of asks is
slowed to the filing's pace instead of losing turns. Only a closed filer, or a queue
still full after ``wait_s`` (the filing is stuck: a store that hangs), drops a turn,
with a WARNING and the :attr:`~TurnFiler.dropped` count. :meth:`~TurnFiler.close`
files what is waiting, then stops the thread; call it before the store is closed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kredenc.ingest.passages import write_payloads
from kredenc.recall.conversation import file_turn, turn_items
from kredenc.recall.deps import BatchTurnSink, TurnSink

if TYPE_CHECKING:
    from kredenc.storage.store import Store

log = logging.getLogger("kredenc.recall")

Reply = str | None | Callable[[], str | None]

GROUP_MAX = 256  # jobs the thread takes, and writes as one batch, at most
LINGER_S = 0.05  # how long it waits for more when fewer are waiting, at most
QUIET_S = 0.005  # ... and it stops waiting once no job came for this long
WAIT_S = 5.0  # how long a submit waits for room in a full queue before it drops


@dataclass(frozen=True)
class _Job:
    what: str  # names it in warnings: "turn of session s1"
    run: Callable[[], object]
    into: Store | None = None  # run() returns payloads to write into this store


_Item = _Job | threading.Event | None  # a job, a flush's marker, or close's stop


class TurnFiler:
    """Files turns into ``sink`` (the ``Kredenc`` facade, say) on one background thread
    (started at the first :meth:`submit`)."""

    def __init__(
        self,
        sink: TurnSink,
        *,
        max_pending: int = 1000,
        wait_s: float = WAIT_S,
        group_max: int = GROUP_MAX,
        linger_s: float = LINGER_S,
        quiet_s: float = QUIET_S,
    ) -> None:
        self.sink = sink
        self.max_pending = max_pending
        self.wait_s = wait_s
        self.group_max = group_max
        self.linger_s = linger_s
        self.quiet_s = quiet_s
        self.dropped = 0
        self._items: deque[_Item] = deque()
        self._waiting = 0  # jobs in _items
        self._markers = 0  # flush markers and stops in _items: no lingering then
        self._pending = 0  # jobs submitted and not yet done (waiting or being filed)
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # the filing thread waits here for work
        self._room = threading.Condition(lock)  # a submit waits here for room
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def pending(self) -> int:
        """Jobs submitted and not yet done: 0 means everything submitted is filed."""
        return self._pending

    def submit(self, session_id: str, turns: Sequence[Mapping[str, Any]], reply: Reply) -> bool:
        """Queue this call's user message(s) and the reply (text, or a function that
        returns it, called on the filing thread). A sink that can prepare turns
        (``BatchTurnSink``) has them written in one batch with the turns waiting beside
        them (one embedding call for all their texts). False when the turn was dropped."""

        what = f"turn of session {session_id}"
        sink = self.sink
        if isinstance(sink, BatchTurnSink):
            # Prepared here, written with its neighbours' turns as one batch.
            def prepared() -> list[dict[str, Any]]:
                items = turn_items(turns, _reply_text(reply))
                return sink.prepare_turns(session_id, items) if items else []

            return self.submit_call(what, prepared, into=sink.store)

        def job() -> None:
            file_turn(sink, session_id, turns, _reply_text(reply))

        return self.submit_call(what, job)

    def submit_call(
        self, what: str, job: Callable[[], object], *, into: Store | None = None
    ) -> bool:
        """Queue ``job`` (a filing the caller prepared, e.g. an ask's question and
        answer with their ids made in advance); it runs on the filing thread after
        everything queued before it. With ``into``, ``job`` returns the log payloads
        to write into that store (``memory.turns.TurnFiler.prepare``), and they are
        written in one batch with the neighbouring jobs' (see the module docstring).
        A job that raises is a WARNING naming ``what``. When ``max_pending`` jobs are
        waiting it waits up to ``wait_s`` for room. False when it was dropped (the
        filer is closed, or the queue stayed full)."""
        with self._cond:
            if self._closed:
                log.warning("%s not filed: the filer is closed", what)
                self.dropped += 1
                return False
            if self._waiting >= self.max_pending and not self._on_filing_thread():
                deadline = time.monotonic() + self.wait_s
                while self._waiting >= self.max_pending and not self._closed:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._room.wait(left)
            if self._closed or self._waiting >= self.max_pending:
                self.dropped += 1
                if self._closed:
                    log.warning("%s not filed: the filer is closed", what)
                else:
                    log.warning(
                        "%s not filed: %d turns are already waiting to be filed "
                        "(waited %.1f s for room)",
                        what,
                        self.max_pending,
                        self.wait_s,
                    )
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="kredenc-filer", daemon=True)
                self._thread.start()
            self._items.append(_Job(what, job, into))
            self._waiting += 1
            self._pending += 1
            # Wake the filing thread only when it waits for a first job or a full group:
            # a lingering one wakes by itself, and each wake-up takes the interpreter
            # from the caller (it cost a repeated ask about 0.1 ms).
            if self._waiting in (1, self.group_max):
                self._cond.notify()
        return True

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every turn submitted so far is filed. False on timeout."""
        with self._cond:
            if self._thread is None:
                return True
            done = threading.Event()
            self._put_marker(done)
        return done.wait(timeout)

    def close(self, timeout: float | None = 60.0) -> bool:
        """File what is waiting, then stop the thread. False when it did not finish in
        ``timeout`` seconds (the rest is then not filed). Idempotent."""
        with self._cond:
            self._closed = True
            self._room.notify_all()  # a submit waiting for room gives up
            thread, self._thread = self._thread, None
            if thread is None:
                return True
            self._put_marker(None)
        thread.join(timeout)
        if thread.is_alive():
            log.warning("the filer did not finish in %s s; waiting turns are not filed", timeout)
            return False
        return True

    def _put_marker(self, marker: threading.Event | None) -> None:
        self._items.append(marker)
        self._markers += 1
        self._cond.notify()  # a flush or close ends the linger

    def _on_filing_thread(self) -> bool:
        return self._thread is threading.current_thread()  # its job must not wait for it

    # -- the filing thread ---------------------------------------------------------
    def _run(self) -> None:
        while True:
            if not self._file(self._take()):
                return

    def _take(self) -> list[_Item]:
        """What is waiting, up to ``group_max`` jobs and the first marker; when fewer
        jobs wait and no marker, lingers for more while they keep coming (a job at
        least every ``quiet_s``), up to ``linger_s``: so a burst is filed in batches,
        and a caller that pauses between jobs (a user reading the answer) has its
        filing done in the pause rather than beside its next call."""
        with self._cond:
            while not self._items:
                self._cond.wait()
            if self._markers == 0 and self._waiting < self.group_max and self.linger_s > 0:
                deadline = time.monotonic() + self.linger_s
                seen = 0
                while self._markers == 0 and seen < self._waiting < self.group_max:
                    seen = self._waiting
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(min(self.quiet_s, left))
            taken: list[_Item] = []
            jobs = 0
            while self._items and jobs < self.group_max:
                item = self._items.popleft()
                taken.append(item)
                if isinstance(item, _Job):
                    jobs += 1
                else:
                    self._markers -= 1
                    break
            self._waiting -= jobs
            self._room.notify_all()  # room for a submit waiting
            return taken

    def _file(self, taken: list[_Item]) -> bool:
        """File ``taken`` in order (neighbouring ``into`` jobs of one store as one
        batch); False at close's stop."""
        group: list[_Job] = []
        for item in taken:
            if isinstance(item, _Job) and item.into is not None:
                if group and group[0].into is not item.into:
                    self._write(group)
                    group = []
                group.append(item)
                continue
            self._write(group)
            group = []
            if item is None:
                return False
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                item.run()
            except Exception as exc:  # noqa: BLE001 - filing never breaks a turn
                log.warning("%s not filed: %s: %s", item.what, type(exc).__name__, exc)
            finally:
                self._done(1)
        self._write(group)
        return True

    def _write(self, group: list[_Job]) -> None:
        """Prepare each job's payloads in order, then write them all as one batch."""
        if not group:
            return
        try:
            payloads: list[dict[str, Any]] = []
            named: list[str] = []
            for job in group:
                try:
                    made = job.run()
                except Exception as exc:  # noqa: BLE001 - filing never breaks a turn
                    log.warning("%s not filed: %s: %s", job.what, type(exc).__name__, exc)
                    continue
                if isinstance(made, list) and made:
                    payloads.extend(made)
                    named.append(job.what)
                time.sleep(0)  # let a caller waiting for the interpreter in between
            if not payloads:
                return
            store = group[0].into
            assert store is not None
            try:
                write_payloads(store, payloads)
            except Exception as exc:  # noqa: BLE001 - filing never breaks a turn
                shown = ", ".join(named[:3]) + (
                    f" and {len(named) - 3} more" if len(named) > 3 else ""
                )
                log.warning("%s not filed: %s: %s", shown, type(exc).__name__, exc)
        finally:
            self._done(len(group))

    def _done(self, jobs: int) -> None:
        with self._cond:
            self._pending -= jobs


def _reply_text(reply: Reply) -> str | None:
    """The reply's text (a function is called now, on the filing thread)."""
    try:
        return reply() if callable(reply) else reply
    except Exception as exc:  # noqa: BLE001 - the reply's text is best effort
        log.warning("reading the reply to file failed: %s: %s", type(exc).__name__, exc)
        return None
