"""``GET /records/{id}``: any live record of the caller's namespace and, for a chunk of
a document, where it came from (the document, file, page and loader)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from kredenc.interfaces.server.deps import KB
from kredenc.records import Memory

router = APIRouter(tags=["records"])


class RecordView(BaseModel):
    record: Memory
    provenance: dict[str, Any] | None


@router.get("/records/{record_id}", response_model=RecordView)
def read_record(record_id: str, kb: KB) -> RecordView:
    """The record and its provenance (``null`` for a record not part of a document)."""
    return RecordView(record=kb.get(record_id), provenance=kb.provenance(record_id))
