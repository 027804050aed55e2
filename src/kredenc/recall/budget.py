"""How much the recall reflex may inject: items, and characters or tokens.

A :class:`Budget` bounds the injected message as a whole: at most ``items``
memories; each memory's line (its fields, relations and text, as rendered) within the
per-item limit; the whole message (the envelope's preamble and closing line included)
within the total limit.
Limits are in characters, in tokens, or both (each limit that is set applies). Text
that does not fit is cut on a word boundary and ends with a marker (``" …"``).

Tokens are counted by ``count_tokens``; the default, :func:`estimate_tokens`, is the
usual four-characters-per-token estimate for English. Pass a real tokenizer's length
function (e.g. ``lambda s: len(enc.encode(s))`` with tiktoken) for exact counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kredenc.config import Settings
from kredenc.errors import InvalidInput
from kredenc.records import _cut_words

MARKER = " …"
# An item is left out rather than cut below this many characters of its text.
MIN_TEXT_CHARS = 40
# The first prefix of a long text tried when only tokens limit it (doubled until too long).
_WINDOW = 512

TokenCounter = Callable[[str], int]
# An item's line around its (possibly cut) text.
Line = Callable[[str], str]


def estimate_tokens(text: str) -> int:
    """About four characters per token (OpenAI's rule of thumb for English text)."""
    return math.ceil(len(text) / 4)


@dataclass(frozen=True)
class Budget:
    """Limits on what one recall injects. ``None`` means no limit in that unit."""

    # 8 items within 1,800 characters (docs/benchmarks.md, "Where the evidence is lost":
    # chosen on LoCoMo and LongMemEval across sets; it was 3).
    items: int = 8
    item_chars: int | None = 600
    total_chars: int | None = 1800
    item_tokens: int | None = None
    total_tokens: int | None = None
    count_tokens: TokenCounter | None = None
    marker: str = MARKER
    #: A text longer than this is shown as the window of its sentences around the one
    #: that matches the message best (:func:`kredenc.recall.snippet.snippet`), so the
    #: same characters hold more records; ``None``: whole texts, cut at their head.
    snippet_chars: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.items, bool) or not isinstance(self.items, int) or self.items < 0:
            raise InvalidInput(f"budget items must be a whole number >= 0, not {self.items!r}")
        for name in ("item_chars", "total_chars", "item_tokens", "total_tokens", "snippet_chars"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise InvalidInput(f"budget {name} must be a whole number or None")
            if value is not None and value < 1:
                raise InvalidInput(f"budget {name} must be at least 1, not {value}")

    @classmethod
    def in_tokens(
        cls,
        items: int = 3,
        item_tokens: int = 150,
        total_tokens: int = 450,
        *,
        count_tokens: TokenCounter | None = None,
    ) -> Budget:
        """A budget in tokens only (no character limits)."""
        return cls(
            items=items,
            item_chars=None,
            total_chars=None,
            item_tokens=item_tokens,
            total_tokens=total_tokens,
            count_tokens=count_tokens,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> Budget:
        """The budget the settings ask for (``recall_items``, ``recall_item_chars``, …;
        a limit of 0 is no limit)."""

        def limit(value: int) -> int | None:
            return value if value > 0 else None

        return cls(
            items=settings.recall_items,
            item_chars=limit(settings.recall_item_chars),
            total_chars=limit(settings.recall_total_chars),
            item_tokens=limit(settings.recall_item_tokens),
            total_tokens=limit(settings.recall_total_tokens),
            snippet_chars=limit(settings.recall_snippet_chars),
        )

    def describe(self) -> str:
        """``8 items × 600/1800 chars`` (as the startup line shows it)."""
        parts = [f"{self.items} items"]
        if self.item_chars is not None or self.total_chars is not None:
            parts.append(f"{_n(self.item_chars)}/{_n(self.total_chars)} chars")
        if self.item_tokens is not None or self.total_tokens is not None:
            parts.append(f"{_n(self.item_tokens)}/{_n(self.total_tokens)} tokens")
        return " × ".join(parts[:2]) + (", " + parts[2] if len(parts) > 2 else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "item_chars": self.item_chars,
            "total_chars": self.total_chars,
            "item_tokens": self.item_tokens,
            "total_tokens": self.total_tokens,
            "snippet_chars": self.snippet_chars,
        }

    # -- measuring and cutting -------------------------------------------------
    def tokens(self, text: str) -> int:
        return (self.count_tokens or estimate_tokens)(text)

    def _fits(self, text: str, chars: int | None, tokens: int | None) -> bool:
        if chars is not None and len(text) > chars:
            return False
        return tokens is None or self.tokens(text) <= tokens

    def cut(self, text: str, chars: int | None, tokens: int | None) -> str:
        """``text`` cut on a word boundary (with the marker) to fit both limits."""
        if self._fits(text, chars, tokens):
            return text
        if chars is not None:
            text = _cut_words(text, chars, self.marker)
        if tokens is None or self.tokens(text) <= tokens:
            return text
        return _cut_to(text, lambda s: self.tokens(s) <= tokens, self.marker)

    def fit(
        self, preamble: str, items: Sequence[tuple[Line, str]], closing: str = ""
    ) -> list[tuple[str, str]] | None:
        """Fit ``preamble``, the items' lines and ``closing`` into the budget.

        Each item is ``(line, text)``: ``line(t)`` is the item's line around the text
        ``t``, so it is the rendered line that is measured (escapes and all). Returns
        ``(line, text as injected)`` pairs, in order: an item's text is cut on a word
        boundary (with the marker) when the item or the remaining total is too small
        for it; the first item whose text would be cut below ``MIN_TEXT_CHARS`` and
        everything after it are left out. ``None`` when not even the preamble, the
        closing line and one item fit. Lines are joined by one newline each.
        """
        used_chars = len(preamble) + (1 + len(closing) if closing else 0)
        used_tokens = 0
        if self._counts_tokens:
            used_tokens = self.tokens(preamble) + (1 + self.tokens(closing) if closing else 0)
        out: list[tuple[str, str]] = []
        for line_of, text in items[: self.items]:
            # One newline joins each line to what is before it.
            room_chars = _least(self.item_chars, _left(self.total_chars, used_chars + 1))
            room_tokens = _least(self.item_tokens, _left(self.total_tokens, used_tokens + 1))
            fitted = self._fit_item(line_of, text, room_chars, room_tokens)
            if fitted is None:
                break
            line, _kept = fitted
            out.append(fitted)
            used_chars += 1 + len(line)
            if self._counts_tokens:
                used_tokens += 1 + self.tokens(line)
        return out or None

    def _fit_item(
        self, line_of: Line, text: str, chars: int | None, tokens: int | None
    ) -> tuple[str, str] | None:
        """``(line, text)`` of one item within the room left, its text cut when needed;
        ``None`` when its text would be cut below ``MIN_TEXT_CHARS``."""

        def fits(t: str) -> bool:
            return self._fits(line_of(t), chars, tokens)

        if not fits(""):
            return None
        # Only a prefix of a long text can fit; find one that cannot, so the text is not
        # encoded whole: a line is never shorter than its text, and grows with it.
        if chars is not None:
            window = text[: chars + 1]
        else:
            size = _WINDOW
            while size < len(text) and fits(text[:size]):
                size *= 2
            window = text[:size]
        if window == text and fits(text):
            return line_of(text), text
        kept = _cut_to(window, fits, self.marker)
        if len(kept) - len(self.marker) < min(MIN_TEXT_CHARS, len(text)):
            return None
        return line_of(kept), kept

    @property
    def _counts_tokens(self) -> bool:
        return self.item_tokens is not None or self.total_tokens is not None


def budget_from(value: Budget | Mapping[str, Any] | None, settings: Settings) -> Budget:
    """A :class:`Budget` from an instance, a mapping of its fields, or the settings."""
    if value is None:
        return Budget.from_settings(settings)
    if isinstance(value, Budget):
        return value
    if isinstance(value, Mapping):
        try:
            return Budget(**dict(value))
        except TypeError as exc:
            raise InvalidInput(f"invalid budget: {exc}") from None
    raise InvalidInput("budget must be a Budget, a mapping of its fields or None")


def _cut_to(text: str, fits: Callable[[str], bool], marker: str) -> str:
    """The longest word-boundary prefix of ``text`` plus ``marker`` that ``fits``."""
    bounds = [i for i, ch in enumerate(text) if ch == " "]
    lo, hi, best = 0, len(bounds) - 1, ""
    while lo <= hi:
        mid = (lo + hi) // 2
        candidate = text[: bounds[mid]] + marker
        if fits(candidate):
            best, lo = candidate, mid + 1
        else:
            hi = mid - 1
    if best:
        return best
    # No word boundary fits: cut inside the first word.
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(text[:mid] + marker):
            lo = mid
        else:
            hi = mid - 1
    return text[:lo] + marker if lo else ""


def _left(limit: int | None, used: int) -> int | None:
    return None if limit is None else limit - used


def _least(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)
