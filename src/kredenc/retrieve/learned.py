"""Learned fusion (``fusion = "learned"``, opt-in): a logistic regression over each
candidate's features from both legs, fitted offline by ``benchmarks/bench_feedback.py``
(scikit-learn there; the runtime only takes the dot product with :data:`WEIGHTS`).

Features (:data:`FEATURES`, in order), for each record either leg returned:
``lexical`` and ``dense``, the leg's score min-max normalised over ``leg_k`` as the
default fusion normalises it (0 when the leg missed it); ``lexical_rr`` and
``dense_rr``, 1 / rank in the leg (0 when missed); ``both``, 1 when both legs found it;
``cosine``, the dense leg's raw similarity (0 when missed); ``terms``, the share of the
query's words in the record's text; ``title``, the share of them in its title;
``names``, the share of the query's names (capitalised words not opening it) in the
record's text. The record with the larger ``WEIGHTS · features`` ranks first (the
logistic link is monotone, so the probability itself is never needed).

Without the candidates' texts (the recall reflex, which has no time to read them) the
three text features are 0 for every candidate, which shifts every score alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from kredenc.retrieve.fuse import normalised
from kredenc.retrieve.terms import query_terms, tokens

FEATURES: tuple[str, ...] = (
    "lexical",
    "dense",
    "lexical_rr",
    "dense_rr",
    "both",
    "cosine",
    "terms",
    "title",
    "names",
)

#: The shipped coefficients, one per feature, then the intercept. Fitted on
#: 2026-12-04 (branch ``prf``) by ``python benchmarks/bench_feedback.py`` on all five dev
#: sets together (SciFact test, LoCoMo categories 1-4, LongMemEval-S dev66 session
#: level, HotpotQA-200, MuSiQue-200; every candidate of both legs at leg_k 50, labelled
#: by the sets' relevance judgements, each set and each question in it weighted alike;
#: scikit-learn LogisticRegression, C = 1). ``title`` is 0: no eval corpus files titles
#: apart from the text. Its leave-one-set-out figures (docs/benchmarks.md) lose to the
#: default min-max fusion on LoCoMo and win nowhere, hence opt-in.
WEIGHTS: tuple[float, ...] = (
    1.2075,  # lexical
    3.9745,  # dense
    2.0685,  # lexical_rr
    0.1641,  # dense_rr
    1.1037,  # both
    -2.1034,  # cosine
    -0.1095,  # terms
    0.0,  # title
    0.3439,  # names
    -5.4882,  # intercept
)

#: Reads a record's (title, text) by rowid.
TextReader = Callable[[Sequence[int]], Mapping[int, tuple[str, str]]]

_NAME = re.compile(r"(?<!^)(?<![.?!]\s)\b[A-Z][\w'-]*")


def _share(wanted: Sequence[str], text: str) -> float:
    if not wanted:
        return 0.0
    have = set(tokens(text))
    return sum(1 for w in wanted if w in have) / len(wanted)


def names(query: str) -> list[str]:
    """The query's names: capitalised words that do not open it or a sentence, lower-cased."""
    return list(dict.fromkeys(m.group(0).lower() for m in _NAME.finditer(query.strip())))


def features(
    query: str,
    legs: Mapping[str, Sequence[tuple[int, float]]],
    depth: int,
    read: TextReader | None = None,
) -> tuple[list[int], np.ndarray]:
    """The candidates (in first-seen order, legs as given) and their feature rows."""
    rowids = list(dict.fromkeys(r for ranked in legs.values() for r, _ in ranked))
    lexical = legs.get("lexical", [])
    dense = legs.get("dense", [])
    norm_l, norm_d = normalised(lexical, depth), normalised(dense, depth)
    rank_l = {r: n for n, (r, _) in enumerate(lexical, start=1)}
    rank_d = {r: n for n, (r, _) in enumerate(dense, start=1)}
    cosine = dict(dense)
    texts = read(rowids) if read is not None and rowids else {}
    asked = query_terms(query)
    named = names(query)
    rows = np.zeros((len(rowids), len(FEATURES)), dtype=np.float64)
    for i, r in enumerate(rowids):
        title, text = texts.get(r, ("", ""))
        rows[i] = (
            norm_l.get(r, 0.0),
            norm_d.get(r, 0.0),
            1.0 / rank_l[r] if r in rank_l else 0.0,
            1.0 / rank_d[r] if r in rank_d else 0.0,
            1.0 if r in rank_l and r in rank_d else 0.0,
            cosine.get(r, 0.0),
            _share(asked, f"{title} {text}"),
            _share(asked, title),
            _share(named, f"{title} {text}"),
        )
    return rowids, rows


def fuse(
    query: str,
    legs: Mapping[str, Sequence[tuple[int, float]]],
    depth: int,
    read: TextReader | None = None,
    weights: Sequence[float] | None = None,
) -> list[tuple[int, float]]:
    """The candidates ranked by ``weights · features + intercept`` (default
    :data:`WEIGHTS`), best first; ties keep first-seen order."""
    w = np.asarray(WEIGHTS if weights is None else weights, dtype=np.float64)
    if w.shape != (len(FEATURES) + 1,):
        raise ValueError(f"learned fusion needs {len(FEATURES) + 1} weights, not {len(w)}")
    rowids, rows = features(query, legs, depth, read)
    if not rowids:
        return []
    scores = rows @ w[:-1] + w[-1]
    order = sorted(range(len(rowids)), key=lambda i: -scores[i])
    return [(rowids[i], float(scores[i])) for i in order]
