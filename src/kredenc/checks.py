"""Checks on the names and texts callers hand to the store (namespaces, drawers,
sessions, record ids, the user, agent and run ids, a memory's or passage's text): one
line saying what was wrong.
And :func:`data_line`, the one way untrusted text is written into a prompt's data
envelope (the recall block, the judge's contexts)."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from kredenc.errors import InvalidInput

# Runs of characters beyond printable ASCII: kept when printable, else escaped.
_LOOK = re.compile(r"[^\x20-\x7e]+")


def data_line(value: dict[str, Any]) -> str:
    """``value`` as one line of JSON that holds only printable characters and no ``<``
    or ``>`` (escaped as ``\\uXXXX``; it decodes to the same value). Stored text written
    this way cannot start a line of its own nor spell an envelope's tags."""
    # ("<" and ">" occur only inside strings here: JSON's own syntax has neither.)
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e")
    if text.isprintable():
        return text  # (most text: JSON has escaped its newlines and controls)
    return _LOOK.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    run = match.group()
    return run if run.isprintable() else "".join(map(_escape_char, run))


@lru_cache(maxsize=4096)
def _escape_char(ch: str) -> str:
    if ch.isprintable():
        return ch  # a letter beyond ASCII, as it is
    units = ch.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))


def check_name(what: str, value: object) -> str:
    """A namespace, drawer or session name: non-empty, at most 200 characters, UTF-8,
    no control characters."""
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise InvalidInput(f"{what} must be a non-empty name of at most 200 characters")
    check_utf8(what, value)
    if any(ord(c) < 32 for c in value):
        raise InvalidInput(f"{what} must not contain control characters")
    return value


def check_scope_id(what: str, value: object) -> str | None:
    """A ``user_id``, ``agent_id`` or ``run_id`` (``fields.SCOPE_IDS``): None (not set)
    or a name as :func:`check_name` takes it."""
    if value is None:
        return None
    return check_name(what, value)


def check_utf8(what: str, value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid UTF-8", f"pass the {what} as UTF-8") from None


def check_text(text: object, limit: int) -> str:
    """A memory's or passage's text: a non-empty UTF-8 string of at most ``limit``
    characters (the ``max_text_chars`` setting)."""
    if not isinstance(text, str):
        raise InvalidInput("text must be a string")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("text is not valid UTF-8", "pass UTF-8 text") from None
    if not text.strip():
        raise InvalidInput("text is empty", "pass the text to remember")
    if len(text) > limit:
        raise InvalidInput(
            f"text has {len(text):,} characters; the limit for one memory is {limit:,}",
            "split it, or ingest it as a document",
        )
    return text
