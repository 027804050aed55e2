"""The gate every call on an open store passes: it counts the calls in flight, so that
closing waits for them, and refuses calls once the store is closing.

Entering costs one uncontended lock and a thread-local counter (about half a
microsecond; a search takes milliseconds). A call made inside another call on the same
thread (the facade calling the store, the store calling itself) is the same call: it
neither counts again nor is refused while the store closes, so a call in flight always
finishes.
"""

from __future__ import annotations

import threading
from types import TracebackType

from kredenc.errors import StoreClosed


class CallGate:
    """Use as ``with gate:`` around a call; :meth:`shut` once, to close."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._shut = False
        self._drained = threading.Event()  # set when the calls close() waits for are done
        self._target = 0  # calls left when close() may go on (its own call, if any)
        self._local = threading.local()

    def __enter__(self) -> None:
        local = self._local
        depth: int = getattr(local, "depth", 0)
        if depth == 0:
            with self._lock:
                if self._shut:
                    raise StoreClosed()
                self._active += 1
        local.depth = depth + 1

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        local = self._local
        depth: int = local.depth - 1
        local.depth = depth
        if depth == 0:
            with self._lock:
                self._active -= 1
                if self._shut and self._active <= self._target:
                    self._drained.set()

    @property
    def shut_down(self) -> bool:
        return self._shut

    def shut(self, timeout: float) -> int | None:
        """Refuse new calls and wait up to ``timeout`` seconds for the calls in flight
        (a call of the closing thread itself excepted). Returns how many are still
        running then (0 when all finished), or None if the gate was already shut."""
        own = 1 if getattr(self._local, "depth", 0) else 0
        with self._lock:
            if self._shut:
                return None
            self._shut = True
            self._target = own
            if self._active <= own:
                return 0
        self._drained.wait(timeout)
        with self._lock:
            return self._active - own
