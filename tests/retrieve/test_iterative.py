"""Iterative multi-hop search: bridge rounds through the facade, their fusion and explain()."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.records import Hit
from kredenc.retrieve.iterative import RoundHits, bridge_names, follow, fuse_hits, rest_terms, run

OpenStore = Callable[..., Kredenc]

TOPICS = [
    "budget",
    "hiring",
    "roadmap",
    "design",
    "security",
    "sales",
    "support",
    "legal",
    "travel",
    "marketing",
    "finance",
    "research",
    "planning",
    "review",
    "training",
    "safety",
    "quality",
    "launch",
    "audit",
    "partnership",
]
DISTRACTORS = [
    f"Note {i}: the {t} meeting moved to room {i} on floor {i % 5}." for i, t in enumerate(TOPICS)
]
KISS = "Kiss and Tell is a 1945 American comedy film starring Shirley Temple as Corliss Archer."
TEMPLE = "Shirley Temple Black served as United States ambassador to Ghana and Czechoslovakia."
GHANA = "Ghana won its independence in 1957 under Kwame Nkrumah."
QUESTION = (
    "What government position was held by the woman who portrayed Corliss Archer "
    "in the film Kiss and Tell?"
)


@pytest.fixture
def kb(open_store: OpenStore) -> Kredenc:
    kb = open_store()
    kb.remember_many([{"text": t} for t in [*DISTRACTORS, KISS, TEMPLE, GHANA]])
    return kb


def texts(hits: list[Hit]) -> list[str]:
    return [h.text for h in hits]


def test_the_second_hop_is_reached_only_through_the_first(kb: Kredenc) -> None:
    with kb:
        plain = kb.search(QUESTION, k=4)
        assert KISS in texts(plain) and TEMPLE not in texts(plain)  # the legs miss it
        assert TEMPLE not in texts(kb.search(QUESTION, k=4, hops=1))  # no edges to walk
        found = kb.search(QUESTION, k=4, hops=1, iterative=True)
        assert isinstance(found, RoundHits)
        assert KISS in texts(found) and TEMPLE in texts(found)
        first, second = found.rounds
        assert first.queries == (QUESTION,) and first.hop == 0
        assert second.hop == 1 and "Shirley Temple" in second.bridges
        assert any(q.startswith("Shirley Temple ") for q in second.queries)
        assert found.found_by[next(h.id for h in found if h.text == TEMPLE)][0] == 1
        assert found.searches == 1 + len(second.queries)


def test_hops_zero_is_the_plain_search(kb: Kredenc) -> None:
    with kb:
        plain = kb.search(QUESTION, k=5)
        found = kb.search(QUESTION, k=5, iterative=True)
        assert [h.id for h in found] == [h.id for h in plain]
        assert len(found.rounds) == 1 and found.searches == 1  # type: ignore[attr-defined]


def test_a_third_hop_follows_the_second_and_explain_says_each_round(kb: Kredenc) -> None:
    with kb:
        two = kb.search(QUESTION, k=6, hops=1, iterative=True)
        assert GHANA not in texts(two)
        three = kb.search(QUESTION, k=6, hops=2, iterative=True)
        assert GHANA in texts(three)
        assert isinstance(three, RoundHits) and "Ghana" in three.rounds[2].bridges
        lines = three.explain().splitlines()
        assert lines[0].startswith(f"round 0: searched {QUESTION!r}")
        assert lines[1].startswith("round 1: searched 'Shirley Temple")
        assert "bridges 'Shirley Temple'" in lines[1] and "new" in lines[1]
        assert lines[2].startswith("round 2: ")


def test_follow_stops_at_a_round_with_nothing_new() -> None:
    a = Hit(id="a", text="Alpha Centauri is near Proxima.", score=1.0, kind="n", drawer="d")
    calls: list[str] = []

    def find(q: str) -> list[Hit]:
        calls.append(q)
        return [a]  # every bridge query finds what the question found

    out = follow("where is alpha", [a], find, hops=3)
    assert len(out.rounds) == 1 and out.rounds[0].new == 0 and out.rounds[0].hits == 2
    assert calls == ["Alpha Centauri alpha", "Proxima alpha"]  # name + the query's rest
    assert rest_terms("Which star is nearest to Alpha Centauri?") == "star nearest"
    calls.clear()
    found = run(find, "where is alpha", hops=3, k=5)
    assert [h.id for h in found] == ["a"] and found.searches == len(calls) == 3
    assert [r.hop for r in found.rounds] == [0, 1]
    assert found.explain().endswith("stopped: round 1 brought nothing new")


def test_bridge_names_prefer_titles_and_skip_what_the_query_holds() -> None:
    hits = [
        Hit(id="1", text="It stars Shirley Temple.", score=1.0, kind="", drawer="", title="Kiss"),
        Hit(id="2", text="Shirley Temple and Ghana.", score=0.5, kind="", drawer=""),
    ]
    assert bridge_names("the film Kiss", hits, set()) == ["Shirley Temple", "Ghana"]
    assert bridge_names("the film Kiss", hits, {"shirley temple"}) == ["Ghana"]


def _h(i: str) -> Hit:
    return Hit(id=i, text=i, score=0.0, kind="n", drawer="d")


def test_fuse_hits_interleaves_weights_rounds_or_sums_ranks() -> None:
    a, b, c, d = _h("a"), _h("b"), _h("c"), _h("d")
    assert [h.id for h in fuse_hits([[a, b, d], [c, b]])] == ["a", "c", "b", "d"]
    assert [h.id for h in fuse_hits([[b, a], [a, c]])] == ["b", "a", "c"]  # best rank wins
    # a later round weighted 0.4: its best (0.4) comes after the question's second (0.5)
    assert [h.id for h in fuse_hits([[a, b, d], [c]], weights=[1.0, 0.4])] == ["a", "b", "c", "d"]
    assert [h.id for h in fuse_hits([[a, b], [b, c]], fusion="rrf")] == ["b", "a", "c"]
    with pytest.raises(ValueError):
        fuse_hits([[a]], fusion="sum")
    # one list: its order, the first copy of an id (as the weighted path orders it)
    a2 = _h("a")
    one = fuse_hits([[a, b, a2, c]], limit=2)
    assert [h.id for h in one] == ["a", "b"] and one[0] is a
    assert [h.id for h in fuse_hits([[a, b, a2, c]])] == [
        h.id for h in fuse_hits([[a, b, a2, c]], weights=[1.0])
    ]


def test_iterative_hops_are_bounded_and_min_score_applies(kb: Kredenc) -> None:
    with kb:
        with pytest.raises(InvalidInput, match="hops must be between 0 and 3"):
            kb.search(QUESTION, hops=4, iterative=True)
        kept = kb.search(QUESTION, k=5, hops=1, iterative=True, min_score=0.3)
        assert all(h.relevance is not None and h.relevance >= 0.3 for h in kept)
        assert isinstance(kept, RoundHits)
