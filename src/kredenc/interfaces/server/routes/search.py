"""Search (``GET /search?q=…`` and ``POST /search`` with the same fields as JSON,
``query`` for ``q``) and the context graph (``GET /context_graph``).

Both are checked against the server's limits (``k``, query length, hops, neighbours
per node; 422 beyond) and a search may name no reranker but ``none`` or the server's
own (:func:`served_reranker`) before the facade runs, which checks the rest (mode,
drawer, loaders, times) with one line each.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from kredenc.fields import parse_pages
from kredenc.interfaces.server.deps import KB, State
from kredenc.interfaces.server.limits import check_request, served_reranker
from kredenc.interfaces.server.routes.body import Body, ScopeId, Where
from kredenc.interfaces.server.routes.paging import (
    ScopeQuery,
    WhereQuery,
    time_value,
    where_value,
)
from kredenc.records import ContextGraph, Hit, corrections_of

router = APIRouter(tags=["search"])

#: Field bounds common to every server (the configured limits are checked on top).
K = Field(10, ge=1, le=10_000)
HOPS = Field(0, ge=0, le=10)


class SearchRequest(Body):
    query: str = Field(min_length=1)
    k: int = K
    mode: str = "hybrid"
    kind: list[str] = Field(default_factory=list)
    drawer: str | None = None
    hops: int = HOPS
    rerank: str | None = None
    loader: list[str] = Field(default_factory=list)
    source: str | None = None
    pages: str | None = Field(None, description="FIRST-LAST, e.g. 3-5, or one page")
    per_document: bool = False
    since: str | None = Field(None, description="Unix seconds or ISO 8601")
    until: str | None = Field(None, description="Unix seconds or ISO 8601")
    include_deprecated: bool = False
    user_id: ScopeId = None
    agent_id: ScopeId = None
    run_id: ScopeId = None
    tags: list[str] = Field(default_factory=list, description="all of them on each hit")
    where: Where = None
    min_score: float | None = Field(
        None, ge=0.0, le=1.0, description="drop hits whose calibrated relevance is below"
    )
    iterative: bool = Field(False, description="hops are bridge-search rounds, not graph hops")
    asked_at: str | None = Field(
        None,
        description="when the query is asked (Unix seconds or ISO 8601): a time it names "
        "('two months ago') puts what was filed since then first",
    )


class SearchResult(BaseModel):
    query: str
    hits: list[Hit]
    corrections: dict[str, str] = Field(
        default_factory=dict,
        description="misspelt query words and the words searched for them (spelling)",
    )


def _search(kb: KB, state: State, r: SearchRequest) -> SearchResult:
    check_request(state.limits, k=r.k, text=r.query, hops=r.hops)
    hits = kb.search(
        r.query, k=r.k, mode=r.mode, kinds=r.kind, drawer=r.drawer or None, hops=r.hops,
        rerank=served_reranker(kb, r.rerank), loaders=r.loader, source=r.source or None,
        pages=parse_pages(r.pages), per_document=r.per_document, since=time_value(r.since),
        until=time_value(r.until), include_deprecated=r.include_deprecated,
        user_id=r.user_id, agent_id=r.agent_id, run_id=r.run_id, tags=r.tags, where=r.where,
        min_score=r.min_score, iterative=r.iterative, asked_at=time_value(r.asked_at),
    )  # fmt: skip
    return SearchResult(query=r.query, hits=hits, corrections=corrections_of(hits))


@router.get("/search", response_model=SearchResult)
def search_get(
    kb: KB,
    state: State,
    q: Annotated[str, Query(min_length=1)],
    k: Annotated[int, Query(ge=1, le=10_000)] = 10,
    mode: str = "hybrid",
    kind: Annotated[list[str], Query()] = [],  # noqa: B006 (FastAPI copies defaults)
    drawer: str | None = None,
    hops: Annotated[int, Query(ge=0, le=10)] = 0,
    rerank: str | None = None,
    loader: Annotated[list[str], Query()] = [],  # noqa: B006
    source: str | None = None,
    pages: Annotated[str | None, Query(description="FIRST-LAST, e.g. 3-5")] = None,
    per_document: bool = False,
    since: Annotated[str | None, Query(description="Unix seconds or ISO 8601")] = None,
    until: Annotated[str | None, Query(description="Unix seconds or ISO 8601")] = None,
    include_deprecated: bool = False,
    user_id: ScopeQuery = None,
    agent_id: ScopeQuery = None,
    run_id: ScopeQuery = None,
    tag: Annotated[list[str], Query()] = [],  # noqa: B006
    where: WhereQuery = [],  # noqa: B006
    min_score: Annotated[float | None, Query(ge=0.0, le=1.0)] = None,
    iterative: bool = False,
    asked_at: Annotated[str | None, Query(description="Unix seconds or ISO 8601")] = None,
) -> SearchResult:
    """Hybrid (or lexical, or dense) search of the caller's namespace."""
    request = SearchRequest(
        query=q, k=k, mode=mode, kind=kind, drawer=drawer, hops=hops, rerank=rerank,
        loader=loader, source=source, pages=pages, per_document=per_document, since=since,
        until=until, include_deprecated=include_deprecated, user_id=user_id,
        agent_id=agent_id, run_id=run_id, tags=tag, where=where_value(where),
        min_score=min_score, iterative=iterative, asked_at=asked_at,
    )  # fmt: skip
    return _search(kb, state, request)


@router.post("/search", response_model=SearchResult)
def search_post(body: SearchRequest, kb: KB, state: State) -> SearchResult:
    """The same search with its fields as JSON (``query`` for ``q``)."""
    return _search(kb, state, body)


@router.get("/context_graph", response_model=ContextGraph)
def context_graph(
    kb: KB,
    state: State,
    query: str = "",
    max_hops: Annotated[int, Query(ge=0, le=10)] = 2,
    seed_ids: Annotated[str | None, Query(description="comma-separated record ids")] = None,
    k: Annotated[int, Query(ge=1, le=10_000)] = 10,
    neighbors_max: Annotated[int, Query(ge=0, le=100_000)] = 40,
    user_id: ScopeQuery = None,
    agent_id: ScopeQuery = None,
    run_id: ScopeQuery = None,
) -> ContextGraph:
    """The memories around a query (or the seed records given), expanded along their
    relations: nodes ranked by similarity, importance and recency, and typed edges."""
    check_request(
        state.limits, k=k, text=query, hops=max_hops, fanout=neighbors_max, hops_name="max_hops"
    )
    seeds = [s.strip() for s in (seed_ids or "").split(",") if s.strip()] or None
    return kb.context_graph(
        query, hops=max_hops, neighbors_max=neighbors_max, seed_ids=seeds, k=k,
        user_id=user_id, agent_id=agent_id, run_id=run_id,
    )  # fmt: skip
