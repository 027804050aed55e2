"""Checks on the names and texts callers hand to the store (namespaces, drawers,
sessions, record ids, a memory's or passage's text): one line saying what was wrong."""

from __future__ import annotations

from kredenc.errors import InvalidInput


def check_name(what: str, value: object) -> str:
    """A namespace, drawer or session name: non-empty, at most 200 characters, UTF-8,
    no control characters."""
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise InvalidInput(f"{what} must be a non-empty name of at most 200 characters")
    check_utf8(what, value)
    if any(ord(c) < 32 for c in value):
        raise InvalidInput(f"{what} must not contain control characters")
    return value


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
