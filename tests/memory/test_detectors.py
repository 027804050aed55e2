"""The deterministic seams: contradiction rules on a labelled set, extractive summaries."""

from __future__ import annotations

import pytest

from kredenc.memory.detectors import (
    Contradiction,
    ContradictionDetector,
    ExtractiveSummariser,
    RuleDetector,
    Summariser,
)

# (older, newer, expected kind) — each pair contradicts.
POSITIVE = [
    ("Alice likes green tea", "Alice does not like green tea", "negation"),
    ("The server is running on port 8080", "The server isn't running on port 8080", "negation"),
    ("Bob works at the Budapest office", "Bob no longer works at the Budapest office", "negation"),
    ("Anna eszik húst", "Anna nem eszik húst", "negation"),
    (
        "The pharmacy on Main Street is open on Sundays",
        "The pharmacy on Main Street is closed on Sundays",
        "antonym",
    ),
    ("The garage light is on", "The garage light is off", "antonym"),
    ("The staging build works", "The staging build is broken", "antonym"),
    ("The claim in the report is true", "The claim in the report is false", "antonym"),
    ("Carol dislikes spicy food", "Carol likes spicy food", "antonym"),
    ("The office opens at 9 am", "The office opens at 10 am", "number"),
    ("The meeting room holds 12 people", "The meeting room holds 20 people", "number"),
    ("Dave's flat rent is 1200 euros a month", "Dave's flat rent is 950 euros a month", "number"),
    ("The product launch is on March 3", "The product launch is on March 5", "date"),
    ("The conference takes place in May", "The conference takes place in June", "date"),
    ("Weekly sync happens every Monday", "Weekly sync happens every Thursday", "date"),
    ("The contract was signed on 2024-05-01", "The contract was signed on 2024-06-12", "date"),
    ("Eve was born in 1990", "Eve was born in 1992", "date"),
]

# Similar-looking pairs that do not contradict.
NEGATIVE = [
    ("Alice likes green tea", "Alice really likes green tea"),  # paraphrase
    ("The door is not open", "The door is closed"),  # a negated antonym agrees
    ("Bob does not like coffee", "Bob likes tea"),  # different objects
    ("The front door is open", "The back window is closed"),  # different subjects
    ("Ticket 123 is closed", "Ticket 456 is closed"),  # identifiers, not quantities
    ("Room 12 is on floor 3", "Room 14 is on floor 3"),  # identifiers again
    ("The office opens at 9 am", "Our office opens at 9 am on weekdays"),  # elaboration
    ("I have 2 cats", "I have cats and a dog"),  # a number on one side only
    ("The launch is in May", "The launch may slip"),  # 'may' the verb is not a month
    ("Carol never eats meat", "Carol never eats fish"),  # both negative, other object
    ("The server is running", "The server is running smoothly again"),
    ("We met on Monday to plan the release", "We met on Monday to plan the release notes"),
    ("The meeting is on Monday", "The meeting is on Monday at the office"),
    ("Dave moved to Berlin in 2020", "Dave moved to Berlin"),  # a date on one side only
    ("I bought 3 apples", "I bought 3 apples and 2 pears"),  # more detail, not a change
]


@pytest.mark.parametrize(("older", "newer", "kind"), POSITIVE)
def test_positive_pairs_contradict(older: str, newer: str, kind: str) -> None:
    found = RuleDetector().detect(older, newer)
    assert found is not None, (older, newer)
    assert found.kind == kind, found
    assert found.reason


@pytest.mark.parametrize(("older", "newer"), NEGATIVE)
def test_negative_pairs_do_not(older: str, newer: str) -> None:
    assert RuleDetector().detect(older, newer) is None
    assert RuleDetector().detect(newer, older) is None


def test_precision_on_the_labelled_set() -> None:
    detector = RuleDetector()
    labelled = [(a, b, True) for a, b, _ in POSITIVE] + [(a, b, False) for a, b in NEGATIVE]
    assert len(POSITIVE) >= 10 and len(NEGATIVE) >= 10
    predicted = [(detector.detect(a, b) is not None, truth) for a, b, truth in labelled]
    true_pos = sum(p and t for p, t in predicted)
    false_pos = sum(p and not t for p, t in predicted)
    false_neg = sum(t and not p for p, t in predicted)
    assert (true_pos, false_pos, false_neg) == (len(POSITIVE), 0, 0)


def test_symmetry_of_the_rules() -> None:
    for older, newer, _ in POSITIVE:
        assert RuleDetector().detect(newer, older) is not None


def test_defaults_satisfy_the_protocols() -> None:
    assert isinstance(RuleDetector(), ContradictionDetector)
    assert isinstance(ExtractiveSummariser(), Summariser)
    assert Contradiction("negation", "x").kind == "negation"


def test_extractive_summary_picks_central_sentences_within_budget() -> None:
    texts = [
        "We planned the kestrel survey at the water tower. The van was late.",
        "The kestrel survey at the water tower counted four chicks.",
        "Lunch was sandwiches.",
        "The kestrel survey at the water tower counted four chicks.",  # a duplicate
        "Next kestrel survey at the water tower is in June.",
    ]
    summary = ExtractiveSummariser().summarise(texts, max_chars=160)
    assert 0 < len(summary) <= 160
    assert "kestrel" in summary
    assert "Lunch" not in summary
    assert summary.count("counted four chicks") == 1
    # Picks keep their filing order.
    assert summary.index("planned") < summary.index("four chicks") if "planned" in summary else True


def test_summary_edge_cases() -> None:
    s = ExtractiveSummariser()
    assert s.summarise([]) == ""
    assert s.summarise(["   "]) == ""
    assert s.summarise(["hello"], max_chars=0) == ""
    long = " ".join(["word"] * 200)
    out = s.summarise([long], max_chars=50)
    assert len(out) <= 50 and out.endswith("…")
