"""The one policy for a server that derived state lives on and that stops answering.

Redis (the operation cache's shared tier, sessions' hot history) and PostgreSQL (the
operation cache's cold tier) hold only what the store can give again, so a caller
carries on without them: one WARNING when the server stops answering, no call for
``retry_s`` seconds (a lookup does not wait on a dead socket every time), one INFO
when it answers again.
"""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["Outage"]


class Outage:
    """Whether a server answered last time (thread-safe). :meth:`failed` after a call
    that raised (one WARNING: ``what`` and ``then`` say what stops and what happens
    instead), :meth:`up` after one that answered (one INFO if it had stopped);
    :meth:`usable` is False for ``retry_s`` seconds after a failure."""

    def __init__(
        self, server: str, *, what: str, then: str, log: logging.Logger, retry_s: float = 5.0
    ) -> None:
        self.server = server
        self.what = what
        self.then = then
        self.retry_s = retry_s
        self._log = log
        self._lock = threading.Lock()
        self._down = False
        self._until = 0.0

    @property
    def down(self) -> bool:
        return self._down

    def usable(self) -> bool:
        return not self._down or time.monotonic() >= self._until

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            self._until = time.monotonic() + self.retry_s
            if self._down:
                return
            self._down = True
        self._log.warning(
            "%s: %s does not answer (%s: %s); %s and it is tried again every %.0f s",
            self.what,
            self.server,
            type(exc).__name__,
            " ".join(str(exc).split())[:300],
            self.then,
            self.retry_s,
        )

    def up(self) -> None:
        if self._down:
            with self._lock:
                was, self._down = self._down, False
            if was:
                self._log.info("%s: %s answers again", self.what, self.server)
