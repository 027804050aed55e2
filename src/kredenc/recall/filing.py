"""Filing turns off the response path: one background thread, in the order handed in.

Filing a turn embeds its texts and appends them through the housekeeper: milliseconds
of CPU that a caller waiting for the model's answer must not pay. :class:`TurnFiler`
takes the turn (:meth:`~TurnFiler.submit` never blocks) and files it on its own
thread, one turn after another, so that the turns of a session land in the order they
were said (each turn's index card names the turns just before it).

It never breaks a turn: a filing that fails is a WARNING (:func:`file_turn`), and past
``max_pending`` waiting turns a new one is dropped with a WARNING rather than letting
the queue grow without bound. :meth:`~TurnFiler.close` files what is waiting, then
stops the thread; call it before the store is closed.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kredenc.recall.conversation import file_turn
from kredenc.recall.deps import TurnSink

log = logging.getLogger("kredenc.recall")

Reply = str | None | Callable[[], str | None]


@dataclass(frozen=True)
class _Job:
    what: str  # names it in warnings: "turn of session s1"
    run: Callable[[], object]


class TurnFiler:
    """Files turns into ``sink`` (the ``Kredenc`` facade, say) on one background thread
    (started at the first :meth:`submit`)."""

    def __init__(self, sink: TurnSink, *, max_pending: int = 1000) -> None:
        self.sink = sink
        self.max_pending = max_pending
        self.dropped = 0
        self._queue: queue.Queue[_Job | threading.Event | None] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, session_id: str, turns: Sequence[Mapping[str, Any]], reply: Reply) -> bool:
        """Queue this call's user message(s) and the reply (text, or a function that
        returns it, called on the filing thread). False when the turn was dropped."""

        def job() -> None:
            try:
                text = reply() if callable(reply) else reply
            except Exception as exc:  # noqa: BLE001 - the reply's text is best effort
                log.warning("reading the reply to file failed: %s: %s", type(exc).__name__, exc)
                text = None
            file_turn(self.sink, session_id, turns, text)

        return self.submit_call(f"turn of session {session_id}", job)

    def submit_call(self, what: str, job: Callable[[], object]) -> bool:
        """Queue ``job`` (a filing the caller prepared, e.g. an ask's question and
        answer with their ids made in advance); it runs on the filing thread after
        everything queued before it. A job that raises is a WARNING naming ``what``.
        False when it was dropped (the filer is closed or ``max_pending`` are waiting)."""
        with self._lock:
            if self._closed:
                log.warning("%s not filed: the filer is closed", what)
                self.dropped += 1
                return False
            if self._queue.qsize() >= self.max_pending:
                self.dropped += 1
                log.warning(
                    "%s not filed: %d turns are already waiting to be filed",
                    what,
                    self.max_pending,
                )
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="kredenc-filer", daemon=True)
                self._thread.start()
            self._queue.put(_Job(what, job))
        return True

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every turn submitted so far is filed. False on timeout."""
        with self._lock:
            if self._thread is None:
                return True
            done = threading.Event()
            self._queue.put(done)
        return done.wait(timeout)

    def close(self, timeout: float | None = 60.0) -> bool:
        """File what is waiting, then stop the thread. False when it did not finish in
        ``timeout`` seconds (the rest is then not filed). Idempotent."""
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
            if thread is None:
                return True
            self._queue.put(None)
        thread.join(timeout)
        if thread.is_alive():
            log.warning("the filer did not finish in %s s; waiting turns are not filed", timeout)
            return False
        return True

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            if isinstance(job, threading.Event):
                job.set()
                continue
            try:
                job.run()
            except Exception as exc:  # noqa: BLE001 - filing never breaks a turn
                log.warning("%s not filed: %s: %s", job.what, type(exc).__name__, exc)
