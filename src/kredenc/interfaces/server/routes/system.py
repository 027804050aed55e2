"""``/health`` (open, reveals nothing about data) and ``/stats``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from kredenc import __version__
from kredenc.interfaces.server.deps import KB

router = APIRouter(tags=["system"])


class Health(BaseModel):
    status: str
    version: str


@router.get("/health", response_model=Health)
def health() -> Health:
    """Whether the server answers: no key needed, and nothing about the store."""
    return Health(status="ok", version=__version__)


@router.get("/stats")
def stats(kb: KB) -> dict[str, Any]:
    """The caller's namespace: counts, sizes, model."""
    return kb.stats()
