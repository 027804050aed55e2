"""The REST routers, one module an area of the facade; :data:`ROUTERS` is what the app
includes, in this order."""

from __future__ import annotations

from fastapi import APIRouter

from kredenc.interfaces.server.routes import documents, ingest, memories, system, transfer

ROUTERS: list[APIRouter] = [
    system.router,
    memories.router,
    documents.router,
    ingest.router,
    transfer.router,
]
