"""Recall keeps to the user_id / agent_id / run_id it is given, or the settings' default."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kredenc.engine import Kredenc


def ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def fill(kb: Kredenc) -> dict[str, str]:
    return {
        "alex": kb.remember(
            "Alex likes jasmine green tea", kind="preference", user_id="u-alex", agent_id="a1"
        ).id,
        "sam": kb.remember(
            "Sam likes jasmine green tea too", kind="preference", user_id="u-sam", run_id="r2"
        ).id,
        "shared": kb.remember("Jasmine green tea comes from Fujian", kind="fact").id,
    }


def recalled(kb: Kredenc, session: str, **scope: Any) -> set[str]:
    result = kb.recall(ask("Which jasmine green tea do I like?"), session_id=session, **scope)
    assert result.error is None, result.error
    return {item.id for item in result.items}


def test_recall_keeps_to_the_ids_given(kb: Kredenc, session: str) -> None:
    ids = fill(kb)
    assert recalled(kb, session) == set(ids.values())  # the filter is what narrows it
    assert recalled(kb, session, user_id="u-sam") == {ids["sam"]}
    assert recalled(kb, session, user_id="u-alex") == {ids["alex"]}
    assert recalled(kb, session, agent_id="a1") == {ids["alex"]}
    assert recalled(kb, session, run_id="r2") == {ids["sam"]}
    assert recalled(kb, session, user_id="u-alex", run_id="r2") == set()
    assert recalled(kb, session, user_id="nobody") == set()


def test_a_bad_id_skips_the_recall_and_says_why(kb: Kredenc, session: str) -> None:
    fill(kb)
    result = kb.recall(ask("jasmine green tea"), session_id=session, user_id="a\x00b")
    assert not result.injected and result.items == []
    assert result.error is not None and "user_id must not contain control" in result.error


def test_the_settings_give_the_default_scope(
    open_store: Callable[..., Kredenc], session: str
) -> None:
    with open_store(recall_user_id="u-sam") as kb:
        ids = fill(kb)
        assert recalled(kb, session) == {ids["sam"]}
        assert recalled(kb, session, user_id="u-alex") == {ids["alex"]}  # the call wins
    with open_store(recall_agent_id="a1", recall_run_id="") as kb:
        assert recalled(kb, session + "-b") == {ids["alex"]}


def test_turns_filed_with_a_user_are_recalled_for_that_user(kb: Kredenc, session: str) -> None:
    (sam_turn,) = kb.file_turns(
        "earlier-sam", [{"role": "user", "content": "My favourite jasmine green tea is Fujian"}],
        user_id="u-sam", run_id="r7",
    )  # fmt: skip
    (alex_turn,) = kb.file_turns(
        "earlier-alex", [{"role": "user", "content": "I brew jasmine green tea cold"}],
        user_id="u-alex",
    )  # fmt: skip
    assert kb.get(sam_turn).user_id == "u-sam" and kb.get(sam_turn).run_id == "r7"
    assert recalled(kb, session, user_id="u-sam") == {sam_turn}
    assert recalled(kb, session, user_id="u-alex") == {alex_turn}
    assert recalled(kb, session) == {sam_turn, alex_turn}
