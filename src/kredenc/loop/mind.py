"""The mind: one key-value blackboard per ask.

Keys are ``tool.data`` (``retrieve.chunks``, ``grade.verdicts``); a tool writes only
under its own namespace and reads what others wrote. The mind has no field for any
particular tool. One per run, so concurrent asks never see each other's state. The
in-process backend is :class:`LocalMind`; another backend implements :class:`Mind`.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Protocol

from kredenc.errors import InvalidInput

_KEY = re.compile(r"^[a-z][a-z0-9_]*\.[a-z0-9_.]+$")
_MISSING: Any = object()


#: Keys already checked (a pipeline writes the same few on every ask).
_CHECKED: set[str] = set()


def check_key(key: object) -> str:
    if type(key) is str and key in _CHECKED:
        return key  # only str keys are ever added
    if not isinstance(key, str) or not _KEY.match(key):
        raise InvalidInput(
            f"mind key {key!r} is not 'tool.data' (lowercase letters, digits, _ and dots)"
        )
    if len(_CHECKED) < 4096:
        _CHECKED.add(key)
    return key


class Mind(Protocol):
    def write(self, key: str, value: Any) -> None: ...

    def read(self, key: str, default: Any = ...) -> Any: ...

    def list_keys(self, prefix: str = "") -> list[str]: ...


class LocalMind:
    """The in-process blackboard (a dict under a lock)."""

    def __init__(self, initial: dict[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = {}
        self._lock = threading.Lock()
        for key, value in (initial or {}).items():
            self.write(key, value)

    def write(self, key: str, value: Any) -> None:
        check_key(key)
        with self._lock:
            self._data[key] = value

    def read(self, key: str, default: Any = _MISSING) -> Any:
        with self._lock:
            if key in self._data:
                return self._data[key]
        if default is _MISSING:
            raise KeyError(key)
        return default

    def list_keys(self, prefix: str = "") -> list[str]:
        with self._lock:
            return sorted(k for k in self._data if k.startswith(prefix))

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._data)
