"""What the list routes share: the page shape, and query values the facade takes typed.

A page is ``{"items": [...], "limit": n, "offset": n, "next_offset": n | null}``:
``next_offset`` is where the next page starts, ``null`` on the last page (the route
asks the facade for one item more than the page to know).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Generic, TypeVar

from fastapi import Query
from pydantic import BaseModel

from kredenc.errors import InvalidInput
from kredenc.memory.listing import MAX_LIMIT

T = TypeVar("T")

#: The largest offset a page may start at (far past any store; keeps SQL integers sane).
MAX_OFFSET = 1_000_000_000

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT - 1, description="items on the page")]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="items skipped")]


class Page(BaseModel, Generic[T]):
    """One page of a listing."""

    items: list[T]
    limit: int
    offset: int
    next_offset: int | None


def page(fetch: Callable[[int, int], list[T]], limit: int, offset: int) -> Page[T]:
    """``fetch(limit, offset)`` as a page: one item more is asked for to know whether
    another page follows."""
    got = fetch(limit + 1, offset)
    more = len(got) > limit
    return Page[T](
        items=got[:limit], limit=limit, offset=offset, next_offset=offset + limit if more else None
    )


def time_value(value: str | None) -> float | str | None:
    """A time from a query string: Unix seconds when it is a number, else the ISO 8601
    text (the facade parses and checks both)."""
    if value is None or not value.strip():
        return None
    try:
        return float(value)
    except ValueError:
        return value


def pages_value(value: str | None) -> tuple[int, int] | None:
    """``3-5`` (or ``4``) as the (first, last) pages a search keeps."""
    if value is None or not value.strip():
        return None
    first, _, last = value.strip().partition("-")
    try:
        bounds = (int(first), int(last or first))
    except ValueError:
        raise InvalidInput(
            f"pages must be FIRST-LAST or one page number, not {value[:40]!r}", "e.g. pages=3-5"
        ) from None
    if not 1 <= bounds[0] <= bounds[1] <= MAX_OFFSET:
        raise InvalidInput(f"pages must be 1 <= first <= last, not {value[:40]!r}", "e.g. 3-5")
    return bounds
