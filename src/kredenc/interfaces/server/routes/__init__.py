"""The REST routers, one module an area of the facade; :data:`ROUTERS` is what the app
includes, in this order."""

from __future__ import annotations

from fastapi import APIRouter

from kredenc.interfaces.server.routes import (
    ask,
    documents,
    ingest,
    memories,
    recall,
    records,
    relationships,
    search,
    sessions,
    system,
    transfer,
)

ROUTERS: list[APIRouter] = [
    system.router,
    memories.router,
    records.router,
    relationships.router,
    search.router,
    recall.router,
    ask.router,
    sessions.router,
    documents.router,
    ingest.router,
    transfer.router,
]
