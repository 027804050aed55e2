"""``POST /recall``: the recall reflex over a conversation (the messages with one
message of memories appended; never an error for what it could not recall: the
result's ``skipped`` says why)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import Field

from kredenc.interfaces.server.deps import KB
from kredenc.interfaces.server.routes.body import Body, ScopeId, SessionId
from kredenc.recall.result import RecallResult

router = APIRouter(tags=["recall"])


class RecallRequest(Body):
    messages: list[dict[str, Any]] = Field(min_length=1, max_length=1000)
    session_id: SessionId
    budget: dict[str, Any] | None = None
    dry_run: bool | None = None
    mode: Literal["hybrid", "lexical", "dense"] | None = None
    user_id: ScopeId = None
    agent_id: ScopeId = None
    run_id: ScopeId = None


@router.post("/recall", response_model=RecallResult)
def recall(body: RecallRequest, kb: KB) -> RecallResult:
    """What to send the model: the messages, memories appended; and what was recalled."""
    return kb.recall(
        body.messages,
        session_id=body.session_id,
        budget=body.budget,
        dry_run=body.dry_run,
        mode=body.mode,
        user_id=body.user_id,
        agent_id=body.agent_id,
        run_id=body.run_id,
    )
