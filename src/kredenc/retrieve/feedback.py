"""Pseudo-relevance feedback: a second pass of each leg steered by the first pass's
best records (opt-in, the ``feedback`` setting; off by default, see
docs/retrieval.md and docs/benchmarks.md for why).

- **RM3 on the lexical leg.** The top ``docs`` records of the first pass (the fused
  ranking in hybrid mode, the leg's own otherwise) are the feedback set. Each word of
  their texts gets the relevance-model weight ``sum_d P(w | d) * P(d | q)`` (``P(w | d)``
  its share of the record's words, ``P(d | q)`` the record's first-pass score
  normalised over the set), times its idf over the first pass's candidates (the
  records either leg returned: a word every candidate holds says nothing about this
  query). The ``terms`` best words the query lacks are the expansion.
  FTS5's ``bm25()`` weights columns, never single terms, so the expansion is a
  **second OR query** of those words, and the leg becomes the min-max mix
  ``lam * first + (1 - lam) * expansion`` (:func:`~kredenc.retrieve.fuse.weighted_minmax`
  over ``leg_k``). Rescoring the first pass's records instead could never bring in a
  record that holds none of the query's words, which is what feedback is for.
- **Rocchio on the dense leg.** ``q' = alpha * q + beta * mean(top docs vectors)``,
  renormalised, and a second nearest-neighbour query with ``q'`` replaces the leg.

The pipeline (:func:`kredenc.retrieve.search.search`) calls :func:`refine` with
callables for the index reads, so this module knows no index.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kredenc.errors import InvalidInput
from kredenc.retrieve.fuse import weighted_minmax
from kredenc.retrieve.terms import STOPWORDS_EN, phrases, query_terms, tokens
from kredenc.storage.index.lexical import Phrase
from kredenc.storage.index.vectors import F32

FEEDBACK_MODES: tuple[str, ...] = ("none", "rm3", "rocchio", "both")

Ranked = list[tuple[int, float]]


@dataclass(frozen=True)
class Feedback:
    """What the second pass does: ``mode`` (one of :data:`FEEDBACK_MODES`), the size of
    the feedback set ``docs``, the RM3 expansion ``terms`` and the original query's
    share ``lam`` of the lexical leg, and Rocchio's ``alpha`` (query) and ``beta``
    (feedback centroid)."""

    mode: str = "none"
    docs: int = 5
    terms: int = 10
    lam: float = 0.6
    alpha: float = 1.0
    beta: float = 0.5

    @property
    def rm3(self) -> bool:
        return self.mode in ("rm3", "both")

    @property
    def rocchio(self) -> bool:
        return self.mode in ("rocchio", "both")


def check(fb: Feedback) -> Feedback:
    """``fb`` itself, or a one-line :class:`InvalidInput` naming the bad setting."""
    if fb.mode not in FEEDBACK_MODES:
        raise InvalidInput(
            f"unknown feedback {fb.mode!r}", f"use one of {', '.join(FEEDBACK_MODES)}"
        )
    for name, value, lo, hi in (("docs", fb.docs, 1, 100), ("terms", fb.terms, 1, 64)):
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise InvalidInput(f"feedback_{name} must be a whole number {lo}-{hi}, not {value!r}")
    if not 0.0 <= fb.lam <= 1.0:
        raise InvalidInput(f"feedback_lambda must be between 0 and 1, not {fb.lam!r}")
    if fb.alpha < 0 or fb.beta < 0 or fb.alpha + fb.beta <= 0:
        raise InvalidInput(
            f"feedback_alpha and feedback_beta must be >= 0 with a positive sum, "
            f"not {fb.alpha!r} and {fb.beta!r}"
        )
    return fb


def _content(text: str) -> list[str]:
    """A record's words worth expanding with: no stopwords, no numbers, no one- or
    two-letter fragments (FTS5 stems them itself when they come back as phrases)."""
    return [t for t in tokens(text) if len(t) > 2 and not t.isdigit() and t not in STOPWORDS_EN]


def expansion_terms(
    query: str,
    feedback: Sequence[tuple[str, float]],
    pool: Sequence[str],
    n: int,
) -> list[tuple[str, float]]:
    """The ``n`` best RM3 expansion words for ``query`` (best first, with weights that
    sum to 1 over what is returned): ``feedback`` is the feedback set's (text,
    first-pass score) pairs, ``pool`` every candidate's text (the idf's collection).
    Words of the query itself are left out: the first pass already searched them."""
    asked = set(query_terms(query))
    scores = [max(0.0, s) for _, s in feedback]
    total = sum(scores)
    prior = [s / total for s in scores] if total > 0 else [1 / len(feedback)] * len(feedback)
    df: Counter[str] = Counter()
    for text in pool:
        df.update(set(_content(text)))
    n_pool = max(len(pool), 1)
    weights: dict[str, float] = {}
    for (text, _), p_doc in zip(feedback, prior, strict=True):
        words = _content(text)
        if not words:
            continue
        for word, tf in Counter(words).items():
            weights[word] = weights.get(word, 0.0) + p_doc * tf / len(words)
    scored = {
        w: v * math.log((n_pool + 1) / (df.get(w, 0) + 0.5))
        for w, v in weights.items()
        if w not in asked
    }
    best = sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    best = [(w, v) for w, v in best if v > 0]
    norm = sum(v for _, v in best)
    return [(w, v / norm) for w, v in best] if norm > 0 else []


def rocchio(query: F32, vectors: Sequence[F32], alpha: float, beta: float) -> F32:
    """``alpha * query + beta * mean(vectors)`` (each vector at unit length first),
    scaled to unit length (``query`` itself when there are no vectors or the sum is
    zero)."""
    q = np.asarray(query, dtype=np.float32)
    if not vectors:
        return q
    units = [np.asarray(v, dtype=np.float32) for v in vectors]
    units = [v / (float(np.linalg.norm(v)) or 1.0) for v in units]
    centroid = np.mean(np.stack(units), axis=0)
    moved = alpha * q + beta * centroid
    length = float(np.linalg.norm(moved))
    return (moved / length).astype(np.float32) if length > 0 else q


def mix(first: Ranked, second: Ranked, lam: float, depth: int) -> Ranked:
    """The lexical leg after expansion: min-max scores of the first query (``lam``) and
    of the expansion query (``1 - lam``), normalised over ``depth``."""
    if lam >= 1.0 or not second:
        return first
    return weighted_minmax({"q": first, "x": second}, {"q": lam, "x": 1.0 - lam}, depth=depth)[
        : max(depth, len(first))
    ]


@dataclass(frozen=True)
class Reads:
    """What :func:`refine` reads of the index: ``texts(rowids)`` (a record's searchable
    text), ``vectors(rowids)``, ``lexical(phrases)`` and ``dense(vector)`` (a leg's
    second query, as deep and filtered as the first)."""

    texts: Callable[[Sequence[int]], Mapping[int, str]]
    vectors: Callable[[Sequence[int]], Mapping[int, F32]]
    lexical: Callable[[Sequence[Phrase]], Ranked]
    dense: Callable[[F32], Ranked]


def refine(
    fb: Feedback,
    query: str,
    legs: Mapping[str, Ranked],
    first: Ranked,
    query_vector: F32 | None,
    reads: Reads,
    depth: int,
) -> tuple[dict[str, Ranked], list[str]]:
    """The legs after feedback from the first pass ``first`` (best first), and the
    expansion words used (empty without RM3). A leg that is not in ``legs`` stays out;
    with no first pass (nothing found) the legs are returned as they are."""
    out = dict(legs)
    top = [r for r, _ in first[: fb.docs]]
    expansion: list[str] = []
    if not top:
        return out, expansion
    if fb.rm3 and "lexical" in legs:
        pool_ids = list(dict.fromkeys(r for ranked in legs.values() for r, _ in ranked))
        texts = reads.texts(list(dict.fromkeys([*top, *pool_ids])))
        score = dict(first)
        chosen = expansion_terms(
            query,
            [(texts[r], score[r]) for r in top if r in texts],
            [texts[r] for r in pool_ids if r in texts],
            fb.terms,
        )
        expansion = [w for w, _ in chosen]
        if expansion:
            out["lexical"] = mix(legs["lexical"], reads.lexical(phrases(expansion)), fb.lam, depth)
    if fb.rocchio and "dense" in legs and query_vector is not None:
        stored = reads.vectors(top)
        vectors = [stored[r] for r in top if r in stored]
        if vectors:
            out["dense"] = reads.dense(rocchio(query_vector, vectors, fb.alpha, fb.beta))
    return out, expansion
