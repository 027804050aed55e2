"""What a memory carries, and the one function that validates it.

``validate_fields`` has two modes. *strict* (the API and CLI): anything out of range
or unknown is rejected with a clear error and nothing is written. *lenient* (records
produced by jobs, importers or models): scores are clamped into [0, 1] and unknown
enum values are coerced to safe defaults, each with a WARNING that says so.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kredenc.errors import InvalidInput
from kredenc.records import MEMORY_KINDS, STATUSES

log = logging.getLogger(__name__)

SCORES = ("importance", "confidence", "stability")
TASK_STATUSES = ("pending", "active", "done", "cancelled")
SOURCES = ("user", "agent", "ingest", "reflection")

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
        return float(value)
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=UTC)
        return dt.timestamp()
    if isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(
                f"{what} {value!r} is not a time", "use ISO 8601, e.g. 2026-11-30T14:00:00Z"
            ) from None
        return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()
    raise InvalidInput(f"{what} must be a time, not {type(value).__name__}")


def _score(name: str, value: object, strict: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        try:
            value = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            if strict:
                raise InvalidInput(f"{name} must be a number in [0, 1], not {value!r}") from None
            log.warning("memory field %s=%r is not a number; using %s", name, value, 0.5)
            return 0.5
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
        raise InvalidInput(f"unknown {name} {value!r}", f"use one of {', '.join(allowed)}")
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
        seen.setdefault(tag.strip(), None)
    return list(seen)
