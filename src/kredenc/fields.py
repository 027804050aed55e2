"""What a memory carries, and the one function that validates it.

``validate_fields`` has two modes. *strict* (the API and CLI): anything out of range
or unknown is rejected with a clear error and nothing is written; a score is a number
(``int`` or ``float``, never ``bool`` or a string: the CLI parses its own flags).
*lenient* (records produced by jobs, importers or models): scores are clamped into
[0, 1], numeric strings read as numbers and unknown enum values are coerced to safe
defaults, each with a WARNING that says so.

``validate_meta`` checks a record's free-form ``meta``: a JSON object with string keys
and JSON values only (no NaN or infinity, which would reach the log as bare ``NaN``,
not JSON), at most :data:`MAX_META_DEPTH` deep and :data:`MAX_META_BYTES` as JSON.
Times are bounded to the calendar years 1 to 9999 (:data:`MIN_TIME`, :data:`MAX_TIME`);
tags hold no control characters.

``user_id``, ``agent_id`` and ``run_id`` (:data:`SCOPE_IDS`) say whose memory it is,
which agent filed it and in which run, inside the namespace (never instead of it: the
namespace is the tenant). They are names (:func:`~kredenc.checks.check_scope_id`), set
once when a record is filed. :func:`validate_where` checks a search's ``where`` on ``meta``
and :func:`validate_tag_filter` its ``tags``: both bounded, as each becomes a condition
in SQL.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kredenc.errors import InvalidInput, shown
from kredenc.records import MEMORY_KINDS, STATUSES

log = logging.getLogger(__name__)

SCORES = ("importance", "confidence", "stability")
TASK_STATUSES = ("pending", "active", "done", "cancelled")
SOURCES = ("user", "agent", "ingest", "reflection")
#: Who a record belongs to inside its namespace: filed with it, filterable everywhere.
SCOPE_IDS = ("user_id", "agent_id", "run_id")

DEFAULTS: dict[str, Any] = {
    "kind": "note",
    "importance": 0.5,
    "confidence": 0.5,
    "stability": 0.5,
    "status": "unvalidated",
    "source": "user",
    "read_only": False,
    "episode_id": None,
    "task_status": None,
    "valid_from": None,
    "valid_to": None,
}

#: The first and last second a time may name: 0001-01-01 and 9999-12-31T23:59:59, UTC.
MIN_TIME = datetime(1, 1, 1, tzinfo=UTC).timestamp()
MAX_TIME = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
#: How deep ``meta`` may nest, and how large it may be as JSON (UTF-8 bytes).
#: The highest page number a page filter takes: more than any document has, and far
#: inside SQL's integers (a larger one crashed the search with OverflowError).
MAX_PAGE = 1_000_000_000

MAX_META_DEPTH = 32
MAX_META_BYTES = 256 * 1024
#: How many ``meta`` keys a ``where`` filter may name, and how many tags a tag filter
#: may require (each is one condition in SQL), and how long a ``where`` key may be.
MAX_WHERE_KEYS = 16
MAX_TAG_FILTERS = 16
MAX_WHERE_KEY_CHARS = 200

_ENUMS: dict[str, tuple[str, ...]] = {
    "kind": MEMORY_KINDS,
    "status": STATUSES,
    "source": SOURCES,
    "task_status": TASK_STATUSES,
}


def parse_time(value: object, what: str) -> float | None:
    """A time as Unix seconds, from a number or an ISO-8601 string; None stays None."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise InvalidInput(f"{what} must be a time, not {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise InvalidInput(f"{what} must be a finite time")
        if not MIN_TIME <= value <= MAX_TIME:
            raise InvalidInput(
                f"{what} must be between year 1 and year 9999, not {value:g} seconds",
                "give Unix seconds or an ISO 8601 time, e.g. 2026-11-30T14:00:00Z",
            )
        return float(value)
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=UTC)
        return dt.timestamp()
    if isinstance(value, str):
        try:  # Unix seconds sent as text (a query string, a JSON string)
            return parse_time(float(value), what)
        except ValueError:
            pass
        try:
            dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(
                f"{what} {shown(value)} is not a time", "use ISO 8601, e.g. 2026-11-30T14:00:00Z"
            ) from None
        return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()
    raise InvalidInput(f"{what} must be a time, not {type(value).__name__}")


def parse_pages(value: object, what: str = "pages") -> tuple[int, int] | None:
    """A page range: ``"7"`` → (7, 7), ``"3-9"`` → (3, 9), a (first, last) pair as it
    is; None or blank → None. ``what`` names it in the error (``--pages``, ``pages``)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    bounds: tuple[object, ...] = ()
    if isinstance(value, str):
        first, dash, last = value.strip().partition("-")
        with contextlib.suppress(ValueError):
            bounds = (int(first), int(last if dash else first))
    elif isinstance(value, tuple | list):
        bounds = tuple(value)
    if not (
        len(bounds) == 2
        and all(type(b) is int for b in bounds)
        and 1 <= bounds[0] <= bounds[1] <= MAX_PAGE  # type: ignore[operator]
    ):
        raise InvalidInput(
            f"{what} {shown(value)} is not a page range",
            f"use N or N-M with 1 <= N <= M <= {MAX_PAGE:,}, e.g. 3-9",
        )
    return bounds  # type: ignore[return-value]


def _score(name: str, value: object, strict: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        if strict:
            raise InvalidInput(f"{name} must be a number in [0, 1], not {shown(value)}")
        read = None if isinstance(value, bool) else _number(value)
        if read is None:
            log.warning("memory field %s=%r is not a number; using %s", name, value, 0.5)
            return 0.5
        log.warning("memory field %s=%r is not a number; read as %s", name, value, read)
        value = read
    number = float(value)
    if math.isnan(number):
        if strict:
            raise InvalidInput(f"{name} must be a number in [0, 1], not NaN")
        log.warning("memory field %s is NaN; using 0.5", name)
        return 0.5
    if not 0.0 <= number <= 1.0:
        if strict:
            raise InvalidInput(f"{name} must be between 0 and 1, not {number}")
        clamped = min(1.0, max(0.0, number))
        log.warning("memory field %s=%s out of [0, 1]; clamped to %s", name, number, clamped)
        return clamped
    return number


def _enum(name: str, value: object, strict: bool) -> str | None:
    allowed = _ENUMS[name]
    if value is None and name == "task_status":
        return None
    if isinstance(value, str) and value.strip().lower() in allowed:
        return value.strip().lower()
    if strict:
        raise InvalidInput(f"unknown {name} {shown(value)}", f"use one of {', '.join(allowed)}")
    fallback = DEFAULTS[name] if name != "task_status" else "pending"
    log.warning("memory field %s=%r is unknown; using %r", name, value, fallback)
    return str(fallback)


def validate_fields(
    fields: Mapping[str, Any], *, strict: bool, partial: bool = False
) -> dict[str, Any]:
    """Check memory fields; return them normalised.

    ``partial`` validates only the keys given (a ``score`` change); otherwise the
    missing keys get their defaults.
    """
    unknown = set(fields) - set(DEFAULTS) - {"tags"}
    if unknown:
        raise InvalidInput(f"unknown memory field(s): {', '.join(sorted(unknown))}")
    out: dict[str, Any] = {} if partial else dict(DEFAULTS)
    for key, value in fields.items():
        if key in SCORES:
            out[key] = _score(key, value, strict)
        elif key in _ENUMS:
            out[key] = _enum(key, value, strict)
        elif key in ("valid_from", "valid_to"):
            out[key] = parse_time(value, key)
        elif key == "read_only":
            if not isinstance(value, bool) and strict:
                raise InvalidInput(f"read_only must be true or false, not {value!r}")
            out[key] = bool(value)
        elif key == "episode_id":
            out[key] = None if value is None else str(value)
        elif key == "tags":
            out[key] = validate_tags(value)
    kind = out.get("kind")
    if out.get("task_status") is not None and kind not in (None, "task") and not partial:
        if strict:
            raise InvalidInput("task_status is only for memories of kind 'task'")
        log.warning("task_status given for a %s memory; dropped", kind)
        out["task_status"] = None
    if not partial and kind == "task" and out.get("task_status") is None:
        out["task_status"] = "pending"
    vf, vt = out.get("valid_from"), out.get("valid_to")
    if vf is not None and vt is not None and vt < vf:
        raise InvalidInput("valid_to is before valid_from")
    return out


def validate_tags(tags: object) -> list[str]:
    if tags is None:
        return []
    if isinstance(tags, str) or not all(isinstance(t, str) and t.strip() for t in tags):  # type: ignore[attr-defined]
        raise InvalidInput("tags must be a list of non-empty strings")
    seen: dict[str, None] = {}
    for tag in tags:  # type: ignore[attr-defined]
        try:
            tag.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput("tags must be valid UTF-8") from None
        if any(unicodedata.category(c) == "Cc" for c in tag):
            raise InvalidInput(
                f"tags must not hold control characters, not {shown(tag)}",
                "use printable words, e.g. --tags birds,city",
            )
        seen.setdefault(tag.strip(), None)
    return list(seen)


def validate_tag_filter(tags: object) -> tuple[str, ...]:
    """The tags a search requires (every one on the record): checked as tags are, at
    most :data:`MAX_TAG_FILTERS`."""
    wanted = tuple(validate_tags(tags))
    if len(wanted) > MAX_TAG_FILTERS:
        raise InvalidInput(
            f"a search may require at most {MAX_TAG_FILTERS} tags, not {len(wanted)}",
            "require fewer tags",
        )
    return wanted


#: What a ``where`` value may be: one JSON scalar, matched exactly and by JSON type.
WhereValue = str | int | float | bool | None


def validate_where(where: object) -> tuple[tuple[str, WhereValue], ...]:
    """A ``where`` filter on ``meta`` as (key, value) pairs, sorted by key.

    Each key is a top-level ``meta`` key (a name without ``"``: it is spelled inside a
    JSON path); each value a JSON scalar (string, number, true/false, null) that the
    record's value must equal with the same JSON type (``"1"`` is not ``1``, ``true``
    is not ``1``). At most :data:`MAX_WHERE_KEYS` keys."""
    if where is None:
        return ()
    if not isinstance(where, Mapping):
        raise InvalidInput(
            f"where must map meta keys to values, not {type(where).__name__}",
            'e.g. where={"project": "apollo"}',
        )
    if len(where) > MAX_WHERE_KEYS:
        raise InvalidInput(
            f"where may name at most {MAX_WHERE_KEYS} meta keys, not {len(where)}",
            "filter on fewer keys",
        )
    out: list[tuple[str, WhereValue]] = []
    for key, value in where.items():
        if not isinstance(key, str) or not key.strip() or len(key) > MAX_WHERE_KEY_CHARS:
            raise InvalidInput(
                f"where keys must be non-empty names of at most {MAX_WHERE_KEY_CHARS}"
                f" characters, not {shown(key)}"
            )
        _check_utf8("where key", key)
        if '"' in key or any(unicodedata.category(c) == "Cc" for c in key):
            raise InvalidInput(
                f"where key {shown(key)} holds a quote or a control character",
                "name a top-level meta key in printable characters",
            )
        if type(value) is int and not -(2**63) <= value < 2**63:
            raise InvalidInput(f"where value of {key!r} is out of range (64-bit integers)")
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidInput(f"where value of {key!r} must be a finite number, not {value}")
        if not (value is None or isinstance(value, str | int | float | bool)):
            raise InvalidInput(
                f"where value of {key!r} must be a string, number, true/false or null,"
                f" not {type(value).__name__}",
                "match one scalar meta value per key",
            )
        if isinstance(value, str):
            _check_utf8(f"where value of {key!r}", value)
        out.append((key, value))
    return tuple(sorted(out, key=lambda kv: kv[0]))


def _check_utf8(what: str, value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid UTF-8") from None


def validate_meta(meta: object) -> dict[str, Any]:
    """``meta`` as a new dict, once it is known to be a JSON object the log can hold.

    None is an empty object. Refused (:class:`InvalidInput`): anything but a mapping,
    keys that are not strings, values that are not JSON (objects, NaN, infinity),
    nesting deeper than :data:`MAX_META_DEPTH`, more than :data:`MAX_META_BYTES` as JSON.
    """
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        raise InvalidInput(f"meta must be a JSON object, not {type(meta).__name__}")
    _check_json(meta, 1)
    size = len(json.dumps(meta, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    if size > MAX_META_BYTES:
        raise InvalidInput(
            f"meta is larger than {MAX_META_BYTES} bytes as JSON ({size})",
            "keep large content in the text, or in a document",
        )
    return dict(meta)


def _check_json(value: object, depth: int) -> None:
    if depth > MAX_META_DEPTH:
        raise InvalidInput(
            f"meta is nested deeper than {MAX_META_DEPTH} levels",
            "flatten it: keep meta to a few levels of keys and values",
        )
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"meta keys must be strings, not {type(key).__name__}")
            _check_json(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_json(item, depth + 1)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(
                f"meta must hold only JSON values, not {value!r}", "use null or a finite number"
            )
    elif not (value is None or isinstance(value, str | int | bool)):
        raise InvalidInput(
            f"meta must hold only JSON values, not {type(value).__name__}",
            "use strings, numbers, true/false, null, lists and objects",
        )


def _number(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def where_pairs(pairs: Sequence[str], option: str = "--where") -> dict[str, Any]:
    """``key=value`` pairs (the CLI's repeatable ``--where``, the server's ``where=``)
    as a mapping: the value read as one JSON scalar when it is one (``1``, ``2.5``,
    ``true``, ``null``, ``"1"``), else as text. ``option`` names them in errors."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, eq, raw = pair.partition("=")
        key = key.strip()
        if not eq or not key:
            raise InvalidInput(
                f"{option} {pair!r} is not key=value", f"e.g. {option} project=apollo"
            )
        if key in out:
            raise InvalidInput(f"{option} names {key!r} twice", "give each key once")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        if isinstance(value, list | dict):
            raise InvalidInput(
                f"{option} {key}={raw} must be one value, not a JSON list or object",
                f"match one scalar meta value, e.g. {option} priority=1",
            )
        out[key] = value
    return out
