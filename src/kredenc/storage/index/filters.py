"""Conditions on records that every leg applies inside SQL."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Filters:
    """Conditions applied inside SQL (or on the shard key) for every leg."""

    drawer: str | None = None
    types: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    include_deprecated: bool = False
    older_than: float | None = None
    as_of: float | None = None
    loaders: tuple[str, ...] = ()
    origin_glob: str | None = None
    pages: tuple[int, int] | None = None
    created_after: float | None = None
    created_before: float | None = None


def record_conditions(filters: Filters) -> tuple[str, list[Any]]:
    """The ``AND ...`` tail of a WHERE clause on ``records r`` for ``filters``, and its
    arguments (deleted records never pass)."""
    where = " AND r.deleted = 0"
    args: list[Any] = []
    if filters.drawer is not None:
        where += " AND r.drawer = ?"
        args.append(filters.drawer)
    if filters.types:
        where += _in("r.type", filters.types)
        args.extend(filters.types)
    if filters.kinds:
        where += _in("r.kind", filters.kinds)
        args.extend(filters.kinds)
    if not filters.include_deprecated:
        where += " AND r.status != 'deprecated'"
    if filters.older_than is not None:
        where += " AND r.created_at < ?"
        args.append(filters.older_than)
    if filters.loaders:
        where += _in("r.loader", filters.loaders)
        args.extend(filters.loaders)
    if filters.origin_glob is not None:
        where += " AND r.origin GLOB ?"
        args.append(filters.origin_glob)
    if filters.pages is not None:
        where += " AND r.page BETWEEN ? AND ?"
        args.extend(filters.pages)
    if filters.created_after is not None:
        where += " AND r.created_at >= ?"
        args.append(filters.created_after)
    if filters.created_before is not None:
        where += " AND r.created_at < ?"
        args.append(filters.created_before)
    if filters.as_of is not None:
        where += (
            " AND r.created_at <= ? AND (r.valid_from IS NULL OR r.valid_from <= ?)"
            " AND (r.valid_to IS NULL OR r.valid_to > ?)"
        )
        args.extend([filters.as_of] * 3)
    return where, args


def _in(column: str, values: tuple[object, ...]) -> str:
    return f" AND {column} IN ({','.join('?' * len(values))})"
