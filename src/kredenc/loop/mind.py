"""The mind: one key-value blackboard per ask.

Keys are ``tool.data`` (``retrieve.chunks``, ``grade.verdicts``); a tool writes only
under its own namespace and reads what others wrote. The mind has no field for any
particular tool. One per run, so concurrent asks never see each other's state.

Two backends behind the one protocol, chosen by ``mind_backend``
(:func:`open_mind`): :class:`LocalMind` (a dict in the process, the default) and
:class:`RedisMind` (a Redis hash per run, ``storage/redis_board.py``: values JSON by
``mind_json``, a TTL so abandoned runs vanish, deleted when the run ends), so a run's
state can be read from outside the process that runs it. Both pass
:class:`kredenc.testing.conformance.MindConformance`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from kredenc.errors import InvalidInput, StoreError
from kredenc.loop import mind_json
from kredenc.storage.redis_board import RedisBoard

if TYPE_CHECKING:
    from kredenc.config import Settings

log = logging.getLogger(__name__)

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
    """The in-process blackboard: a dict. Safe to read from another thread while a run
    writes (a live view): each read, write and copy is one dict operation on string
    keys, which the interpreter does whole (an ask's tools read it ~60 times, so no
    lock around each)."""

    def __init__(self, initial: dict[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = {}
        for key, value in (initial or {}).items():
            self.write(key, value)

    def write(self, key: str, value: Any) -> None:
        self._data[check_key(key)] = value

    def read(self, key: str, default: Any = _MISSING) -> Any:
        value = self._data.get(key, _MISSING)
        if value is _MISSING:
            if default is _MISSING:
                raise KeyError(key)
            return default
        return value

    def list_keys(self, prefix: str = "") -> list[str]:
        if not prefix:
            return sorted(self._data)
        return sorted(k for k in list(self._data) if k.startswith(prefix))

    def snapshot(self) -> dict[str, Any]:
        return self._data.copy()

    def close(self) -> None:
        """Nothing to let go of (the dict goes with the object)."""


class RedisMind:
    """The blackboard as one Redis hash per run (:class:`RedisBoard`): every write is
    one round trip (and renews the run's TTL), every read one; values are JSON
    (:mod:`kredenc.loop.mind_json`), so a read hands back a fresh copy of what was
    written, of the same types. A value that is not JSON is refused at the write;
    a Redis that does not answer raises :class:`~kredenc.errors.StoreError`."""

    def __init__(self, board: RedisBoard, initial: dict[str, Any] | None = None) -> None:
        self.board = board
        for key, value in (initial or {}).items():
            self.write(key, value)

    @property
    def run_id(self) -> str:
        return self.board.run_id

    def write(self, key: str, value: Any) -> None:
        check_key(key)
        self.board.put(key, mind_json.dumps(value, where=key))

    def read(self, key: str, default: Any = _MISSING) -> Any:
        text = self.board.get(key)
        if text is not None:
            return mind_json.loads(text)
        if default is _MISSING:
            raise KeyError(key)
        return default

    def list_keys(self, prefix: str = "") -> list[str]:
        return sorted(k for k in self.board.fields() if k.startswith(prefix))

    def close(self) -> None:
        """The run is over: its hash goes (if Redis does not answer, its TTL removes it;
        a WARNING says so, and the run's result stands)."""
        try:
            self.board.drop()
        except StoreError as exc:
            log.warning("%s; the run's blackboard expires by itself", exc.message)


def new_mind(settings: Settings) -> LocalMind | RedisMind:
    """An empty mind of the configured backend (``mind_backend``; a tool's test may
    hand in settings without one: in-process)."""
    if getattr(settings, "mind_backend", "local") == "redis":
        board = RedisBoard(
            settings.redis_url.get_secret_value(),
            prefix=settings.redis_prefix,
            ttl_s=settings.mind_ttl_s,
        )
        return RedisMind(board)
    return LocalMind()


@contextmanager
def open_mind(settings: Settings) -> Iterator[Mind]:
    """A fresh mind for one run, of the configured backend; a Redis one is deleted when
    the block ends (its TTL removes it if the process dies first)."""
    mind = new_mind(settings)
    try:
        yield mind
    finally:
        mind.close()
