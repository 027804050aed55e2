"""Memories: create, read (the pattern every route module follows).

A route takes the caller's view (``kb: KB``), validates what the facade does not
(limits from ``State``), calls the facade in a worker thread (FastAPI runs plain ``def``
routes in its thread pool, so the event loop never waits on the store) and returns the
facade's dataclass, which FastAPI encodes by its field types (:mod:`kredenc.wire` is
the same shape for clients).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from kredenc.interfaces.server.deps import KB
from kredenc.records import Memory

router = APIRouter(tags=["memories"])


class NewMemory(BaseModel):
    text: str = Field(min_length=1)
    kind: str = "note"
    drawer: str = "memories"
    tags: list[str] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)
    importance: float | None = Field(None, ge=0.0, le=1.0)
    confidence: float | None = Field(None, ge=0.0, le=1.0)


@router.post("/memories", response_model=Memory, status_code=201)
def create_memory(body: NewMemory, kb: KB) -> Memory:
    """File a memory in the caller's namespace."""
    scores = {"importance": body.importance, "confidence": body.confidence}
    fields = {k: v for k, v in scores.items() if v is not None}
    return kb.remember(
        body.text, kind=body.kind, drawer=body.drawer, tags=body.tags, meta=body.meta, **fields
    )


@router.get("/memories/{record_id}", response_model=Memory)
def read_memory(record_id: str, kb: KB) -> Memory:
    """One record of the caller's namespace; a foreign or missing id is 404 alike."""
    return kb.get(record_id)
