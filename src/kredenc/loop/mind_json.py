"""The mind's values as JSON and back, for a mind that keeps them outside the process.

Tools write plain values (strings, numbers, booleans, None, lists, dicts with string
keys) and kredenc's own result types (hits, verdicts, citations, evaluations) on the
mind; :func:`dumps` writes them as JSON that :func:`loads` turns into equal values of
the same types again: tuples stay tuples, a :class:`~kredenc.records.Hit` comes back
a ``Hit``. A dataclass is ``{"$t": name, "v": {field: value}}``, a tuple
``{"$tuple": [...]}``, a dict whose keys would be mistaken for those
``{"$dict": [[key, value], ...]}``.

Only the types named in :data:`TYPES` (and those a plugin adds with :func:`register`)
are made from JSON: a name read back is looked up there, never imported, so what a
blackboard holds is data and never code. A value of any other type is
:class:`~kredenc.errors.InvalidInput` at write time, naming the key's type.
"""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass
from typing import Any

from kredenc.errors import InvalidInput
from kredenc.grounding.base import Evaluation, SentenceSupport
from kredenc.loop.answer import ChunkVerdict, Citation
from kredenc.records import Hit, LegScore

#: The dataclasses a mind's JSON may name, by name.
TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (Hit, LegScore, ChunkVerdict, Citation, Evaluation, SentenceSupport)
}

__all__ = ["TYPES", "dumps", "loads", "register"]


def register(cls: type) -> type:
    """Let a mind keep values of the dataclass ``cls`` (a plugin tool's own result type;
    usable as a class decorator). Names are unique: another class of a taken name is
    refused."""
    if not (is_dataclass(cls) and isinstance(cls, type)):
        raise InvalidInput(f"{cls!r} is not a dataclass", "register dataclasses only")
    taken = TYPES.get(cls.__name__)
    if taken is not None and taken is not cls:
        raise InvalidInput(
            f"a mind type named {cls.__name__!r} is registered already ({taken.__module__})",
            "give the class another name",
        )
    TYPES[cls.__name__] = cls
    return cls


def _plain(value: Any, where: str) -> Any:
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list):
        return [_plain(v, where) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [_plain(v, where) for v in value]}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: _plain(v, where) for k, v in value.items()}
        if not all(isinstance(k, str) for k in value):
            raise InvalidInput(
                f"mind value {where} has a dict with keys that are not text",
                "a mind that is not in-process keeps JSON: use text keys",
            )
        return {"$dict": [[k, _plain(v, where)] for k, v in value.items()]}
    cls = type(value)
    if is_dataclass(value) and TYPES.get(cls.__name__) is cls:
        return {
            "$t": cls.__name__,
            "v": {f.name: _plain(getattr(value, f.name), where) for f in fields(value)},
        }
    raise InvalidInput(
        f"mind value {where} holds a {cls.__name__}, which is not JSON",
        "write plain values or kredenc's result types (or register the dataclass with "
        "kredenc.loop.mind_json.register); or set mind_backend = 'local'",
    )


def dumps(value: Any, *, where: str = "") -> str:
    """``value`` as JSON text (``where`` names the key in an error)."""
    return json.dumps(_plain(value, where or "?"), ensure_ascii=False, separators=(",", ":"))


def _typed(raw: Any) -> Any:
    if isinstance(raw, list):
        return [_typed(v) for v in raw]
    if not isinstance(raw, dict):
        return raw
    if len(raw) == 1 and "$tuple" in raw:
        return tuple(_typed(v) for v in raw["$tuple"])
    if len(raw) == 1 and "$dict" in raw:
        return {str(k): _typed(v) for k, v in raw["$dict"]}
    if len(raw) == 2 and "$t" in raw and "v" in raw:
        cls = TYPES.get(str(raw["$t"]))
        if cls is None:
            raise InvalidInput(f"a mind value names the unknown type {raw['$t']!r}")
        return cls(**{str(k): _typed(v) for k, v in dict(raw["v"]).items()})
    return {k: _typed(v) for k, v in raw.items()}


def loads(text: str) -> Any:
    """The value :func:`dumps` wrote."""
    return _typed(json.loads(text))
