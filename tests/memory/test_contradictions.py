"""Contradictions in a real store: candidates by vector, the rules decide, effects logged."""

from __future__ import annotations

from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.memory.detectors import Contradiction
from kredenc.memory.lifecycle.contradictions import run_contradictions

from ._support import HOUR, T0, Clock

PHARMACY_OPEN = "The pharmacy on Main Street near the old station is open on Sundays"
PHARMACY_CLOSED = "The pharmacy on Main Street near the old station is closed on Sundays"
TEA = "Alice from the accounting team on the third floor likes green tea in the morning"
NO_TEA = "Alice from the accounting team on the third floor does not like green tea in the morning"
NINE = "The weekly planning meeting of the platform team starts at 9 in the big room"
TEN = "The weekly planning meeting of the platform team starts at 10 in the big room"
HOLIDAYS = "The pharmacy on Main Street near the old station is open on Sundays and holidays"


def file(kb: Kredenc, clock: Clock, text: str, **fields: Any) -> str:
    clock.t += HOUR
    return kb.remember(text, **fields).id


def score_records(kb: Kredenc) -> list[dict[str, Any]]:
    return [r.payload for r in kb.haystack.iter_from() if r.payload.get("op") == "score"]


def test_older_is_disputed_and_newer_points_at_it(kb: Kredenc, clock: Clock) -> None:
    open_ = file(kb, clock, PHARMACY_OPEN)
    tea = file(kb, clock, TEA)
    nine = file(kb, clock, NINE)
    file(kb, clock, "Bob keeps the spare keys of the van in the blue drawer")
    closed = file(kb, clock, PHARMACY_CLOSED)
    no_tea = file(kb, clock, NO_TEA)
    ten = file(kb, clock, TEN)

    report = run_contradictions(kb.store, kb.namespace)
    assert report.examined == 7 and report.changed == 3
    found = {(d["older"], d["newer"]): d["kind"] for d in report.details}
    assert found == {(open_, closed): "antonym", (tea, no_tea): "negation", (nine, ten): "number"}
    for older, newer in [(open_, closed), (tea, no_tea), (nine, ten)]:
        assert kb.get(older).status == "disputed"
        assert kb.get(newer).status == "unvalidated"
        edges = kb.index.edges_among(kb.namespace, [older, newer])
        assert edges == [(newer, older, "contradicts", 1.0)]
    reasons = {r["id"]: r["reason"] for r in score_records(kb)}
    assert reasons[open_].startswith(f"contradicted by {closed}: opposite terms")
    assert reasons[nine] == f"contradicted by {ten}: different numbers (9 vs 10)"

    end = kb.haystack.end
    again = run_contradictions(kb.store, kb.namespace)
    assert again.changed == 0 and kb.haystack.end == end  # no duplicate edges or records


def test_holiday_elaboration_is_not_a_contradiction(kb: Kredenc, clock: Clock) -> None:
    a = file(kb, clock, PHARMACY_OPEN)
    b = file(kb, clock, HOLIDAYS)
    assert run_contradictions(kb.store, kb.namespace).changed == 0
    assert kb.get(a).status == kb.get(b).status == "unvalidated"


def test_threshold_limits_candidates(kb: Kredenc, clock: Clock) -> None:
    file(kb, clock, TEA)
    file(kb, clock, NO_TEA)  # cosine about 0.85 with the hash embedder
    # Both thresholds: the rules' (min_similarity) and the conflict check's.
    limits = {"min_similarity": 0.9, "conflict_similarity": 0.9}
    assert run_contradictions(kb.store, kb.namespace, **limits).changed == 0
    assert run_contradictions(kb.store, kb.namespace, min_similarity=0.8).changed == 1


def test_the_conflict_check_looks_below_the_rules_threshold(kb: Kredenc, clock: Clock) -> None:
    file(kb, clock, TEA)
    file(kb, clock, NO_TEA)
    report = run_contradictions(kb.store, kb.namespace, min_similarity=0.9)
    assert report.changed == 1
    assert report.details[0]["kind"] == "polarity"


def test_validated_or_read_only_older_keeps_its_status(kb: Kredenc, clock: Clock) -> None:
    checked = file(kb, clock, PHARMACY_OPEN, status="validated")
    doubt = file(kb, clock, PHARMACY_CLOSED)
    rule = file(kb, clock, NINE, read_only=True)
    other = file(kb, clock, TEN)
    run_contradictions(kb.store, kb.namespace)
    assert kb.get(checked).status == "validated"
    assert kb.get(doubt).status == "disputed"
    assert kb.get(rule).status == "unvalidated"
    assert kb.get(other).status == "disputed"
    assert kb.index.edges_among(kb.namespace, [checked, doubt]) == [
        (doubt, checked, "contradicts", 1.0)
    ]


def test_already_related_pairs_and_deprecated_memories_are_skipped(
    kb: Kredenc, clock: Clock
) -> None:
    a = file(kb, clock, PHARMACY_OPEN)
    b = file(kb, clock, PHARMACY_CLOSED)
    kb.relate(a, b, "contradicts")  # a person said so already, the other way round
    c = file(kb, clock, NINE, status="deprecated")
    file(kb, clock, TEN)
    report = run_contradictions(kb.store, kb.namespace)
    assert report.changed == 0
    assert kb.get(a).status == "unvalidated"
    assert kb.get(c).status == "deprecated"


def test_the_detector_is_a_seam(kb: Kredenc, clock: Clock) -> None:
    calls: list[tuple[str, str]] = []

    class Everything:
        def detect(self, older: str, newer: str) -> Contradiction | None:
            calls.append((older, newer))
            return Contradiction("model", "the scripted model says so")

    first = file(kb, clock, PHARMACY_OPEN)
    second = file(kb, clock, HOLIDAYS)
    report = run_contradictions(kb.store, kb.namespace, detector=Everything())
    assert calls == [(PHARMACY_OPEN, HOLIDAYS)]  # older first
    assert report.details[0]["kind"] == "model"
    assert kb.get(first).status == "disputed" and kb.get(second).status == "unvalidated"


def test_one_dispute_record_per_memory_per_run(kb: Kredenc, clock: Clock) -> None:
    clock.t = T0
    a = file(kb, clock, PHARMACY_OPEN)
    file(kb, clock, PHARMACY_CLOSED)
    file(kb, clock, "The pharmacy on Main Street near the old station is shut on Sundays")
    run_contradictions(kb.store, kb.namespace)
    assert [r["id"] for r in score_records(kb)].count(a) == 1
    assert len(kb.index.sources_of(kb.namespace, a, "contradicts")) == 2


def test_bad_parameters(kb: Kredenc) -> None:
    with pytest.raises(InvalidInput):
        run_contradictions(kb.store, kb.namespace, min_similarity=2.0)
    with pytest.raises(InvalidInput):
        run_contradictions(kb.store, kb.namespace, neighbours=0)


# -- polarity conflicts over MiniLM vectors (issue 14) ------------------------------

POLARITY = [
    ("The user drinks green tea, never coffee", "The user switched to black coffee in June"),
    ("Bob does not own a car", "Bob drives his own car to work every day"),
    ("The user never flies; they always take the train", "The user flies to Berlin every month"),
    ("Anna avoids meat entirely", "Anna ordered meat at the steakhouse on Friday"),
    ("The team does not use Windows", "The team installed Windows on every laptop"),
]
# Similar memories that agree (paraphrases, compatible details, both negative).
COMPATIBLE = [
    ("Carol prefers green tea in the morning", "Carol drinks green tea after lunch too"),
    ("Dave doesn't have a bike", "Dave has no bike and takes the tram to work"),
    ("Erik started drinking espresso in May", "In May Erik switched to espresso"),
    ("Fiona lives in Budapest", "Fiona has lived in Budapest since 2019"),
    ("Gabor never eats fish", "Gabor does not eat fish on Fridays either"),
]


@pytest.fixture(scope="module")
def minilm() -> Any:
    from kredenc.providers.embed.minilm import MiniLMEmbedder

    return MiniLMEmbedder(intra_op_num_threads=1)


def test_polarity_conflicts_are_found_below_the_rules_threshold(tmp_path: Any, minilm: Any) -> None:
    with Kredenc.open(tmp_path / "s", embedder=minilm, durability="none") as kb:
        clock = Clock(T0)
        kb.store.clock = clock
        ids = {}
        for older, newer in POLARITY + COMPATIBLE:
            ids[older] = file(kb, clock, older)
            ids[newer] = file(kb, clock, newer)
        report = run_contradictions(kb.store, kb.namespace)
        found = {(d["older"], d["newer"]) for d in report.details}
        expected = {(ids[a], ids[b]) for a, b in POLARITY}
        assert found == expected  # every conflict, and nothing among the compatible pairs
        # MiniLM sees these pairs as only moderately similar: the rules' 0.8 alone
        # would have found none of them.
        assert all(d["similarity"] < 0.8 for d in report.details)
        assert {d["kind"] for d in report.details} == {"polarity"}
        for a, _ in POLARITY:
            assert kb.get(ids[a]).status == "disputed"
