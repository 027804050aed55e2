"""The memory graph's edges, under the Neuro Core design's names: ``POST
/relationships`` (relate, or unrelate with ``remove``), ``GET /relationships`` (every
edge, paged) and ``GET /relationships/{memory_id}`` (the edges of one record)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from kredenc.interfaces.server.deps import KB
from kredenc.interfaces.server.routes.body import Body
from kredenc.interfaces.server.routes.paging import Limit, Offset, Page, page
from kredenc.records import GraphEdge

router = APIRouter(tags=["relationships"])


class NewRelationship(Body):
    src: str = Field(min_length=1)
    dst: str = Field(min_length=1)
    rel: str = Field(min_length=1)
    weight: float = 1.0
    remove: bool = False


class Edges(BaseModel):
    items: list[GraphEdge]


@router.post("/relationships", status_code=204, response_class=Response)
def relate(body: NewRelationship, kb: KB) -> Response:
    """Add a typed edge between two live records (or remove it with ``remove``)."""
    kb.relate(body.src, body.dst, body.rel, weight=body.weight, remove=body.remove)
    return Response(status_code=204)


@router.get("/relationships", response_model=Page[GraphEdge])
def list_relationships(kb: KB, limit: Limit = 50, offset: Offset = 0) -> Page[GraphEdge]:
    """Every edge of the caller's namespace, in the order written."""
    return page(lambda n, skip: kb.list_relationships(limit=n, offset=skip), limit, offset)


@router.get("/relationships/{memory_id}", response_model=Edges)
def relationships_of(memory_id: str, kb: KB) -> Edges:
    """The edges from or to one live record (404 for a missing or foreign id)."""
    return Edges(items=kb.relationships_of(memory_id))
