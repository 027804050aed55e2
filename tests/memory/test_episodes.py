"""Episodes: 4-hour gaps split them, three memories make one, ids never change."""

from __future__ import annotations

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.memory.lifecycle.episodes import run_episodes

from ._support import HOUR, T0, Clock


def file_at(kb: Kredenc, clock: Clock, hours: float, text: str, **fields: object) -> str:
    clock.t = T0 + hours * HOUR
    return kb.remember(text, **fields).id  # type: ignore[arg-type]


def episodes_of(kb: Kredenc, ids: list[str]) -> list[str | None]:
    return [kb.get(i).episode_id for i in ids]


def test_gaps_over_four_hours_split_and_three_make_an_episode(kb: Kredenc, clock: Clock) -> None:
    first = [file_at(kb, clock, h, f"morning note {h}") for h in (0, 1, 2)]
    pair = [file_at(kb, clock, h, f"afternoon note {h}") for h in (6.5, 8)]  # 4.5 h after
    last = [file_at(kb, clock, h, f"next day note {h}") for h in (20, 21, 22, 26)]  # 4 h: same
    report = run_episodes(kb.store, kb.namespace)
    assert report.examined == 9 and report.changed == 7
    assert episodes_of(kb, first) == [f"e{first[0]}"] * 3
    assert episodes_of(kb, pair) == [None, None]  # two memories are not an episode
    assert episodes_of(kb, last) == [f"e{last[0]}"] * 4
    assert {d["episode_id"] for d in report.details} == {f"e{first[0]}", f"e{last[0]}"}

    end = kb.haystack.end
    assert run_episodes(kb.store, kb.namespace).changed == 0  # a re-run writes nothing
    assert kb.haystack.end == end

    # New memories join the run they continue; old ids never change.
    third = file_at(kb, clock, 10, "afternoon note 10")  # the pair becomes three
    newest = file_at(kb, clock, 29, "next day note 29")  # continues the last episode
    report = run_episodes(kb.store, kb.namespace)
    assert report.changed == 4
    assert episodes_of(kb, [*pair, third]) == [f"e{pair[0]}"] * 3
    assert kb.get(newest).episode_id == f"e{last[0]}"
    assert episodes_of(kb, first) == [f"e{first[0]}"] * 3


def test_given_episodes_are_kept_and_continued(kb: Kredenc, clock: Clock) -> None:
    a = file_at(kb, clock, 0, "standup started", episode_id="standup-1")
    b = file_at(kb, clock, 0.5, "standup: Anna is on leave")
    c = file_at(kb, clock, 0.7, "standup: release on Friday")
    d = file_at(kb, clock, 1, "standup finished", episode_id="standup-x")
    e = file_at(kb, clock, 1.5, "afterwards, coffee")
    run_episodes(kb.store, kb.namespace)
    assert episodes_of(kb, [a, b, c, d, e]) == ["standup-1"] * 3 + ["standup-x"] * 2


def test_leading_members_join_the_first_known_episode(kb: Kredenc, clock: Clock) -> None:
    a = file_at(kb, clock, 0, "one")
    b = file_at(kb, clock, 1, "two", episode_id="trip")
    run_episodes(kb.store, kb.namespace)
    assert episodes_of(kb, [a, b]) == ["trip", "trip"]


def test_reflections_are_not_members_and_read_only_is_untouched(kb: Kredenc, clock: Clock) -> None:
    ro = file_at(kb, clock, 0, "a rule", read_only=True)
    ids = [file_at(kb, clock, h, f"note {h}") for h in (1, 2)]
    summary = file_at(kb, clock, 3, "a summary", source="reflection", kind="concept")
    run_episodes(kb.store, kb.namespace)
    assert kb.get(ro).episode_id is None  # read-only: it cannot be assigned
    assert episodes_of(kb, ids) == [f"e{ro}"] * 2  # but it counted for the run of three
    assert kb.get(summary).episode_id is None


def test_bad_parameters(kb: Kredenc) -> None:
    with pytest.raises(InvalidInput):
        run_episodes(kb.store, kb.namespace, gap_s=0)
    with pytest.raises(InvalidInput):
        run_episodes(kb.store, kb.namespace, min_size=0)
