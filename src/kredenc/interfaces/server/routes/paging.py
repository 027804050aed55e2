"""What the list routes share: the page shape, and query values the facade takes typed.

A page is ``{"items": [...], "limit": n, "offset": n, "next_offset": n | null}``:
``next_offset`` is where the next page starts, ``null`` on the last page (the route
asks the facade for one item more than the page to know).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Generic, TypeVar

from fastapi import Query
from pydantic import BaseModel

from kredenc.fields import where_pairs
from kredenc.memory.listing import MAX_LIMIT

T = TypeVar("T")

#: The largest offset a page may start at (far past any store; keeps SQL integers sane).
MAX_OFFSET = 1_000_000_000

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT - 1, description="items on the page")]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="items skipped")]
#: ``user_id`` / ``agent_id`` / ``run_id`` as a query value: records filed with it only.
ScopeQuery = Annotated[str | None, Query(min_length=1, max_length=200)]
#: ``where=key=value`` (repeatable): exact matches on top-level ``meta`` keys.
WhereQuery = Annotated[
    list[str], Query(description="key=value on meta, repeatable; the value read as JSON")
]


def where_value(pairs: list[str]) -> dict[str, Any] | None:
    """``where=key=value`` pairs as the facade's ``where`` (None when there are none)."""
    return where_pairs(pairs, "where") if pairs else None


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


def time_value(value: str | None) -> str | None:
    """A time from a query string, blank as none: Unix seconds or ISO 8601 text, which
    the facade parses and checks (``fields.parse_time``)."""
    return value if value is not None and value.strip() else None
