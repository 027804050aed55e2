"""A search or context-graph request, from the caller's options to the pipeline.

Builds :class:`~kredenc.retrieve.search.SearchParams` from the store's settings and
:class:`~kredenc.storage.index.filters.Filters` from the caller's options, rejecting
bad ones with one line each, then runs ``retrieve.search`` or
``retrieve.context_graph`` in the namespace ``ns`` of the open store.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kredenc import plugins
from kredenc.checks import check_name
from kredenc.config import Settings
from kredenc.errors import InvalidInput
from kredenc.fields import parse_pages, parse_time
from kredenc.providers.rerank import Reranker, make_reranker
from kredenc.records import ContextGraph, Hit, Hits
from kredenc.retrieve import context_graph as graphs
from kredenc.retrieve import iterative as bridging
from kredenc.retrieve import search as searching
from kredenc.retrieve.feedback import Feedback
from kredenc.retrieve.relevance import check_min_score
from kredenc.retrieve.when import first_then
from kredenc.retrieve.when import since as since_phrase
from kredenc.storage.index.filters import Filters, scope_filters

if TYPE_CHECKING:
    from kredenc.storage.store import Store

# Rerankers made for each open store, by name (a model loads once per store).
_RERANKERS: weakref.WeakKeyDictionary[Store, dict[str, Reranker | None]] = (
    weakref.WeakKeyDictionary()
)


def reranker_for(store: Store, name: str | None) -> Reranker | None:
    """The reranker ``name`` (default: the ``rerank`` setting), made once per store."""
    key = store.settings.rerank if name is None else name
    made = _RERANKERS.setdefault(store, {})
    if key not in made:
        reranker = make_reranker(key)
        if reranker is not None:
            reranker.share(store.embedder)
        made[key] = reranker
    return made[key]


def search_params(
    settings: Settings,
    *,
    k: int = 10,
    mode: str = "hybrid",
    per_document: bool = False,
    hops: int = 0,
) -> searching.SearchParams:
    """Search parameters: the caller's ``k``, mode, hops and per-document choice, the
    rest (leg depth, fusion and its weights, feedback, graph and rerank limits) from
    settings."""
    s = settings
    return searching.SearchParams(
        k=k,
        mode=mode,
        leg_k=s.leg_k,
        rrf_k=s.rrf_k,
        weight_dense=s.weight_dense,
        weight_lexical=s.weight_lexical,
        fusion=s.fusion,
        per_document=per_document,
        hops=hops,
        neighbors_max=s.neighbors_max,
        graph_decay=s.graph_decay,
        coverage_weight=s.coverage_weight,
        spelling=s.spelling,
        rerank_depth=s.rerank_depth,
        rerank_mix=s.rerank_mix,
        context_weight=s.lexical_context_weight,
        lexical_max_scored=s.lexical_max_scored,
        feedback=Feedback(
            mode=s.feedback,
            docs=s.feedback_docs,
            terms=s.feedback_terms,
            lam=s.feedback_lambda,
            alpha=s.feedback_alpha,
            beta=s.feedback_beta,
        ),
    )


def search(
    store: Store,
    ns: str,
    /,
    query: str,
    *,
    k: int = 10,
    mode: str = "hybrid",
    drawer: str | None = None,
    kinds: Sequence[str] = (),
    include_deprecated: bool = False,
    as_of: float | str | None = None,
    hops: int = 0,
    rerank: str | None = None,
    loaders: Sequence[str] = (),
    source: str | None = None,
    pages: tuple[int, int] | None = None,
    types: Sequence[str] = (),
    older_than: float | None = None,
    per_document: bool = False,
    since: float | str | None = None,
    until: float | str | None = None,
    span: searching.SpanFactory | None = None,
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
    tags: Sequence[str] = (),
    where: Mapping[str, Any] | None = None,
    min_score: float | None = None,
    iterative: bool = False,
    asked_at: float | str | None = None,
) -> Hits:
    """Hybrid (or lexical, or dense) search in this namespace.

    Each hit carries ``relevance``, a calibrated probability in [0, 1] that it is
    relevant (the same scale for every query; :mod:`kredenc.retrieve.relevance`), beside
    its rank ``score`` (the fused score, plus in hybrid mode's top 12 the coverage bonus
    of :mod:`kredenc.retrieve.coverage`); ``min_score`` drops hits whose relevance is
    below it.

    Deprecated memories are left out unless ``include_deprecated``; ``as_of``
    (Unix seconds or ISO 8601) keeps what was recorded and valid at that time.
    ``hops`` adds graph neighbours of the best hits; ``rerank`` names a reranker
    (default: the ``rerank`` setting). ``loaders``, ``source`` (a glob) and
    ``pages`` (first, last) filter document chunks, inside SQL; ``since`` and
    ``until`` (Unix seconds or ISO 8601) keep what was filed in ``[since, until)``.
    ``per_document`` keeps one hit per document, its best chunk (document
    retrieval): in each leg before fusing, and in the fused list before the cut.
    ``user_id``, ``agent_id`` and ``run_id`` keep records filed with those ids (inside
    this namespace); ``tags`` keeps records carrying every tag given; ``where``
    (``{"key": value}``, at most 16 keys) keeps records whose top-level ``meta`` values
    equal those given, JSON type included. Every filter applies inside SQL in every leg
    and to graph neighbours.
    ``span``: a tracing hook around each step (``kredenc.loop.tracing``).

    ``iterative`` makes ``hops`` the number of bridge rounds instead of graph hops
    (multi-hop questions without an LLM, :mod:`kredenc.retrieve.iterative`): search,
    then search again for the names of the top hits the query lacks, at most ``hops``
    times, stopping when a round brings nothing new; the lists are fused. The result is
    an :class:`~kredenc.retrieve.iterative.RoundHits` list whose ``explain()`` says what each
    round searched; ``min_score`` applies to the fused hits.

    ``asked_at`` (Unix seconds or ISO 8601): when the query is asked (a replayed
    conversation, an evaluation). A time the query names ("two months ago", "last
    Saturday": :mod:`kredenc.retrieve.when`) is then read against it, as recall reads
    one: the same search over the records filed since that time runs too, and its hits
    come first, the others after them. Without it (the default) such words are words.
    """
    params = search_params(store.settings, k=k, mode=mode, per_document=per_document, hops=hops)
    query = searching.validate(query, params)
    floor = check_min_score(min_score)
    if drawer is not None:
        check_name("drawer", drawer)
    for loader in loaders:  # a mistyped loader would match nothing, silently
        plugins.get(plugins.LOADERS, loader)
    after, before = parse_time(since, "since"), parse_time(until, "until")
    if after is not None and before is not None and after >= before:
        raise InvalidInput(
            "since must be earlier than until", "swap them, or leave one out for an open end"
        )
    pages = parse_pages(pages)
    filters = Filters(
        drawer=drawer,
        kinds=tuple(kinds),
        include_deprecated=include_deprecated,
        as_of=parse_time(as_of, "as_of"),
        loaders=tuple(loaders),
        origin_glob=source,
        pages=pages,
        types=tuple(types),
        older_than=older_than,
        created_after=after,
        created_before=before,
        **scope_filters(user_id=user_id, agent_id=agent_id, run_id=run_id, tags=tags, where=where),
    )
    reranker = reranker_for(store, rerank)
    asked = parse_time(asked_at, "asked_at")
    when = since_phrase(query, asked) if asked is not None else None

    def run(under: Filters) -> Hits:
        return _filtered_search(store, ns, query, params, under, reranker, span, floor, iterative)

    found = run(filters)
    if when is not None:
        first = run(replace(filters, created_after=max(when.start, after or when.start)))

        def key(hit: Hit) -> str:  # one hit per document stays one per document
            return (hit.doc_id or hit.id) if per_document else hit.id

        found[:] = first_then(first, found, key)[:k]
    return found


def _filtered_search(
    store: Store,
    ns: str,
    query: str,
    params: searching.SearchParams,
    filters: Filters,
    reranker: Reranker | None,
    span: searching.SpanFactory | None,
    floor: float | None,
    iterative: bool,
) -> Hits:
    """One search of :func:`search` under ``filters`` (plain or iterative)."""
    hops, k = params.hops, params.k
    if not iterative:
        return searching.search(
            store.index,
            store.haystack,
            ns,
            query,
            params,
            filters,
            store.embed_query,
            reranker,
            span=span,
            min_score=floor,
        )
    each = replace(params, hops=0)

    def find(q: str) -> Hits:
        return searching.search(
            store.index,
            store.haystack,
            ns,
            q,
            each,
            filters,
            store.embed_query,
            reranker,
            span=span,
        )

    found = bridging.run(find, query, hops=hops, k=k)
    if floor is not None:
        found[:] = [h for h in found if h.relevance is not None and h.relevance >= floor]
    return found


def context_graph(
    store: Store,
    ns: str,
    /,
    query: str,
    *,
    hops: int = 2,
    neighbors_max: int = 40,
    seed_ids: Sequence[str] | None = None,
    k: int = 10,
    weights: tuple[float, float, float] | None = None,
    drawer: str | None = None,
    include_deprecated: bool = False,
    as_of: float | str | None = None,
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
    tags: Sequence[str] = (),
    where: Mapping[str, Any] | None = None,
) -> ContextGraph:
    """Seeds by meaning (words when meaning is weak), expanded along relations,
    ranked by similarity, with importance and recency breaking near-ties
    (``weights``, normalised; the ``rank_tiebreak`` setting scales the two). The
    nodes count as recalled (``Store.note_access``). ``user_id``, ``agent_id``,
    ``run_id``, ``tags`` and ``where`` filter seeds and neighbours as in
    :func:`search`."""
    if not isinstance(query, str):
        raise InvalidInput("query must be text")
    if not 0 <= hops <= 3 or not 1 <= k <= 1000 or neighbors_max < 0:
        raise InvalidInput("hops must be 0-3, k 1-1000 and neighbors_max >= 0")
    s = store.settings
    w = weights or (s.rank_similarity, s.rank_importance, s.rank_recency)
    if drawer is not None:
        check_name("drawer", drawer)
    filters = Filters(
        drawer=drawer,
        include_deprecated=include_deprecated,
        as_of=parse_time(as_of, "as_of"),
        **scope_filters(user_id=user_id, agent_id=agent_id, run_id=run_id, tags=tags, where=where),
    )

    def hybrid_seeds(q: str, n: int) -> list[tuple[int, float]]:
        params = replace(search_params(s, k=n), leg_k=max(n, s.leg_k))
        legs = searching.run_legs(store.index, ns, q, params, filters, store.embed_query)

        def read(rowids: Sequence[int]) -> dict[int, tuple[str, str]]:
            return searching.read_texts(store.index, store.haystack, ns, rowids)

        fused = searching.fuse(legs, params, query=q, read=read)
        # Found by words, or by meaning above the graph's floor (as recall keeps them).
        return searching.similar_enough(fused, legs, graphs.MIN_SIMILARITY)[:n]

    graph = graphs.build(
        store.index,
        store.haystack,
        ns,
        query,
        embed_query=store.embed_query,
        hybrid_seeds=hybrid_seeds,
        k=k,
        hops=hops,
        neighbors_max=neighbors_max,
        seed_ids=seed_ids,
        blend=graphs.Blend(*w, half_life_days=s.recency_half_life_days, tiebreak=s.rank_tiebreak),
        filters=filters,
    )
    store.note_access(ns, [n.id for n in graph.nodes])
    return graph
