"""The wire form of what the facade hands back: one JSON shape for REST, MCP and the client.

Every result type is a dataclass (:class:`~kredenc.records.Memory`, ``Hit``,
``ContextGraph``, the answer loop's ``Answer``, ``RecallResult``, ``IngestReport``, the
listing entries). :func:`to_wire` turns one (or a list of them) into plain JSON values:
fields by name, tuples as lists, non-finite floats as ``null``, anything else a JSON
encoder cannot take as its ``str``. :func:`from_wire` is the inverse for a known class:
it rebuilds nested dataclasses from the field types, so ``kredenc.Client`` returns the
same objects as ``Kredenc``. Unknown keys are ignored (a newer server may send more) and
missing ones take the field's default.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")


def to_wire(value: Any) -> Any:
    """``value`` as JSON-ready Python: dicts, lists, str, int, float, bool, None."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_wire(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_wire(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_wire(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, str | int | bool):
        return value
    return str(value)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_wire(cls: type[T], data: Any) -> T:
    """An instance of the dataclass ``cls`` from its wire form (see :func:`to_wire`)."""
    return typing.cast(T, _decode(cls, data))


def _decode(tp: Any, data: Any) -> Any:
    if data is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        return _decode(options[0], data) if len(options) == 1 else data
    if origin is typing.Literal:
        return data
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(data, Mapping):
            raise ValueError(f"expected an object for {tp.__name__}, got {type(data).__name__}")
        hints = _hints(tp)
        known = {f.name for f in dataclasses.fields(tp) if f.init}
        return tp(**{k: _decode(hints[k], v) for k, v in data.items() if k in known})
    if origin in (tuple, Sequence) or tp is tuple:
        args = typing.get_args(tp)
        item = args[0] if args else Any
        return tuple(_decode(item, v) for v in data)
    if origin is list:
        (item,) = typing.get_args(tp) or (Any,)
        return [_decode(item, v) for v in data]
    if origin in (dict, Mapping):
        args = typing.get_args(tp)
        value_type = args[1] if len(args) == 2 else Any
        return {k: _decode(value_type, v) for k, v in data.items()}
    if tp is float and isinstance(data, int):
        return float(data)
    return data
