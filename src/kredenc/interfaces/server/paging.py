"""The paging shape of every list route: ``{"items", "limit", "offset", "next_offset"}``.

A route asks the facade for one item more than the page holds, so ``next_offset`` is
``null`` exactly when nothing follows (never a last, empty page to fetch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from pydantic import BaseModel

T = TypeVar("T")

#: The largest page a request may ask (a page is built in memory).
MAX_PAGE = 1000


class Page(BaseModel, Generic[T]):
    items: list[T]
    limit: int
    offset: int
    next_offset: int | None


def page_of(found: Sequence[T], limit: int, offset: int) -> Page[T]:
    """The page of ``found`` (fetched with ``limit + 1``) at ``offset``."""
    more = len(found) > limit
    return Page[T](
        items=list(found[:limit]),
        limit=limit,
        offset=offset,
        next_offset=offset + limit if more else None,
    )
