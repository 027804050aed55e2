"""Conditions on records that every leg applies inside SQL.

The scope ids (``user_id``, ``agent_id``, ``run_id``) narrow what a namespace holds;
they never replace the namespace, which every query binds on its own. A record passes
a scope id only when it was filed with that very id (a record without one does not
pass). ``tags`` requires every tag given; ``where`` matches top-level ``meta`` values
exactly and by JSON type (see :func:`kredenc.fields.validate_where`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kredenc.checks import check_scope_id
from kredenc.fields import WhereValue, validate_tag_filter, validate_where


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
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    tags: tuple[str, ...] = ()
    where: tuple[tuple[str, WhereValue], ...] = ()


def scope_filters(
    *,
    user_id: object = None,
    agent_id: object = None,
    run_id: object = None,
    tags: Sequence[str] | None = (),
    where: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The scope, tag and meta fields of :class:`Filters` from a caller's options,
    checked (one line per bad value): ``Filters(**scope_filters(...), ...)``."""
    return {
        "user_id": check_scope_id("user_id", user_id),
        "agent_id": check_scope_id("agent_id", agent_id),
        "run_id": check_scope_id("run_id", run_id),
        "tags": validate_tag_filter(tags or ()),
        "where": validate_where(where),
    }


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
    for column in ("user_id", "agent_id", "run_id"):
        value = getattr(filters, column)
        if value is not None:
            where += f" AND r.{column} = ?"
            args.append(value)
    for tag in filters.tags:
        # instr() on the JSON text first (cheap; most records fail it), json_each to be
        # exact (the projector writes tags as json.dumps(..., ensure_ascii=False)).
        where += (
            " AND instr(r.tags, ?) > 0"
            " AND EXISTS (SELECT 1 FROM json_each(r.tags) WHERE json_each.value = ?)"
        )
        args.extend([json.dumps(tag, ensure_ascii=False), tag])
    for key, value in filters.where:
        sql, more = _meta_equals(key, value)
        where += sql
        args.extend(more)
    return where, args


def _meta_equals(key: str, value: WhereValue) -> tuple[str, list[Any]]:
    """``meta.key`` equals ``value`` with the same JSON type (``"1"`` is not ``1``,
    ``true`` is not ``1``, ``1`` is ``1.0``); a record without meta or the key fails."""
    path = f'$."{key}"'  # (keys hold no '"': fields.validate_where)
    if value is None:
        return " AND json_type(r.meta, ?) = 'null'", [path]
    if isinstance(value, bool):
        return " AND json_type(r.meta, ?) = ?", [path, "true" if value else "false"]
    # The value first (one parse; most records fail it), then its JSON type: an object
    # reads back as its JSON text, and true as 1. A string is looked for in the JSON
    # text first (instr: about half the time of a parse at 100,000 records), as the
    # projector wrote it (json.dumps(..., ensure_ascii=False) encodes it the same).
    if isinstance(value, str):
        return (
            " AND instr(r.meta, ?) > 0 AND json_extract(r.meta, ?) = ?"
            " AND json_type(r.meta, ?) = 'text'",
            [json.dumps(value, ensure_ascii=False), path, value, path],
        )
    return (
        " AND json_extract(r.meta, ?) = ? AND json_type(r.meta, ?) IN ('integer', 'real')",
        [path, value, path],
    )


def _in(column: str, values: tuple[object, ...]) -> str:
    return f" AND {column} IN ({','.join('?' * len(values))})"
