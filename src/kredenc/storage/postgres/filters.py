"""The legs' record conditions in PostgreSQL's dialect (``%s`` parameters).

The same conditions as ``storage/index/filters.record_conditions`` (which the SQLite
index binds with ``?``), field for field; ``origin_glob`` keeps SQLite's ``GLOB``
meaning (``*``, ``?``, ``[...]``, case-sensitive) as an anchored POSIX regex.
"""

from __future__ import annotations

import json
from typing import Any

from kredenc.storage.index.filters import Filters

_SPECIAL = set(".^$+(){}|\\")


def glob_regex(glob: str) -> str:
    """SQLite's GLOB pattern as an anchored POSIX regular expression."""
    out = ["^"]
    i = 0
    while i < len(glob):
        ch = glob[i]
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            end = glob.find("]", i + 2 if glob[i + 1 : i + 2] in ("]", "^") else i + 1)
            if end < 0:
                out.append("\\[")
            else:
                body = glob[i + 1 : end]
                if body.startswith("^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif ch in _SPECIAL:
            out.append("\\" + ch)
        else:
            out.append(ch)
        i += 1
    out.append("$")
    return "".join(out)


def record_conditions(filters: Filters, alias: str = "r") -> tuple[str, list[Any]]:
    """The ``AND ...`` tail of a WHERE clause on ``records`` (as ``alias``) for
    ``filters``, and its parameters; deleted records never pass."""
    r = alias
    where = f" AND NOT {r}.deleted"
    args: list[Any] = []
    if filters.drawer is not None:
        where += f" AND {r}.drawer = %s"
        args.append(filters.drawer)
    if filters.types:
        where += f" AND {r}.type = ANY(%s::text[])"
        args.append(list(filters.types))
    if filters.kinds:
        where += f" AND {r}.kind = ANY(%s::text[])"
        args.append(list(filters.kinds))
    if not filters.include_deprecated:
        where += f" AND {r}.status <> 'deprecated'"
    if filters.older_than is not None:
        where += f" AND {r}.created_at < %s"
        args.append(filters.older_than)
    if filters.loaders:
        where += f" AND {r}.loader = ANY(%s::text[])"
        args.append(list(filters.loaders))
    if filters.origin_glob is not None:
        where += f" AND {r}.origin ~ %s"
        args.append(glob_regex(filters.origin_glob))
    if filters.pages is not None:
        where += f" AND {r}.page BETWEEN %s AND %s"
        args.extend(filters.pages)
    if filters.created_after is not None:
        where += f" AND {r}.created_at >= %s"
        args.append(filters.created_after)
    if filters.created_before is not None:
        where += f" AND {r}.created_at < %s"
        args.append(filters.created_before)
    if filters.as_of is not None:
        where += (
            f" AND {r}.created_at <= %s AND ({r}.valid_from IS NULL OR {r}.valid_from <= %s)"
            f" AND ({r}.valid_to IS NULL OR {r}.valid_to > %s)"
        )
        args.extend([filters.as_of] * 3)
    for column in ("user_id", "agent_id", "run_id"):
        value = getattr(filters, column)
        if value is not None:
            where += f" AND {r}.{column} = %s"
            args.append(value)
    for tag in filters.tags:
        where += f" AND {r}.tags @> %s::jsonb"
        args.append(json.dumps([tag], ensure_ascii=False))
    for key, value in filters.where:
        # jsonb equality is SQLite's json_type + json_extract rule: the same JSON type
        # (numbers are one: 1 equals 1.0), and a missing key (SQL NULL) never passes.
        where += f" AND {r}.meta -> %s = %s::jsonb"
        args.extend([key, json.dumps(value, ensure_ascii=False)])
    return where, args
