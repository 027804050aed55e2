"""Calibrated relevance: the probability that a retrieved record is relevant to the
query, in [0, 1], meaning the same across queries (unlike the rank ``score``, whose
best fused part is always 1.0 under min-max fusion).

One logistic model over features computed per (query, record) (:func:`features`),
shared by search (``Hit.relevance``, ``min_score``) and the answer loop's grade role:

``cos``       the dense cosine of the query and the record (the query embedded once,
              the record's stored vector)
``cos_gap``   ``cos`` minus the best ``cos`` among the records scored together
``coverage``  the IDF-weighted share of the query's content terms the record holds
              (IDF over the records scored together: a term all of them hold says little)
``lex_rr``    1 / rank of the record in the lexical (BM25) leg, 0 when it was not there
``dense_rr``  1 / rank in the dense leg, 0 when not there
``title``     the share of the query's content terms in the record's title

The coefficients (:data:`COEF`) were fitted by ``benchmarks/fit_grade.py`` on hybrid
top-12 lists; search therefore scores at least :data:`WINDOW` fused hits together
(docs/retrieval.md, "Calibrated relevance", has the data, folds and reliability curve).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from kredenc.errors import InvalidInput
from kredenc.records import Hit
from kredenc.retrieve.message_terms import recall_terms, stem_en
from kredenc.retrieve.terms import has_prefix, tokens

FEATURES = ("cos", "cos_gap", "coverage", "lex_rr", "dense_rr", "title")

#: Logistic coefficients over :data:`FEATURES` and the intercept. Provenance:
#: ``benchmarks/fit_grade.py`` (2026-12-02), fitted on all of HotpotQA-200 + 200 SciFact
#: train queries (4,800 retrieved chunks, MiniLM-L6 vectors, hybrid top 12, L2 = 1);
#: 5-fold AUC 0.934, transfer to MuSiQue-200 AUC 0.884 (docs/benchmarks.md).
COEF: tuple[float, ...] = (1.2136, 1.6131, 3.5845, 2.4041, 2.5172, 0.6886)
INTERCEPT: float = -5.031

#: The most content terms of a query the coverage feature counts.
QUERY_TERMS = 24

#: How many fused hits search scores together (the fit's list length): the features
#: ``cos_gap`` and ``coverage`` are relative to the list, so a search for k=3 scores
#: its top 12 and keeps 3, and a hit's relevance does not depend on k (up to k=12).
WINDOW = 12


def query_terms(query: str) -> list[str]:
    """The query's content terms (stopwords and chat filler dropped, lightly stemmed)."""
    return [t.text for t in recall_terms(query, limit=QUERY_TERMS)]


@lru_cache(maxsize=4096)
def text_stems(text: str) -> tuple[str, ...]:
    """The stems of ``text``'s words, sorted and distinct; memoised, as the loop reads
    the same chunks in several searches and steps of one ask (grade's and the search's
    features)."""
    return tuple(sorted({stem_en(w) for w in tokens(text)}))


def has_term(stems: tuple[str, ...], term: str) -> bool:
    """``term`` is one of ``stems`` (sorted), or, from 5 letters on, begins one."""
    if len(term) >= 5:
        return has_prefix(stems, term)
    i = bisect.bisect_left(stems, term)
    return i < len(stems) and stems[i] == term


def list_idf(terms: Sequence[str], stems: Sequence[tuple[str, ...]]) -> dict[str, float]:
    """Each query term's IDF over the records scored together (``stems``, one sorted
    tuple per record): a term all of them hold says little."""
    n = len(stems)
    return {t: math.log((n + 1) / (sum(has_term(s, t) for s in stems) + 0.5)) for t in terms}


def features(
    query: str, hits: Sequence[Hit], query_vec: np.ndarray, chunk_vecs: dict[str, np.ndarray]
) -> list[list[float]]:
    """One row of :data:`FEATURES` per hit (see the module doc)."""
    qv = query_vec / (float(np.linalg.norm(query_vec)) or 1.0)
    terms = query_terms(query)
    stems = [text_stems(h.text) for h in hits]
    idf = list_idf(terms, stems)
    total = sum(idf.values())
    cosines = [float(np.dot(qv, chunk_vecs[h.id])) if h.id in chunk_vecs else 0.0 for h in hits]
    best = max(cosines, default=0.0)
    rows: list[list[float]] = []
    for hit, own, cos in zip(hits, stems, cosines, strict=True):
        coverage = sum(idf[t] for t in terms if has_term(own, t)) / total if total > 0 else 0.0
        title = text_stems(hit.title) if hit.title else ()
        held = sum(has_term(title, t) for t in terms)
        title_share = held / len(terms) if terms and title else 0.0
        lex = hit.legs.get("lexical")
        dense = hit.legs.get("dense")
        rows.append(
            [
                cos,
                cos - best,
                coverage,
                1.0 / lex.rank if lex else 0.0,
                1.0 / dense.rank if dense else 0.0,
                title_share,
            ]
        )
    return rows


def relevance(rows: Sequence[Sequence[float]]) -> list[float]:
    """The calibrated probability of relevance of each feature row."""
    out = []
    for row in rows:
        z = INTERCEPT + sum(c * x for c, x in zip(COEF, row, strict=True))
        out.append(1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z)))))
    return out


def unit_vectors(vectors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each vector scaled to length 1 (a zero vector stays as it is)."""
    out = {}
    for key, v in vectors.items():
        a = np.asarray(v, dtype=np.float32)
        out[key] = a / (float(np.linalg.norm(a)) or 1.0)
    return out


def check_min_score(min_score: object) -> float | None:
    """``min_score`` as a float in [0, 1] (None: no floor), or one clear error."""
    if min_score is None:
        return None
    if isinstance(min_score, bool) or not isinstance(min_score, int | float):
        raise InvalidInput(f"min_score must be a number between 0 and 1, not {min_score!r}")
    value = float(min_score)
    if not 0.0 <= value <= 1.0:
        raise InvalidInput(
            f"min_score must be between 0 and 1, not {min_score!r}",
            "it is a calibrated relevance: 0.5 keeps hits more likely relevant than not",
        )
    return value
