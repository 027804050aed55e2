"""When a message says something happened: "two months ago", "last Saturday".

:func:`since` reads a message for a time relative to ``now`` (English phrases, below)
and returns the earliest time a record of that event can bear: the event happened in
the time the phrase names, and a record of it was filed then or later (told the same
day or weeks after), never before. Recall puts the records filed since that time ahead
of older ones (:mod:`kredenc.recall.reflex`); nothing else changes, so a store whose
records were all filed after the time, or a message with no such phrase, recalls as
before.

The phrases, each with the time it starts at (UTC days; a day of slack before it, as a
date said in one time zone may be filed in another):

* ``N days|weeks|months|years ago`` (``N`` a number or a word: "a", "two", "a couple
  of", "a few"): ``now - (N + 1/2)`` of the unit, the half a unit a rounded "two
  months" may hide;
* ``in the last|past N days|weeks|months|years``: ``now - N`` of the unit;
* ``yesterday``; ``the day before yesterday``;
* ``last|this past <weekday>``: the latest such day before today;
* ``last week|weekend|month|year``: the start of the previous calendar week (Monday),
  weekend (Saturday), month or year;
* ``this|earlier this week|month|year``: the start of the current one.

A question that asks *how long ago* ("how many weeks ago did I...") names no count and
gives None, as do vague phrases ("recently", "a while ago", "months ago"), and so does a
message that names a date of the calendar beside its phrase (within :data:`REACH`
characters: "last weekend before April 10, 2023", "last week, as mentioned on November
6"): the phrase is relative to that date, not to now, and the date itself is the
search's to match.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

DAY = 86_400.0
#: Average lengths of the units, in days (a month is a twelfth of a year).
UNIT_DAYS = {"day": 1.0, "week": 7.0, "month": 365.2425 / 12, "year": 365.2425}
#: Slack before the start: a date said in one time zone may be filed in another.
SLACK_DAYS = 1.0

_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "a couple": 2, "a few": 3, "couple of": 2, "few": 3,
}  # fmt: skip
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_COUNT = (
    r"(\d{1,3}|a couple of|a couple|couple of|a few|few|an|a|one|two|three|four|five|six"
    r"|seven|eight|nine|ten|eleven|twelve)"
)
_UNIT = r"(day|week|month|year)s?"
_AGO = re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b")
_WITHIN = re.compile(rf"\b(?:in|over|during|within)\s+the\s+(?:last|past)\s+{_COUNT}\s+{_UNIT}\b")
_BEFORE_YESTERDAY = re.compile(r"\bthe\s+day\s+before\s+yesterday\b")
_YESTERDAY = re.compile(r"\byesterday\b")
_LAST_DAY = re.compile(rf"\b(?:last|this\s+past)\s+({'|'.join(_WEEKDAYS)})\b")
_LAST = re.compile(r"\b(?:last|this\s+past)\s+(week|weekend|month|year)\b")
_THIS = re.compile(r"\b(?:earlier\s+)?this\s+(week|month|year)\b")
_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
#: A date of the calendar ("April 10, 2023", "23 January", "2023-03-01", "in 2022"):
#: a relative phrase beside one is read against it, not against now.
_ABSOLUTE = re.compile(
    rf"\b(?:{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?"
    rf"{_MONTHS}\b|{_MONTHS}\s+\d{{4}}\b|(?:19|20)\d{{2}}\b)"
)


#: Every phrase holds one of these words; only the text around them is read.
_CUES = ("ago", "yesterday", "last", "past", "this")
#: How far around a cue a phrase, or a calendar date that anchors it, is looked for.
REACH = 60


@dataclass(frozen=True)
class Since:
    """The earliest time (Unix seconds) a record of the event can bear, and the phrase."""

    start: float
    phrase: str


def since(text: str, now: float) -> Since | None:
    """The time ``text`` says its event happened since (see the module), relative to
    ``now`` (Unix seconds); None when it names none. With several phrases, the
    earliest start (a record of any of them may be wanted). Only the text around the
    words a phrase needs is read (a long message costs a few substring searches)."""
    today = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    found: list[Since] = []
    for part in _around_cues(text):
        if not _ABSOLUTE.search(part):  # a date of the calendar anchors the phrase
            found += _phrases(part, now, today)
    if not found:
        return None
    first = min(found, key=lambda s: s.start)
    return Since(first.start - SLACK_DAYS * DAY, first.phrase)


T = TypeVar("T")


def first_then(first: Sequence[T], then: Iterable[T], key: Callable[[T], Hashable]) -> list[T]:
    """``first``, then the items of ``then`` whose ``key`` none of ``first`` has, each
    in its order: what was found since the time a query names goes before the rest
    (search's ``asked_at`` and recall's ``recall_time_phrases`` both merge so)."""
    seen = {key(item) for item in first}
    return [*first, *(item for item in then if key(item) not in seen)]


def _around_cues(text: str) -> list[str]:
    """The stretches of ``text`` (lowercased, spaces collapsed) within :data:`REACH`
    characters of a word every phrase needs, overlapping ones merged."""
    low = text.lower()
    spans: list[tuple[int, int]] = []
    for cue in _CUES:
        at = low.find(cue)
        while at != -1:
            spans.append((max(0, at - REACH), at + len(cue) + REACH))
            at = low.find(cue, at + 1)
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [" ".join(low[a:b].split()) for a, b in merged]


def _phrases(text: str, now: float, today: datetime) -> list[Since]:
    found: list[Since] = []
    for match in _AGO.finditer(text):
        days = (_count(match.group(1)) + 0.5) * UNIT_DAYS[match.group(2)]
        found.append(Since(now - days * DAY, match.group(0)))
    for match in _WITHIN.finditer(text):
        days = _count(match.group(1)) * UNIT_DAYS[match.group(2)]
        found.append(Since(now - days * DAY, match.group(0)))
    before = _BEFORE_YESTERDAY.search(text)
    if before:
        found.append(Since((today - timedelta(days=2)).timestamp(), before.group(0)))
    elif match_y := _YESTERDAY.search(text):
        found.append(Since((today - timedelta(days=1)).timestamp(), match_y.group(0)))
    for match in _LAST_DAY.finditer(text):
        back = (today.weekday() - _WEEKDAYS.index(match.group(1))) % 7 or 7
        found.append(Since((today - timedelta(days=back)).timestamp(), match.group(0)))
    for match in _LAST.finditer(text):
        found.append(Since(_last(today, match.group(1)).timestamp(), match.group(0)))
    for match in _THIS.finditer(text):
        found.append(Since(_this(today, match.group(1)).timestamp(), match.group(0)))
    return found


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word]


def _this(today: datetime, unit: str) -> datetime:
    if unit == "week":
        return today - timedelta(days=today.weekday())
    if unit == "month":
        return today.replace(day=1)
    return today.replace(month=1, day=1)


def _last(today: datetime, unit: str) -> datetime:
    if unit == "week":
        return _this(today, "week") - timedelta(days=7)
    if unit == "weekend":  # the Saturday of the latest weekend before this one
        back = (today.weekday() - 5) % 7 + (7 if today.weekday() >= 5 else 0)
        return today - timedelta(days=back)
    if unit == "month":
        start = _this(today, "month")
        return (start - timedelta(days=1)).replace(day=1)
    return today.replace(year=today.year - 1, month=1, day=1)


__all__ = ["DAY", "REACH", "SLACK_DAYS", "UNIT_DAYS", "Since", "first_then", "since"]
