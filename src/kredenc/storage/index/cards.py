"""What the index sees of a record: its card, context, embedded text and scope tokens."""

from __future__ import annotations

import hashlib
from typing import Any


def scope_token(kind: str, value: str) -> str:
    """An FTS5-safe token naming a namespace or drawer (hex after a letter)."""
    return kind + hashlib.blake2b(value.encode("utf-8"), digest_size=8).hexdigest()


def text_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def card_of(payload: dict[str, Any]) -> str:
    """What full-text search sees of a record itself: title, text and tags."""
    parts = [payload.get("title") or "", payload.get("text") or ""]
    if payload.get("tags"):
        parts.append(" ".join(str(t) for t in payload["tags"]))
    return "\n".join(p for p in parts if p)


def context_of(payload: dict[str, Any]) -> str:
    """The card's context column (heading path, session, speaker, neighbouring
    turns): searched too, but weighted below the record's own words."""
    return str(payload.get("context") or "")


def embed_text_of(payload: dict[str, Any]) -> str:
    """What the embedder sees of a record: title, ``embed_context`` (e.g. a chunk's
    heading path) and text. The card's ``context`` (session, speaker, terms) is for
    words only and stays out of the vector."""
    title = payload.get("title") or ""
    text = payload.get("text") or ""
    if title and title in text[: len(title) + 2]:
        title = ""
    context = str(payload.get("embed_context") or "")
    parts = [p for p in (title, context, text) if p]
    return "\n".join(parts)
