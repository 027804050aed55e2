"""Pseudo-relevance feedback (RM3 on words, Rocchio on vectors) and the learned fusion."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.records import Hit
from kredenc.retrieve import feedback as prf
from kredenc.retrieve import learned
from kredenc.retrieve.fuse import weighted_minmax
from kredenc.retrieve.search import SearchParams, validate
from kredenc.storage.index.lexical import Phrase
from kredenc.storage.index.vectors import F32
from kredenc.testing.embedders import HashEmbedder

BIRDS = [
    "the kestrel hovers over the cliff before it dives at a vole",
    "a kestrel nests on the cliff ledge above the quarry",
    "peregrine falcons nest on the quarry cliff ledge too",  # no query word
    "the invoice for the quarterly budget review is due",
    "coffee with the project team in berlin on monday",
    "sqlite keeps the vector index beside the memory log",
]


def open_store(home: Path, **settings: object) -> Kredenc:
    return Kredenc.open(home, embedder=HashEmbedder(), durability="none", **settings)


def texts(hits: Sequence[Hit]) -> list[str]:
    return [h.text for h in hits]


def view(hits: Sequence[Hit]) -> list[tuple[str, float, dict[str, tuple[int, float]]]]:
    return [(h.text, h.score, {n: (v.rank, v.score) for n, v in h.legs.items()}) for h in hits]


def test_expansion_terms_come_from_the_feedback_records() -> None:
    feedback = [(BIRDS[0], 1.0), (BIRDS[1], 0.5)]
    terms = prf.expansion_terms("kestrel", feedback, [*BIRDS[:2], BIRDS[3]], 5)
    words = [w for w, _ in terms]
    assert "kestrel" not in words  # the query's own word was searched already
    assert {"cliff"} <= set(words)
    assert all(w in (BIRDS[0] + BIRDS[1]) for w in words)
    assert "invoice" not in words  # only in the pool, not in the feedback set
    assert abs(sum(v for _, v in terms) - 1.0) < 1e-9
    # The better-scored record's own words outweigh the other's.
    weight = dict(terms)
    assert weight.get("hovers", 0.0) > weight.get("nests", 0.0)


def test_rm3_pulls_in_a_record_without_the_query_word(tmp_path: Path) -> None:
    with open_store(tmp_path / "off") as plain:
        plain.remember_many([{"text": t} for t in BIRDS])
        before = texts(plain.search("kestrel", k=5, mode="lexical"))
    with open_store(tmp_path / "rm3", feedback="rm3", feedback_docs=2, feedback_lambda=0.5) as kb:
        kb.remember_many([{"text": t} for t in BIRDS])
        after = texts(kb.search("kestrel", k=5, mode="lexical"))
        hybrid = texts(kb.search("kestrel", k=3))
    assert BIRDS[2] not in before and set(before) == {BIRDS[0], BIRDS[1]}
    assert BIRDS[2] in after  # shares "cliff", "ledge", "quarry", "nest" with the feedback
    assert after.index(BIRDS[2]) > max(after.index(BIRDS[0]), after.index(BIRDS[1]))
    assert BIRDS[3] not in after  # shares nothing with them
    assert BIRDS[2] in hybrid


def test_rocchio_moves_the_query_vector_toward_the_feedback_set() -> None:
    rng = np.random.default_rng(3)
    q = rng.normal(size=16).astype(np.float32)
    q /= np.linalg.norm(q)
    fb = [rng.normal(size=16).astype(np.float32) * 3 for _ in range(4)]
    centroid = np.mean([v / np.linalg.norm(v) for v in fb], axis=0)
    moved = prf.rocchio(q, fb, alpha=1.0, beta=0.75)

    def cos(a: np.ndarray, b: np.ndarray) -> float:
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))

    assert abs(float(np.linalg.norm(moved)) - 1.0) < 1e-5
    assert cos(moved, centroid) > cos(q, centroid)
    assert cos(prf.rocchio(q, fb, 1.0, 2.0), centroid) > cos(moved, centroid)
    assert np.array_equal(prf.rocchio(q, [], 1.0, 0.5), q)


def test_refine_queries_the_dense_leg_again_with_the_moved_vector() -> None:
    q = np.array([1.0, 0.0], dtype=np.float32)
    stored = {1: np.array([0.0, 1.0], dtype=np.float32), 2: np.array([1.0, 0.0], dtype=np.float32)}
    asked: list[F32] = []

    def dense(v: F32) -> list[tuple[int, float]]:
        asked.append(v)
        return [(3, 0.9)]

    def lexical(_: Sequence[Phrase]) -> list[tuple[int, float]]:
        raise AssertionError("rocchio alone runs no second lexical query")

    reads = prf.Reads(texts=lambda r: {}, vectors=lambda r: stored, lexical=lexical, dense=dense)
    legs = {"lexical": [(1, 2.0)], "dense": [(2, 1.0), (1, 0.5)]}
    out, words = prf.refine(
        prf.Feedback(mode="rocchio", docs=1), "q", legs, [(1, 1.0)], q, reads, 50
    )
    assert out["dense"] == [(3, 0.9)] and out["lexical"] == legs["lexical"] and words == []
    (v,) = asked
    assert v[1] > 0 and abs(float(np.linalg.norm(v)) - 1.0) < 1e-6  # toward record 1


def test_feedback_off_changes_nothing(tmp_path: Path) -> None:
    """feedback = "none" is today's search, whatever the other feedback settings say."""
    with (
        open_store(tmp_path / "a") as a,
        open_store(
            tmp_path / "b", feedback="none", feedback_docs=2, feedback_lambda=0.1, feedback_beta=3.0
        ) as b,
    ):
        for kb in (a, b):
            kb.remember_many([{"text": t} for t in BIRDS])
        for query in ("kestrel", "cliff ledge", "budget", "zzz"):
            for mode in ("hybrid", "lexical", "dense"):
                assert view(a.search(query, k=5, mode=mode)) == view(
                    b.search(query, k=5, mode=mode)
                )
        hits = a.search("kestrel", k=6)
        legs = {
            n: sorted((h.legs[n].rank, h.id, h.legs[n].score) for h in hits if n in h.legs)
            for n in ("dense", "lexical")
        }
        ranked = {n: [(rid, score) for _, rid, score in leg] for n, leg in legs.items()}
        assert len(hits) == len(BIRDS) and len(ranked["lexical"]) == 2
        assert [h for h, _ in weighted_minmax(ranked, {"dense": 0.4, "lexical": 0.6}, 50)] == [
            h.id for h in hits
        ]


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("feedback", "rm4"),
        ("feedback_docs", 0),
        ("feedback_terms", 65),
        ("feedback_lambda", 1.5),
        ("feedback_beta", -1.0),
        ("fusion", "neural"),
    ],
)
def test_bad_settings_are_one_line_errors(tmp_path: Path, setting: str, value: object) -> None:
    with pytest.raises(InvalidInput) as err:
        open_store(tmp_path / "s", **{setting: value})
    assert setting in str(err.value) and "\n" not in str(err.value)


def test_bad_feedback_params_are_one_line_errors() -> None:
    for fb, word in (
        (prf.Feedback(mode="all"), "feedback"),
        (prf.Feedback(docs=0), "feedback_docs"),
        (prf.Feedback(terms=True), "feedback_terms"),
        (prf.Feedback(lam=-0.1), "feedback_lambda"),
        (prf.Feedback(alpha=0.0, beta=0.0), "feedback_alpha"),
    ):
        with pytest.raises(InvalidInput) as err:
            validate("q", SearchParams(feedback=fb))
        assert word in str(err.value) and "\n" not in str(err.value)


def test_learned_features_and_ranking() -> None:
    legs = {"lexical": [(1, 8.0), (2, 4.0), (3, 0.0)], "dense": [(2, 0.9), (4, 0.5)]}
    read = {1: ("", "kestrel"), 2: ("Kestrel Falco", "a kestrel and a falcon"), 3: ("", "x")}
    rowids, rows = learned.features("where do Kestrel nest", legs, 50, lambda r: read)
    assert rowids == [1, 2, 3, 4]
    f = {name: rows[:, i].tolist() for i, name in enumerate(learned.FEATURES)}
    assert f["lexical"] == [1.0, 0.5, 0.0, 0.0] and f["dense"] == [0.0, 1.0, 0.0, 0.0]
    assert f["lexical_rr"] == [1.0, 0.5, 1 / 3, 0.0] and f["dense_rr"] == [0.0, 1.0, 0.0, 0.5]
    assert f["both"] == [0.0, 1.0, 0.0, 0.0] and f["cosine"] == [0.0, 0.9, 0.0, 0.5]
    assert f["terms"] == [0.5, 0.5, 0.0, 0.0]  # "kestrel" of "kestrel", "nest"
    assert f["title"] == [0.0, 0.5, 0.0, 0.0] and f["names"] == [1.0, 1.0, 0.0, 0.0]
    # Weights on the title alone put the titled record first, whatever the legs say.
    only_title = [0.0] * len(learned.FEATURES) + [0.0]
    only_title[learned.FEATURES.index("title")] = 1.0
    assert learned.fuse("where do Kestrel nest", legs, 50, lambda r: read, only_title)[0][0] == 2
    with pytest.raises(ValueError, match="weights"):
        learned.fuse("q", legs, 50, None, [1.0])


def test_learned_fusion_through_search(tmp_path: Path) -> None:
    with open_store(tmp_path / "s", fusion="learned") as kb:
        kb.remember_many([{"text": t} for t in BIRDS])
        hits = kb.search("kestrel cliff", k=3)
    assert hits and all(("kestrel" in h.text or "cliff" in h.text) for h in hits[:2])
