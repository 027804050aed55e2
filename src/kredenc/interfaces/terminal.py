"""What the CLI prints: control characters made visible, JSON kept JSON.

Text from the store, from documents and from arguments may hold control characters:
a BEL rings the terminal, ``ESC [2J`` clears it, a C1 ``CSI`` or a right-to-left
override rewrites what the user sees. Every human-readable line the CLI prints goes
through :func:`escape` (``\\x07``, ``\\x1b``, ``\\u202e``); newlines and tabs stay.
A name printed inside a line (a file's path) goes through :func:`one_line`, which
escapes newlines and tabs too, so a file named ``new\\nline.md`` stays one line.
JSON output goes through :func:`json_text`: ``json.dumps`` already escapes C0
characters, and the rest (DEL, C1, bidirectional controls) become ``\\uXXXX``
escapes, so the output is still valid JSON and decodes to the same text.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO, cast

# Bidirectional formatting characters: they reorder what a terminal shows.
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROLS = (*(c for c in range(0x20) if c not in (0x09, 0x0A)), *range(0x7F, 0xA0), *_BIDI)

_HUMAN = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _CONTROLS}
_ONE_LINE = {**_HUMAN, 0x09: "\\t", 0x0A: "\\n"}
# In JSON, C0 is escaped by json.dumps; DEL, C1 and bidi controls are left raw.
_JSON = {c: f"\\u{c:04x}" for c in _CONTROLS if c >= 0x7F}


def escape(text: str) -> str:
    """``text`` with every control character but newline and tab as a visible escape."""
    return text.translate(_HUMAN)


def one_line(text: str) -> str:
    """``text`` as :func:`escape` makes it, with newlines and tabs escaped too."""
    return text.translate(_ONE_LINE)


def json_text(data: Any) -> str:
    """``data`` as one line of JSON with no raw control character in it."""
    return json.dumps(data, ensure_ascii=False, default=str).translate(_JSON)


class _Escaping:
    """A text stream that escapes what is written before passing it on."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner
        # click takes a stream with a usable encoding and errors as it is.
        self.encoding = getattr(inner, "encoding", None) or "utf-8"
        self.errors = getattr(inner, "errors", None) or "strict"

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # click probes for a binary stream with b""
            raise TypeError("text only")
        self._inner.write(escape(text))
        return len(text)

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        self._inner.flush()

    def isatty(self) -> bool:
        return self._inner.isatty()


@contextmanager
def escaped_output() -> Iterator[None]:
    """Escape everything written to standard output and error inside the block."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = cast(TextIO, _Escaping(out)), cast(TextIO, _Escaping(err))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


class EscapingFormatter(logging.Formatter):
    """A log formatter whose lines have their control characters escaped."""

    def format(self, record: logging.LogRecord) -> str:
        return escape(super().format(record))


__all__ = ["EscapingFormatter", "escape", "escaped_output", "json_text", "one_line"]
