"""Hybrid search: lexical and dense legs, fused (min-max by default, weighted RRF or
the learned fusion: the store's ``fusion`` setting), optionally a second pass of
pseudo-relevance feedback (the ``feedback`` setting, :mod:`kredenc.retrieve.feedback`),
hits read from the log; in hybrid mode the top of the list is reordered to cover the
query (:mod:`kredenc.retrieve.coverage`). :func:`run_legs` is the one legs runner:
search and the recall reflex (with a deadline) both run it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from kredenc.errors import DeadlineExceeded, InvalidInput, KredencError
from kredenc.providers.rerank import Reranker
from kredenc.records import Hit, Hits, LegScore
from kredenc.retrieve import feedback as prf
from kredenc.retrieve import learned
from kredenc.retrieve.coverage import WEIGHT as COVERAGE_WEIGHT
from kredenc.retrieve.coverage import cover
from kredenc.retrieve.fuse import weighted_minmax, weighted_rrf
from kredenc.retrieve.graph import DECAY, expand, merge
from kredenc.retrieve.relevance import WINDOW, features, relevance, unit_vectors
from kredenc.retrieve.rerank import rerank
from kredenc.retrieve.terms import pair_phrases, phrases, query_terms, tokens
from kredenc.storage.base import Index, Log
from kredenc.storage.index.filters import Filters
from kredenc.storage.index.lexical import MAX_SCORED, Phrase
from kredenc.storage.index.spelling import respell
from kredenc.storage.index.vectors import F32

Mode = Literal["hybrid", "lexical", "dense"]
MODES: tuple[str, ...] = ("hybrid", "lexical", "dense")

#: A tracing hook: ``span(name, **attributes)`` is a context manager around one step
#: (``kredenc.loop.tracing.Tracer.span`` is one) that yields None or an object with
#: ``set(**attributes)``. The pipeline knows nothing of tracing
#: beyond this; None costs nothing.
SpanFactory = Callable[..., AbstractContextManager[Any]]
_NO_SPAN: AbstractContextManager[Any] = nullcontext()


def _no_span(_name: str, **_attrs: Any) -> AbstractContextManager[Any]:
    return _NO_SPAN


@dataclass(frozen=True)
class SearchParams:
    k: int = 10
    mode: str = "hybrid"
    leg_k: int = 50
    rrf_k: int = 60
    weight_dense: float = 0.4
    weight_lexical: float = 0.6
    fusion: str = "minmax"
    per_document: bool = False
    hops: int = 0
    neighbors_max: int = 40
    #: A graph neighbour's share of its seed's score per hop (:data:`graph.DECAY`).
    graph_decay: float = DECAY
    #: Hybrid with min-max fusion only: weight of a hit's novel query coverage in the
    #: top of the list (:mod:`kredenc.retrieve.coverage`; 0 keeps the fused order).
    coverage_weight: float = COVERAGE_WEIGHT
    context_weight: float = 0.5
    lexical_max_scored: int = MAX_SCORED
    rerank_depth: int = 30
    rerank_mix: float = 1.0
    feedback: prf.Feedback = field(default_factory=prf.Feedback)
    #: The learned fusion's coefficients (None: :data:`kredenc.retrieve.learned.WEIGHTS`).
    learned_weights: tuple[float, ...] | None = None
    #: Search a query word that no card holds as the word one typo away that the
    #: caller's cards hold, too (:mod:`kredenc.storage.index.spelling`).
    spelling: bool = True
    #: Probe: neighbouring content words also searched as phrases (terms.pair_phrases).
    pairs: bool = False


def validate(query: object, params: SearchParams) -> str:
    if not isinstance(query, str):
        raise InvalidInput("query must be text")
    if params.mode not in MODES:
        raise InvalidInput(f"unknown search mode {params.mode!r}", f"use one of {', '.join(MODES)}")
    k = params.k
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
        raise InvalidInput(f"k must be a whole number between 1 and 1000, not {k!r}")
    if not 0 <= params.hops <= 3:
        raise InvalidInput(f"hops must be between 0 and 3, not {params.hops}")
    prf.check(params.feedback)
    try:
        query.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("query is not valid UTF-8", "pass the query as UTF-8 text") from None
    return query


class LegIndex(Protocol):
    """What the legs read of an index."""

    def lexical(
        self,
        ns: str,
        phrases: Sequence[Phrase],
        k: int,
        filters: Filters,
        *,
        context_weight: float = ...,
        max_scored: int = ...,
        deadline: float | None = ...,
    ) -> list[tuple[int, float]]: ...

    def dense(self, ns: str, query: F32, k: int, filters: Filters) -> list[tuple[int, float]]: ...

    def vectors_ready(self, wait: float = ...) -> bool: ...

    def doc_ids(self, ns: str, rowids: Sequence[int]) -> dict[int, str]: ...

    def corrections(self, ns: str, words: Sequence[str], filters: Filters) -> dict[str, str]: ...


class Legs(dict[str, list[tuple[int, float]]]):
    """Each leg's ranked (rowid, score) list, and how the run went.

    ``timings_ms``: ``lexical`` (the leg), ``dense`` (the leg, its embedding included)
    and ``embed`` (the query embedding alone), for the legs that ran. With a deadline:
    ``late`` names the legs that missed it, ``skipped`` says why a leg did not run,
    ``failed`` holds a leg's provider error; none of those legs is in the mapping.
    """

    def __init__(self) -> None:
        super().__init__()
        self.timings_ms: dict[str, float] = {}
        self.late: list[str] = []
        self.skipped: dict[str, str] = {}
        self.failed: dict[str, KredencError] = {}
        self.query_vector: F32 | None = None
        #: Misspelt query words and the words searched for them (``SearchParams.spelling``).
        self.corrections: dict[str, str] = {}
        #: The query as the legs searched it (its misspelt words corrected); "" before.
        self.text = ""


def run_legs(
    index: LegIndex,
    ns: str,
    query: str,
    params: SearchParams,
    filters: Filters,
    embed_query: Callable[[str], F32],
    depth: int | None = None,
    *,
    terms: Sequence[Phrase] | None = None,
    deadline: float | None = None,
    span: SpanFactory | None = None,
) -> Legs:
    """Each leg's ranked (rowid, score) list, ``depth`` deep (default: ``leg_k``, the
    window fusion normalises over, or ``k`` when that is more).

    In hybrid mode the query is embedded on a worker thread while the lexical leg runs
    on this one (onnxruntime and SQLite both release the GIL), so a hybrid search costs
    about the longer of the two rather than their sum. ``terms``: the lexical leg's
    phrases (default: the query's own, :func:`~kredenc.retrieve.terms.query_terms`).

    ``deadline`` (a ``time.perf_counter()`` value; None: none) bounds the run: the index
    interrupts a lexical leg that passes it, and the embedding (always on a worker then)
    is waited for only until it. What is late is left out and named in ``Legs.late``,
    never raised; a late embedding finishes on its worker (which warms a caching
    ``embed_query``). Embeddings queue for the :data:`EMBED_WORKERS` workers; a deadline
    run skips its dense leg only when that many embeddings overran their callers'
    deadlines and still run (a hung model: queueing behind them would only make the
    queue grow) or :data:`EMBED_QUEUE` are already waiting or running. A provider error
    in the embedding is ``Legs.failed`` then, so the lexical leg's result still counts.
    A deadline run never loads the index's vectors on this thread (about 0.9 s at
    100,000): it starts their load (``vectors_ready``) and waits for it only until the
    deadline, else skips the dense leg (:data:`VECTORS_LOADING`).
    ``span``: a tracing hook around each leg.
    """
    span = span or _no_span
    legs = Legs()
    if depth is None:
        depth = max(params.leg_k, params.k)
    # A query with no words (only punctuation, operators or spaces) finds nothing in
    # either leg; embedding "* ( )" would return arbitrary nearest neighbours.
    dense = params.mode in ("hybrid", "dense") and bool(tokens(query))
    lexical_terms = phrases(query_terms(query)) if terms is None else list(terms)
    if params.pairs and terms is None:
        lexical_terms += [Phrase(p) for p in pair_phrases(query)]
    if params.spelling:
        # Looked up before the embedding starts, so a corrected query is embedded once,
        # as corrected (a query whose words are all held waits ~0.03 ms for it).
        lexical_terms, query = _respelled(index, ns, query, lexical_terms, filters, legs)
    legs.text = query

    def deeper(name: str, asked: int) -> list[tuple[int, float]] | None:
        """Leg ``name`` again, ``asked`` deep (None: past the deadline or no vector)."""
        if deadline is not None and time.perf_counter() > deadline:
            return None
        if name == "dense":
            vector = legs.query_vector
            return None if vector is None else index.dense(ns, vector, asked, filters)
        try:
            return index.lexical(
                ns,
                lexical_terms,
                asked,
                filters,
                context_weight=params.context_weight,
                max_scored=params.lexical_max_scored,
                deadline=deadline,
            )
        except DeadlineExceeded:
            return None

    if dense and deadline is not None:
        index.vectors_ready()  # a first search of the process: their load starts now
    embedding: Future[tuple[F32, float]] | None = None
    if dense and (params.mode == "hybrid" or deadline is not None):
        embedding = _EMBEDDINGS.submit(embed_query, query, refuse=deadline is not None)
        if embedding is None:
            legs.skipped["dense"] = _EMBEDDINGS.refusal()
    if params.mode in ("hybrid", "lexical"):
        t0 = time.perf_counter()
        try:
            with span("search.lexical", depth=depth, phrases=len(lexical_terms)):
                legs["lexical"] = (
                    index.lexical(
                        ns,
                        lexical_terms,
                        depth,
                        filters,
                        context_weight=params.context_weight,
                        max_scored=params.lexical_max_scored,
                        deadline=deadline,
                    )
                    if lexical_terms
                    else []
                )
        except DeadlineExceeded:
            legs.late.append("lexical")
        else:
            legs.timings_ms["lexical"] = (time.perf_counter() - t0) * 1000
    if dense and "dense" not in legs.skipped:
        t0 = time.perf_counter()
        with span("search.dense", depth=depth) as leg_span:
            try:
                if embedding is None:
                    vector, embed_ms = _timed(embed_query, query)
                elif deadline is None:
                    vector, embed_ms = embedding.result()
                else:
                    vector, embed_ms = embedding.result(max(0.0, deadline - time.perf_counter()))
            except FutureTimeout:
                legs.late.append("dense")
                _EMBEDDINGS.abandon(embedding)
            except KredencError as exc:  # a provider's error (model missing, API down)
                if deadline is None:
                    raise
                legs.failed["dense"] = exc
            else:
                searched = time.perf_counter()
                legs.query_vector = np.asarray(vector, dtype=np.float32)
                if deadline is not None and not index.vectors_ready(max(0.0, deadline - searched)):
                    legs.skipped["dense"] = VECTORS_LOADING
                    return _grouped(index, ns, legs, params, depth, deeper)
                legs["dense"] = index.dense(
                    ns, np.asarray(vector, dtype=np.float32), depth, filters
                )
                legs.timings_ms["dense"] = embed_ms + (time.perf_counter() - searched) * 1000
                legs.timings_ms["embed"] = embed_ms
                if leg_span is not None:
                    leg_span.set(embed_ms=round(embed_ms, 3))
    elif params.mode in ("hybrid", "dense") and not dense:
        legs["dense"] = []
    return _grouped(index, ns, legs, params, depth, deeper)


#: With ``per_document``, a leg whose ``depth`` hits hold fewer than ``depth``
#: documents is searched again 4x deeper, up to this many times its depth (a long
#: document's chunks would otherwise use up the candidates: one document once grouped).
PER_DOCUMENT_DEPTH = 64


def _grouped(
    index: LegIndex,
    ns: str,
    legs: Legs,
    params: SearchParams,
    depth: int,
    deeper: Callable[[str, int], list[tuple[int, float]] | None],
) -> Legs:
    """``legs``, each leg kept to the best hit per document with ``per_document``,
    searched deeper (``deeper(leg, depth)``; None: not now) while a full list holds
    fewer than ``depth`` documents (:data:`PER_DOCUMENT_DEPTH`)."""
    if not params.per_document:
        return legs
    for name in list(legs):
        ranked, asked = legs[name], depth
        grouped = _best_per_document(index, ns, ranked)
        while len(grouped) < depth and len(ranked) >= asked and asked < depth * PER_DOCUMENT_DEPTH:
            asked *= 4
            more = deeper(name, asked)
            if more is None:
                break
            ranked = more
            grouped = _best_per_document(index, ns, ranked)
        legs[name] = grouped
    return legs


#: Why a deadline run's dense leg did not run while the vectors were loading.
VECTORS_LOADING = (
    "the vectors are still loading into this process (its first dense search); used what was ready"
)


#: Threads that embed queries beside their lexical legs. A deadline run skips its dense
#: leg when this many embeddings have overrun their callers' deadlines and still run.
EMBED_WORKERS = 4
#: Embeddings waiting or running at once, at most, for deadline runs (simultaneous
#: recalls of a busy server queue for the workers up to this; each waits only until
#: its own deadline).
EMBED_QUEUE = 8 * EMBED_WORKERS


def _respelled(
    index: LegIndex,
    ns: str,
    query: str,
    terms: list[Phrase],
    filters: Filters,
    legs: Legs,
) -> tuple[list[Phrase], str]:
    """The lexical phrases and the dense leg's text with the query's misspelt words
    corrected (:mod:`kredenc.storage.index.spelling`): a word no card holds gets the
    word one typo away that the caller's cards hold as a phrase beside it, and the
    dense leg embeds the corrected text. ``legs.corrections`` says what was changed."""
    t0 = time.perf_counter()
    words = [p.text for p in terms if not p.prefix]
    fixes = index.corrections(ns, words, filters) if words else {}
    legs.timings_ms["spelling"] = (time.perf_counter() - t0) * 1000
    if not fixes:
        return terms, query
    legs.corrections = fixes
    have = set(terms)
    added = [Phrase(w) for w in dict.fromkeys(fixes.values()) if Phrase(w) not in have]
    return [*terms, *added], respell(query, fixes)


def _timed(embed_query: Callable[[str], F32], text: str) -> tuple[F32, float]:
    """The query's vector and the milliseconds its embedding took."""
    t0 = time.perf_counter()
    vector = embed_query(text)
    return vector, (time.perf_counter() - t0) * 1000


class _Embeddings:
    """The threads that embed queries beside their lexical legs (made on first use),
    counting the embeddings in flight and those whose callers gave up on them, so a
    deadline run can refuse to queue behind overrunning ones (a hung model) without
    refusing the healthy embeddings of simultaneous runs."""

    def __init__(self, size: int, queue: int) -> None:
        self.size = size
        self.queue = queue
        self._busy = 0  # submitted and not finished
        self._overrun = 0  # of those, abandoned by a caller whose deadline passed
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def refusal(self) -> str:
        """Why :meth:`submit` refused (the skipped leg's reason)."""
        with self._lock:
            if self._overrun >= self.size:
                return (
                    f"{self._overrun} earlier embeddings overran their deadlines "
                    "and are still running"
                )
            return f"{self._busy} embeddings are already waiting or running"

    def submit(
        self, embed_query: Callable[[str], F32], text: str, *, refuse: bool
    ) -> Future[tuple[F32, float]] | None:
        """The embedding's future; None (with ``refuse``) when :attr:`size` embeddings
        overran their deadlines and still run, or :attr:`queue` are in flight."""
        with self._lock:
            if refuse and (self._overrun >= self.size or self._busy >= self.queue):
                return None
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.size, thread_name_prefix="kredenc-embed")
            self._busy += 1
        future = self._pool.submit(_timed, embed_query, text)
        future.add_done_callback(self._done)
        return future

    def _done(self, _future: Future[tuple[F32, float]]) -> None:
        with self._lock:
            self._busy -= 1

    def abandon(self, future: Future[tuple[F32, float]] | None) -> None:
        """Its caller's deadline passed: one still queued is cancelled (nobody waits for
        it, and under overload stale embeddings would only delay fresh ones); one
        already running counts as overrunning until it finishes."""
        if future is None or future.cancel():
            return
        with self._lock:
            self._overrun += 1
        future.add_done_callback(self._ended)  # at once when it has finished already

    def _ended(self, _future: Future[tuple[F32, float]]) -> None:
        with self._lock:
            self._overrun -= 1


_EMBEDDINGS = _Embeddings(EMBED_WORKERS, EMBED_QUEUE)


def _best_per_document(
    index: LegIndex, ns: str, ranked: list[tuple[int, float]]
) -> list[tuple[int, float]]:
    """Keep each document's best chunk in a leg's list (records without a document
    stand for themselves), so fusion ranks documents rather than their pieces."""
    docs = index.doc_ids(ns, [r for r, _ in ranked])
    seen: set[str] = set()
    out: list[tuple[int, float]] = []
    for rowid, score in ranked:
        key = docs.get(rowid) or f"#{rowid}"
        if key not in seen:
            seen.add(key)
            out.append((rowid, score))
    return out


def search(
    index: Index,
    haystack: Log,
    ns: str,
    query: str,
    params: SearchParams,
    filters: Filters,
    embed_query: Callable[[str], F32],
    reranker: Reranker | None = None,
    *,
    span: SpanFactory | None = None,
    min_score: float | None = None,
) -> Hits:
    """Legs, fusion, optional graph expansion, optional reranking; hits from the log,
    each with its calibrated ``relevance`` (:mod:`kredenc.retrieve.relevance`; in
    lexical mode only when ``min_score`` asks for it, as it costs a query embedding).
    ``min_score`` drops hits whose relevance is below it, after the cut to ``k``.
    ``span``: a tracing hook around each leg, the graph expansion and the reranking."""
    span = span or _no_span
    depth = max(params.k, params.rerank_depth) if reranker is not None else params.k
    # Relevance scores the fit's window of fused hits together (see WINDOW); a single
    # leg stays as deep as what is kept, so there the window is the k hits kept.
    window = max(depth, WINDOW)
    single = params.mode != "hybrid" and params.hops == 0 and not params.per_document
    # One leg alone is the ranking: nothing is fused or expanded, so it need not go
    # deeper than what is kept (a bounded lexical leg then relaxes its plan less often).
    leg_depth = depth if single else None
    legs = run_legs(index, ns, query, params, filters, embed_query, leg_depth, span=span)
    # What follows (fusion features, feedback, relevance, coverage, rerank) reads the
    # query as the legs searched it.
    query = legs.text

    def read(rowids: Sequence[int]) -> dict[int, tuple[str, str]]:
        return read_texts(index, haystack, ns, rowids)

    fused = _ranking(index, ns, query, legs, params, read)
    if params.feedback.mode != "none" and fused:
        with span("search.feedback", mode=params.feedback.mode):
            _feedback(index, ns, query, params, filters, legs, fused, read, leg_depth, embed_query)
        fused = _ranking(index, ns, query, legs, params, read)
    via: dict[int, str] = {}
    if params.hops > 0:
        seeds = fused[: params.k]
        with span("search.graph", hops=params.hops):
            extra = expand(
                index,
                ns,
                seeds,
                hops=params.hops,
                filters=filters,
                limit=params.neighbors_max,
                include_seeds=True,
                decay=params.graph_decay,
            )
        fused, via = merge(fused, extra)
    if params.per_document:
        # Each leg kept a document's best chunk, but the legs can keep different
        # chunks of one document: the fused list keeps the better of them.
        fused = _best_per_document(index, ns, fused)
    top = fused[:window]
    places = index.resolve(ns, [r for r, _ in top])
    per_leg = {
        name: {r: LegScore(rank, score) for rank, (r, score) in enumerate(ranked, start=1)}
        for name, ranked in legs.items()
    }
    hits: list[Hit] = []
    for rowid, score in top:
        place = places.get(rowid)
        if place is None:  # forgotten between the legs and now
            continue
        _, offset = place
        hit = hit_from_payload(haystack.read(offset), offset, score)
        hit.legs = {n: leg[rowid] for n, leg in per_leg.items() if rowid in leg}
        hit.fused = float(score) if params.mode == "hybrid" else 0.0
        hit.graph = via.get(rowid)
        hits.append(hit)
    vector = legs.query_vector
    if vector is None and min_score is not None and hits:
        vector = np.asarray(embed_query(query), dtype=np.float32)
    if vector is not None and hits:
        _score_relevance(index, ns, query, hits, vector, places)
    if params.mode == "hybrid" and params.fusion == "minmax":
        # The weight is on min-max's scale (a list's top is 1.0); RRF's and the
        # learned fusion's scores are on others, where it was not measured.
        hits = cover(query, hits, params.coverage_weight)
    hits = hits[:depth]
    if reranker is not None:
        with span("search.rerank", candidates=len(hits)):
            hits = rerank(query, hits, reranker, mix=params.rerank_mix)
    hits = hits[: params.k]
    if min_score is not None:
        hits = [h for h in hits if h.relevance is not None and h.relevance >= min_score]
    return Hits(hits, legs.corrections)


def _one_chunk_per_document(
    index: Index,
    ns: str,
    query: str,
    legs: Legs,
    params: SearchParams,
    read: learned.TextReader,
) -> None:
    """Put each document's entry in every leg (its best chunk in that leg, with that
    chunk's score) under one chunk, the one the legs fused chunk by chunk rank first,
    so the document is fused as found by each leg that found it (in place)."""
    chunkwise = fuse(legs, params, query=query, read=read)
    docs = index.doc_ids(ns, [r for r, _ in chunkwise])
    stands: dict[str, int] = {}
    for rowid, _ in chunkwise:
        if rowid in docs:
            stands.setdefault(docs[rowid], rowid)
    for name in list(legs):
        legs[name] = [(stands.get(docs.get(r, ""), r), score) for r, score in legs[name]]


def _ranking(
    index: Index,
    ns: str,
    query: str,
    legs: Legs,
    params: SearchParams,
    read: learned.TextReader,
) -> list[tuple[int, float]]:
    """The fused ranking in hybrid mode (with ``per_document``, of documents: each
    leg's entries put under one chunk first), the one leg's own otherwise."""
    if params.mode == "hybrid":
        if params.per_document:
            _one_chunk_per_document(index, ns, query, legs, params, read)
        return fuse(legs, params, query=query, read=read)
    ((_, only),) = legs.items()
    return [(r, s) for r, s in only]


def _feedback(
    index: Index,
    ns: str,
    query: str,
    params: SearchParams,
    filters: Filters,
    legs: Legs,
    first: list[tuple[int, float]],
    read: learned.TextReader,
    depth: int | None,
    embed_query: Callable[[str], F32],
) -> None:
    """Replace ``legs``' lists by their second, feedback-steered pass (in place)."""
    t0 = time.perf_counter()
    depth = max(params.leg_k, params.k) if depth is None else depth
    vector = legs.query_vector
    if vector is None and params.feedback.rocchio and "dense" in legs:
        vector = np.asarray(embed_query(query), dtype=np.float32)

    def texts(rowids: Sequence[int]) -> dict[int, str]:
        return {r: f"{title} {text}".strip() for r, (title, text) in read(rowids).items()}

    def lexical(phrases_: Sequence[Phrase]) -> list[tuple[int, float]]:
        ranked = index.lexical(
            ns,
            phrases_,
            depth,
            filters,
            context_weight=params.context_weight,
            max_scored=params.lexical_max_scored,
        )
        return _best_per_document(index, ns, ranked) if params.per_document else ranked

    def dense(vector_: F32) -> list[tuple[int, float]]:
        ranked = index.dense(ns, vector_, depth, filters)
        return _best_per_document(index, ns, ranked) if params.per_document else ranked

    reads = prf.Reads(texts=texts, vectors=index.vectors_of, lexical=lexical, dense=dense)
    refined, _ = prf.refine(params.feedback, query, legs, first, vector, reads, params.leg_k)
    legs.update(refined)
    legs.timings_ms["feedback"] = (time.perf_counter() - t0) * 1000


def read_texts(
    index: Index, haystack: Log, ns: str, rowids: Sequence[int]
) -> dict[int, tuple[str, str]]:
    """Each live record's (title, text), by rowid, read from the log."""
    out: dict[int, tuple[str, str]] = {}
    for rowid, (_, offset) in index.resolve(ns, list(rowids)).items():
        payload = haystack.read(offset)
        out[rowid] = (str(payload.get("title") or ""), str(payload.get("text", "")))
    return out


def _score_relevance(
    index: Index,
    ns: str,
    query: str,
    hits: list[Hit],
    vector: F32,
    places: dict[int, tuple[str, int]],
) -> None:
    """Set each hit's calibrated relevance (scored together, as the model was fitted)."""
    rowid_of = {place_id: rowid for rowid, (place_id, _) in places.items()}
    rows = {h.id: rowid_of[h.id] for h in hits if h.id in rowid_of}
    stored = index.vectors_of(list(rows.values())) if rows else {}
    vectors = unit_vectors({rid: stored[row] for rid, row in rows.items() if row in stored})
    probabilities = relevance(features(query, hits, vector, vectors))
    for hit, p in zip(hits, probabilities, strict=True):
        hit.relevance = round(p, 4)


def similar_enough(
    fused: Sequence[tuple[int, float]],
    legs: Mapping[str, list[tuple[int, float]]],
    min_similarity: float,
) -> list[tuple[int, float]]:
    """``fused`` less what was found by meaning alone with a cosine below
    ``min_similarity``: a record the lexical leg found stays whatever its cosine. One
    rule for the recall reflex (``recall_min_similarity``) and the context graph's
    seeds."""
    lexical = {r for r, _ in legs.get("lexical", ())}
    dense = dict(legs.get("dense", ()))
    return [
        (r, score)
        for r, score in fused
        if r in lexical or (r in dense and dense[r] >= min_similarity)
    ]


def fuse(
    legs: Mapping[str, list[tuple[int, float]]],
    params: SearchParams,
    *,
    query: str = "",
    read: learned.TextReader | None = None,
) -> list[tuple[int, float]]:
    """The hybrid ranking of the legs' (rowid, score) lists under ``params.fusion``
    (the learned fusion reads the query and, through ``read``, the candidates' texts)."""
    weights = {"dense": params.weight_dense, "lexical": params.weight_lexical}
    if params.fusion == "learned":
        return learned.fuse(query, legs, params.leg_k, read, params.learned_weights)
    if params.fusion == "minmax":
        return weighted_minmax(legs, weights, depth=params.leg_k)
    return weighted_rrf(
        {n: [r for r, _ in ranked] for n, ranked in legs.items()}, weights, k=params.rrf_k
    )


def hit_from_payload(payload: dict[str, Any], offset: int, score: float) -> Hit:
    """A hit for the record ``payload`` read at ``offset`` (legs filled by the caller)."""
    return Hit(
        id=str(payload["id"]),
        text=str(payload.get("text", "")),
        score=float(score),
        kind=str(payload.get("kind", "")),
        drawer=str(payload.get("drawer", "")),
        type=str(payload.get("type", "")),
        meta=dict(payload.get("meta") or {}),
        tags=tuple(payload.get("tags") or ()),
        seq=int(payload["seq"]),
        offset=offset,
        created_at=float(payload.get("ts", 0.0)),
        title=str(payload.get("title") or ""),
        origin=str(payload.get("origin") or ""),
        page=payload.get("page"),
        start_s=payload.get("start_s"),
        doc_id=payload.get("doc_id"),
        user_id=payload.get("user_id"),
        agent_id=payload.get("agent_id"),
        run_id=payload.get("run_id"),
    )
