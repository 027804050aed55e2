"""Reading when a message says its event happened (``retrieve.when``)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from kredenc.retrieve.when import DAY, SLACK_DAYS, first_then, since

#: Thursday 9 March 2023, 15:47 UTC.
NOW = datetime(2023, 3, 9, 15, 47, tzinfo=UTC).timestamp()


def day(text: str) -> str:
    found = since(text, NOW)
    assert found is not None, text
    # the start without its day of slack
    return datetime.fromtimestamp(found.start + SLACK_DAYS * DAY, UTC).strftime("%Y-%m-%d %a")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I received a piece of jewelry last Saturday from whom?", "2023-03-04 Sat"),
        ("what did I do yesterday?", "2023-03-08 Wed"),
        ("and the day before yesterday", "2023-03-07 Tue"),
        ("the game I beat last weekend", "2023-03-04 Sat"),
        ("what did we plan last week", "2023-02-27 Mon"),  # the previous calendar week
        ("my spending last month", "2023-02-01 Wed"),
        ("the trip last year", "2022-01-01 Sat"),
        ("anything new this week", "2023-03-06 Mon"),
        ("earlier this month", "2023-03-01 Wed"),
        ("a week ago", "2023-02-27 Mon"),  # 1.5 weeks: the half unit a round number hides
        ("I mentioned visiting a museum two months ago", "2022-12-23 Fri"),
        ("THREE days ago", "2023-03-06 Mon"),
        ("in the past 3 days", "2023-03-06 Mon"),
        ("over the last two weeks", "2023-02-23 Thu"),
    ],
)
def test_a_phrase_names_the_time_its_event_happened_since(text: str, expected: str) -> None:
    assert day(text) == expected


def test_on_a_saturday_last_saturday_and_last_weekend_are_a_week_back() -> None:
    saturday = datetime(2023, 3, 11, 12, 0, tzinfo=UTC).timestamp()
    for text in ("last Saturday", "last weekend"):
        found = since(text, saturday)
        assert found is not None
        start = datetime.fromtimestamp(found.start + DAY, UTC)
        assert start.strftime("%Y-%m-%d") == "2023-03-04"


@pytest.mark.parametrize(
    "text",
    [
        "How many weeks ago did I attend a bird watching workshop?",  # asks for the time
        "how long ago was that",
        "a while ago",
        "months ago",
        "recently",
        "What is my favourite tea?",
        "",
        # a date of the calendar anchors the phrase: it is not relative to now
        "What did Maria participate in last weekend before April 10, 2023?",
        "What did Joanna just finish last Friday on 23 January, 2022?",
        "What was Tim's huge writing issue last week, as mentioned on November 6?",
        "the trip two years ago, in 2019",
    ],
)
def test_no_time_named_gives_none(text: str) -> None:
    assert since(text, NOW) is None


def test_several_phrases_give_the_earliest_with_a_day_of_slack() -> None:
    found = since("yesterday, or was it two weeks ago?", NOW)
    assert found is not None and found.phrase == "two weeks ago"
    assert found.start == pytest.approx(NOW - (2.5 * 7 + SLACK_DAYS) * DAY)


def test_search_asked_at_reads_the_time_and_puts_what_was_filed_since_first(
    tmp_path: Path,
) -> None:
    from kredenc.engine import Kredenc
    from kredenc.errors import InvalidInput
    from kredenc.testing.embedders import HashEmbedder

    asked = 1_700_000_000.0
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        (old,) = kb.file_turns(
            "a", [{"role": "user", "content": "The museum trip: a museum, a museum day.",
                   "at": asked - 150 * DAY}],
        )  # fmt: skip
        (new,) = kb.file_turns(
            "b", [{"role": "user", "content": "I saw a museum alone.", "at": asked - 58 * DAY}]
        )

        def ids(query: str, k: int = 5, **opts: object) -> list[str]:
            return [h.id for h in kb.search(query, k=k, mode="lexical", **opts)]

        assert ids("museum trip") == [old, new]
        assert ids("museum trip two months ago") == [old, new]  # no asked_at: words
        assert ids("museum trip two months ago", asked_at=asked) == [new, old]
        assert ids("museum trip last week", asked_at=asked) == [old, new]  # none since
        assert ids("museum trip two months ago", asked_at=asked, k=1) == [new]
        with pytest.raises(InvalidInput, match="asked_at"):
            kb.search("museum", asked_at="the other day")


def test_what_was_found_since_goes_first_and_each_record_once() -> None:
    since_hits = [(7, 0.9), (3, 0.2)]
    all_hits = [(3, 0.8), (5, 0.7), (7, 0.1), (1, 0.05)]
    merged = first_then(since_hits, all_hits, key=lambda t: t[0])
    assert merged == [(7, 0.9), (3, 0.2), (5, 0.7), (1, 0.05)]
    assert first_then([], all_hits, key=lambda t: t[0]) == all_hits
