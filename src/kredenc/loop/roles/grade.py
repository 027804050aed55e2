"""grade (CRAG): each retrieved chunk CORRECT, AMBIGUOUS or INCORRECT for the query.

Rules (the default): a calibrated relevance in [0, 1], the probability that the chunk
is relevant to the query, from a logistic model over features computed per (query,
chunk) (:func:`features`):

``cos``       the dense cosine of the query and the chunk (the query embedded once,
              the chunk's stored vector)
``cos_gap``   ``cos`` minus the best ``cos`` among the chunks graded together
``coverage``  the IDF-weighted share of the query's content terms the chunk holds
              (IDF over the chunks graded together: a term all of them hold says little)
``lex_rr``    1 / rank of the chunk in the lexical (BM25) leg, 0 when it was not there
``dense_rr``  1 / rank in the dense leg, 0 when not there
``title``     the share of the query's content terms in the chunk's title

A chunk at or above ``grade_upper`` is CORRECT, below ``grade_lower`` INCORRECT, in
between AMBIGUOUS (verify decides). The coefficients (:data:`COEF`) and the
thresholds' defaults were fitted by ``benchmarks/fit_grade.py`` (see its docstring
and docs/benchmarks.md, "Grading retrieved chunks", for the data, the folds and the
transfer figures).

LLM: one JSON call per batch of chunks, a verdict and a reason for each; the
relevance is the rules' probability (the LLM's verdict decides the class).

The rules' verdicts (and, for the LLM form, the rules' relevance beside its verdict)
are cached (kind ``role``): the key holds the query, the focus when
graded against, each chunk's id, text digest, title and leg ranks, the thresholds, the
coefficients and the embedding model (docs/cache-and-tracing.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from kredenc.loop.answer import ChunkVerdict, Verdict
from kredenc.loop.cache_json import verdicts_from_json, verdicts_to_json
from kredenc.loop.roles.common import (
    RoleTool,
    cached_role,
    charge,
    data_block,
    hits_part,
    llm_json,
    query_of,
    skipped,
)
from kredenc.loop.tool import Services, ToolResult
from kredenc.records import Hit
from kredenc.retrieve.relevance import (  # noqa: F401 (grade's names, kept for callers)
    COEF,
    FEATURES,
    INTERCEPT,
    QUERY_TERMS,
    features,
    query_terms,
    relevance,
    text_stems,
    unit_vectors,
)
from kredenc.storage.index.filters import Filters

if TYPE_CHECKING:
    from kredenc.loop.mind import Mind


def vectors(store: Any, ns: str, hits: Sequence[Hit]) -> dict[str, np.ndarray]:
    """The stored vectors of ``hits`` (id -> unit vector); hits without one are embedded."""
    rowids = store.index.rowids_for(ns, [h.id for h in hits], Filters(include_deprecated=True))
    stored = store.index.vectors_of(list(rowids.values())) if rowids else {}
    out: dict[str, np.ndarray] = {}
    for rid, row in rowids.items():
        if row in stored:
            out[rid] = np.asarray(stored[row], dtype=np.float32)
    lacking = [h for h in hits if h.id not in out]
    if lacking:
        fresh = store.embed_many([h.text for h in lacking])
        for i, h in enumerate(lacking):
            out[h.id] = np.asarray(fresh[i], dtype=np.float32)
    return unit_vectors(out)


def classify(p: float, upper: float, lower: float) -> Verdict:
    if p >= upper:
        return "CORRECT"
    if p < lower:
        return "INCORRECT"
    return "AMBIGUOUS"


def score_hits(store: Any, ns: str, query: str, hits: Sequence[Hit]) -> list[float]:
    """The relevance of each hit to ``query`` (the rules' model)."""
    if not hits:
        return []
    qv = np.asarray(store.embed_query(query), dtype=np.float32)
    return relevance(features(query, hits, qv, vectors(store, ns, hits)))


_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "n": {"type": "integer"},
                    "verdict": {"enum": ["CORRECT", "AMBIGUOUS", "INCORRECT"]},
                    "reason": {"type": "string"},
                },
                "required": ["n", "verdict", "reason"],
            },
        }
    },
    "required": ["verdicts"],
}

_SYSTEM = (
    "You grade retrieved records for a search query. For each record say CORRECT when it "
    "holds information that answers or directly helps answer the query, INCORRECT when it "
    "is off-topic, AMBIGUOUS when it is related but you cannot tell. Give a short reason. "
    'Reply with JSON: {"verdicts": [{"n": <record number>, "verdict": ..., "reason": ...}]}.'
)


def _floats(values: Sequence[float]) -> list[float]:
    return [float(p) for p in values]


def _focus(mind: Mind, query: str) -> str:
    """reflect's focus when :func:`graded` grades against it too, else ""."""
    focus = str(mind.read("reflect.focus", "") or "").strip()
    if not focus or focus == query or int(mind.read("loop.iteration", 1)) < 2:
        return ""
    return focus


def _chunks_part(hits: Sequence[Hit]) -> str:
    """What of each hit shapes its grade: :func:`hits_part` with its legs' ranks."""
    ranks = []
    for hit in hits:
        lex, dense = hit.legs.get("lexical"), hit.legs.get("dense")
        ranks.append([lex.rank if lex else 0, dense.rank if dense else 0])
    return hits_part(hits, ranks)


def graded(mind: Mind, services: Services, query: str, hits: Sequence[Hit]) -> list[float]:
    """Each hit's relevance to the standalone query or, from the second iteration on, to
    reflect's focus (the part of the question the last answer left open, e.g. "attention
    heads" for "How many attention heads does the Transformer use?"), whichever is higher:
    the focus is a sub-question of the same question, and a chunk that answers it is
    relevant to the question though it shares fewer of its words."""
    probs = score_hits(services.store, services.ns, query, hits)
    focus = _focus(mind, query)
    if not hits or not focus:
        return probs
    sub = score_hits(services.store, services.ns, focus, hits)
    return [max(a, b) for a, b in zip(probs, sub, strict=True)]


class Grade(RoleTool):
    name: ClassVar[str] = "grade"
    reads = (
        "ask.question",
        "rewrite.query",
        "retrieve.chunks",
        "decide.retrieve",
        "reflect.focus",
        "loop.iteration",
    )
    writes = ("grade.verdicts",)

    def _inputs(self, mind: Mind) -> tuple[str, list[Hit]] | ToolResult:
        if mind.read("decide.retrieve", True) is False:
            return skipped("no retrieval for this message")
        chunks = mind.read("retrieve.chunks", None)
        if chunks is None:
            return skipped("missing input: retrieve.chunks")
        query = query_of(mind)
        if not query:
            return skipped("missing input: ask.question")
        return query, list(chunks)

    def run_rules(self, mind: Mind, services: Services) -> ToolResult:
        got = self._inputs(mind)
        if isinstance(got, ToolResult):
            return got
        query, hits = got
        upper, lower = services.settings.grade_upper, services.settings.grade_lower

        def compute() -> list[ChunkVerdict]:
            probs = graded(mind, services, query, hits)
            return [
                ChunkVerdict(h.id, classify(p, upper, lower), round(p, 4), f"relevance {p:.2f}")
                for h, p in zip(hits, probs, strict=True)
            ]

        verdicts = cached_role(
            services,
            self.name,
            {"query": query, "focus": _focus(mind, query), "chunks": _chunks_part(hits)},
            compute,
            verdicts_to_json,
            verdicts_from_json,
            copy=list,  # verdicts are frozen: a new list is the caller's own
            shaped_by={
                "grade_upper": upper,
                "grade_lower": lower,
                "coef": COEF,
                "intercept": INTERCEPT,
                "query_terms": QUERY_TERMS,
            },
        )
        mind.write("grade.verdicts", verdicts)
        return ToolResult(note=_count(verdicts))

    def run_llm(self, mind: Mind, services: Services) -> ToolResult:
        got = self._inputs(mind)
        if isinstance(got, ToolResult):
            return got
        query, hits = got
        result = ToolResult()
        # The rules' relevance beside the LLM's verdict: cached like the rules' verdicts.
        probs: list[float] = cached_role(
            services,
            self.name,
            {"query": query, "focus": _focus(mind, query), "chunks": _chunks_part(hits)},
            lambda: graded(mind, services, query, hits),
            _floats,
            _floats,
            copy=_floats,
            shaped_by={"coef": COEF, "intercept": INTERCEPT, "query_terms": QUERY_TERMS},
            implementation="relevance",
        )
        said: dict[int, tuple[Verdict, str]] = {}
        if hits:
            user = f"Query: {query}\n\n{data_block(hits)}"
            data, done = llm_json(services, _SYSTEM, user, _SCHEMA)
            charge(result, done)
            for item in data.get("verdicts", []):
                if isinstance(item, dict) and item.get("verdict") in _CLASSES:
                    said[int(item.get("n", 0))] = (item["verdict"], str(item.get("reason", "")))
        upper, lower = services.settings.grade_upper, services.settings.grade_lower
        verdicts = []
        for n, (hit, p) in enumerate(zip(hits, probs, strict=True), 1):
            verdict, reason = said.get(n, (classify(p, upper, lower), "not graded by the LLM"))
            verdicts.append(ChunkVerdict(hit.id, verdict, round(p, 4), reason))
        mind.write("grade.verdicts", verdicts)
        result.note = _count(verdicts)
        return result


_CLASSES = ("CORRECT", "AMBIGUOUS", "INCORRECT")


def _count(verdicts: Sequence[ChunkVerdict]) -> str:
    counts = dict.fromkeys(_CLASSES, 0)
    for v in verdicts:
        if v.verdict in counts:
            counts[v.verdict] += 1
    return ", ".join(f"{n} {c.lower()}" for c, n in counts.items())
