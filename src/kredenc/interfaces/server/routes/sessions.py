"""Sessions (the turns an ask or the proxy filed): list, history, clear.

A session id the caller's namespace does not hold answers like an empty session
(no messages, ``cleared: 0``): a foreign session is indistinguishable from a new one.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel

from kredenc.interfaces.server.deps import KB
from kredenc.interfaces.server.routes.paging import Limit, Offset, Page, page
from kredenc.memory.listing import SessionEntry

router = APIRouter(tags=["sessions"])


class Message(BaseModel):
    role: str
    content: str


class History(BaseModel):
    session_id: str
    messages: list[Message]


class Cleared(BaseModel):
    cleared: int


@router.get("/sessions", response_model=Page[SessionEntry])
def list_sessions(kb: KB, limit: Limit = 50, offset: Offset = 0) -> Page[SessionEntry]:
    """Sessions with live turns, the most recently active first."""
    return page(lambda n, skip: kb.list_sessions(limit=n, offset=skip), limit, offset)


@router.get("/sessions/{session_id}", response_model=History)
def session_history(
    session_id: str, kb: KB, limit: Annotated[int, Query(ge=0, le=1000)] = 20
) -> History:
    """The session's last ``limit`` messages, oldest first."""
    messages = kb.session_history(session_id, limit=limit)
    return History(session_id=session_id, messages=[Message(**m) for m in messages])


@router.delete("/sessions/{session_id}", response_model=Cleared)
def clear_session(session_id: str, kb: KB) -> Cleared:
    """Forget every turn of the session; how many."""
    return Cleared(cleared=kb.clear_session(session_id))
