"""Decay: whole days at the rate, idempotent over time, never validated or read-only."""

from __future__ import annotations

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.memory.lifecycle.decay import run_decay
from kredenc.testing.embedders import HashEmbedder

from ._support import DAY, HOUR, T0, Clock


def test_decay_math_over_days(kb: Kredenc, clock: Clock) -> None:
    m = kb.remember("the kettle is in the left cupboard", importance=0.5)
    report = run_decay(kb.store, kb.namespace, now=T0 + 10 * DAY)
    assert (report.examined, report.changed) == (1, 1)
    assert kb.get(m.id).importance == pytest.approx(0.5 * 0.98**10)
    assert report.details[0] == {
        "id": m.id,
        "days": 10,
        "from": 0.5,
        "to": pytest.approx(0.5 * 0.98**10),
    }


def test_decay_is_idempotent_and_carries_day_fractions(kb: Kredenc, clock: Clock) -> None:
    m = kb.remember("the kettle is in the left cupboard", importance=0.8)
    clock.t = T0 + 6 * HOUR
    run_decay(kb.store, kb.namespace, now=T0 + 3.5 * DAY)  # 3 whole days; half a day carries over
    after_three = kb.get(m.id).importance
    assert after_three == pytest.approx(0.8 * 0.98**3)
    end = kb.haystack.end
    assert (
        run_decay(kb.store, kb.namespace, now=T0 + 3.5 * DAY).changed == 0
    )  # twice in a row: once
    assert (
        run_decay(kb.store, kb.namespace, now=T0 + 3.9 * DAY).changed == 0
    )  # still no whole day since
    assert kb.haystack.end == end  # nothing was written
    assert run_decay(kb.store, kb.namespace, now=T0 + 4.0 * DAY).changed == 1
    assert kb.get(m.id).importance == pytest.approx(0.8 * 0.98**4)


def test_decay_state_survives_reopening(kb: Kredenc, clock: Clock) -> None:
    m = kb.remember("the kettle is in the left cupboard", importance=0.8)
    run_decay(kb.store, kb.namespace, now=T0 + 5 * DAY)
    home = kb.home
    kb.close()
    with Kredenc.open(home, embedder=HashEmbedder(), durability="none") as again:
        assert (
            run_decay(again.store, again.namespace, now=T0 + 5 * DAY).changed == 0
        )  # the base is in the log
        assert run_decay(again.store, again.namespace, now=T0 + 6 * DAY).changed == 1
        assert again.get(m.id).importance == pytest.approx(0.8 * 0.98**6)


def test_decay_record_carries_decayed_at(kb: Kredenc, clock: Clock) -> None:
    m = kb.remember("a fact", importance=0.5)
    run_decay(kb.store, kb.namespace, now=T0 + 2.25 * DAY, rate=0.1)
    scores = [r.payload for r in kb.haystack.iter_from() if r.payload.get("op") == "score"]
    assert len(scores) == 1
    rec = scores[0]
    assert rec["id"] == m.id and rec["decayed_at"] == T0 + 2 * DAY
    assert rec["importance"] == pytest.approx(0.5 * 0.9**2)
    assert "decay" in rec["reason"]


def test_validated_and_read_only_are_not_decayed(kb: Kredenc, clock: Clock) -> None:
    plain = kb.remember("plain", importance=0.5)
    valid = kb.remember("checked by a person", importance=0.5, status="validated")
    frozen = kb.remember("a rule", importance=0.5, read_only=True)
    later = kb.remember("validated later", importance=0.5)
    kb.score(later.id, status="validated")
    disputed = kb.remember("disputed", importance=0.5, status="disputed")
    report = run_decay(kb.store, kb.namespace, now=T0 + 3 * DAY)
    assert report.examined == 2 and report.changed == 2
    for mem in (valid, frozen, later):
        assert kb.get(mem.id).importance == 0.5
    for mem in (plain, disputed):
        assert kb.get(mem.id).importance == pytest.approx(0.5 * 0.98**3)


def test_a_new_score_resets_the_base(kb: Kredenc, clock: Clock) -> None:
    m = kb.remember("a fact", importance=0.5)
    run_decay(kb.store, kb.namespace, now=T0 + 10 * DAY)
    clock.t = T0 + 12 * DAY
    kb.score(m.id, importance=0.9)  # a person sets it again: decay starts from here
    assert run_decay(kb.store, kb.namespace, now=T0 + 12.5 * DAY).changed == 0
    run_decay(kb.store, kb.namespace, now=T0 + 13 * DAY)
    assert kb.get(m.id).importance == pytest.approx(0.9 * 0.98)


def test_no_time_no_rate_no_memories(kb: Kredenc, clock: Clock) -> None:
    assert run_decay(kb.store, kb.namespace, now=T0).changed == 0
    kb.remember("a fact")
    assert run_decay(kb.store, kb.namespace, now=T0 + 0.99 * DAY).changed == 0
    assert (
        run_decay(kb.store, kb.namespace, now=T0 - DAY).changed == 0
    )  # a clock behind the filing time
    assert run_decay(kb.store, kb.namespace, now=T0 + 9 * DAY, rate=0.0).changed == 0


@pytest.mark.parametrize("rate", [-0.1, 1.0, 2, "0.1", True, float("nan")])
def test_bad_rates_are_refused(kb: Kredenc, rate: object) -> None:
    with pytest.raises(InvalidInput, match="decay rate"):
        run_decay(kb.store, kb.namespace, rate=rate)  # type: ignore[arg-type]
