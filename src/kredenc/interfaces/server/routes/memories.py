"""Memories: create, read, list with filters and paging, score, forget, and a memory's
history (every change to it, paged).

A route takes the caller's view (``kb: KB``), validates what the facade does not
(limits from ``State``), calls the facade in a worker thread (FastAPI runs plain ``def``
routes in its thread pool, so the event loop never waits on the store) and returns the
facade's dataclass, which FastAPI encodes by its field types (:mod:`kredenc.wire` is
the same shape for clients).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, Field

from kredenc.interfaces.server.deps import KB
from kredenc.interfaces.server.routes.body import Body, ScopeId
from kredenc.interfaces.server.routes.paging import (
    Limit,
    Offset,
    Page,
    ScopeQuery,
    page,
    time_value,
)
from kredenc.memory.history import HistoryEntry
from kredenc.records import Memory

router = APIRouter(tags=["memories"])

Score = Annotated[float | None, Field(ge=0.0, le=1.0)]
#: A time: Unix seconds or ISO 8601 text.
Time = float | str | None


class NewMemory(Body):
    text: str = Field(min_length=1)
    kind: str = "note"
    drawer: str = "memories"
    tags: list[str] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)
    importance: Score = None
    confidence: Score = None
    stability: Score = None
    status: str | None = None
    valid_from: Time = None
    valid_to: Time = None
    episode_id: str | None = None
    user_id: ScopeId = None
    agent_id: ScopeId = None
    run_id: ScopeId = None


class ScoreChange(Body):
    """The fields to change (only those given); ``reason`` lands in the history."""

    importance: Score = None
    confidence: Score = None
    stability: Score = None
    status: str | None = None
    valid_to: Time = None
    reason: str | None = Field(None, max_length=1000)


def _given(body: BaseModel, *skip: str) -> dict[str, Any]:
    return {k: v for k, v in body.model_dump().items() if v is not None and k not in skip}


@router.post("/memories", response_model=Memory, status_code=201)
def create_memory(body: NewMemory, kb: KB) -> Memory:
    """File a memory in the caller's namespace."""
    fields = _given(body, "text", "kind", "drawer", "tags", "meta")
    return kb.remember(
        body.text, kind=body.kind, drawer=body.drawer, tags=body.tags, meta=body.meta, **fields
    )


@router.get("/memories", response_model=Page[Memory])
def list_memories(
    kb: KB,
    kind: Annotated[list[str], Query()] = [],  # noqa: B006 (FastAPI copies defaults)
    status: Annotated[list[str], Query()] = [],  # noqa: B006
    tag: Annotated[list[str], Query()] = [],  # noqa: B006
    drawer: str | None = None,
    since: Annotated[str | None, Query(description="Unix seconds or ISO 8601")] = None,
    until: Annotated[str | None, Query(description="Unix seconds or ISO 8601")] = None,
    user_id: ScopeQuery = None,
    agent_id: ScopeQuery = None,
    run_id: ScopeQuery = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Page[Memory]:
    """Live memories in filing order, of any of the kinds and statuses given, with
    every tag given, filed in ``[since, until)``, of the user, agent and run given."""
    return page(
        lambda n, skip: kb.list_memories(
            kinds=kind,
            statuses=status,
            tags=tag,
            drawer=drawer or None,
            since=time_value(since),
            until=time_value(until),
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id,
            limit=n,
            offset=skip,
        ),
        limit,
        offset,
    )


@router.get("/memories/{record_id}", response_model=Memory)
def read_memory(record_id: str, kb: KB) -> Memory:
    """One record of the caller's namespace; a foreign or missing id is 404 alike."""
    return kb.get(record_id)


@router.get("/memories/{record_id}/history", response_model=Page[HistoryEntry])
def memory_history(
    record_id: str, kb: KB, limit: Limit = 100, offset: Offset = 0
) -> Page[HistoryEntry]:
    """Every change to one memory, oldest first: created, score and status edits (old
    to new, with the reason), relations added and removed, forgotten. A forgotten
    memory's history shows no text; a foreign or missing id is 404 alike."""
    return page(lambda n, skip: kb.memory_history(record_id, limit=n, offset=skip), limit, offset)


@router.patch("/memories/{record_id}", response_model=Memory)
def score_memory(record_id: str, body: ScoreChange, kb: KB) -> Memory:
    """Change a memory's scores or state (the fields given); the memory as it is now."""
    return kb.score(record_id, reason=body.reason, **_given(body, "reason"))


@router.delete("/memories/{record_id}", status_code=204, response_class=Response)
def forget_memory(record_id: str, kb: KB) -> Response:
    """Forget a record everywhere (a tombstone; its edges go with it)."""
    kb.forget(record_id)
    return Response(status_code=204)
