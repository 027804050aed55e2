"""The recall budget: items, characters and tokens; word-boundary cuts with a marker."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from kredenc.config import Settings
from kredenc.errors import InvalidInput
from kredenc.recall.budget import MARKER, Budget, budget_from, estimate_tokens

WORDS = " ".join(f"word{i:03d}" for i in range(400))  # 3,199 characters


def words_of(text: str) -> int:
    return len(text.split())


def test_defaults_are_eight_items_600_chars_1800_total() -> None:
    b = Budget()
    assert (b.items, b.item_chars, b.total_chars) == (8, 600, 1800)
    assert b.item_tokens is None and b.total_tokens is None
    assert b.describe() == "8 items × 600/1800 chars"


def test_cut_on_a_word_boundary_with_marker() -> None:
    cut = Budget().cut(WORDS, 100, None)
    assert len(cut) <= 100
    assert cut.endswith(MARKER)
    kept = cut[: -len(MARKER)]
    assert WORDS.startswith(kept)
    assert WORDS[len(kept)] == " "  # the cut falls between words


def test_cut_in_tokens_with_a_real_counter() -> None:
    b = Budget.in_tokens(count_tokens=words_of)
    cut = b.cut(WORDS, None, 10)
    assert cut.endswith(MARKER)
    assert words_of(cut) <= 10
    assert WORDS.startswith(cut[: -len(MARKER)])


def test_text_that_fits_is_not_cut() -> None:
    assert Budget().cut("short text", 100, 10) == "short text"


def prefixed(head: str) -> Callable[[str], str]:
    return lambda text: head + text


def as_json(n: int) -> Callable[[str], str]:
    return lambda text: json.dumps({"n": n, "text": text})


def test_fit_respects_items_per_item_and_total() -> None:
    b = Budget(items=2, item_chars=300, total_chars=500)
    lines = b.fit("PRE", [(prefixed(f"#{n} "), WORDS) for n in (1, 2, 3)])
    assert lines is not None
    assert len(lines) == 2
    assert all(len(line) <= 300 for line, _ in lines)
    assert len("\n".join(["PRE", *(line for line, _ in lines)])) <= 500
    assert lines[0][0].startswith("#1 word000 ")
    assert all(line == f"#{n} " + text for n, (line, text) in enumerate(lines, 1))
    assert all(text.endswith(MARKER) for _, text in lines)


def test_fit_measures_the_rendered_line_and_counts_the_closing_line() -> None:
    quoted = " ".join(['"q"'] * 200)  # each quote costs two characters once encoded
    b = Budget(items=3, item_chars=300, total_chars=500)
    closing = "E" * 40
    lines = b.fit("PRE", [(as_json(1), quoted), (as_json(2), WORDS)], closing)
    assert lines is not None and len(lines) == 2
    for line, text in lines:
        assert len(line) <= 300
        assert json.loads(line)["text"] == text
        assert text.endswith(MARKER)
    assert len(lines[0][1]) < 300 * 0.75  # the escapes were counted, not the raw text
    block = "\n".join(["PRE", *(line for line, _ in lines), closing])
    assert 485 < len(block) <= 500  # the second item took what the total left
    # Without the closing line's room the same budget holds more text.
    more = b.fit("PRE", [(as_json(1), quoted), (as_json(2), WORDS)])
    assert more is not None and len(more[1][1]) > len(lines[1][1])


def test_fit_in_tokens() -> None:
    b = Budget.in_tokens(items=3, item_tokens=40, total_tokens=90)
    lines = b.fit("Recalled:", [(prefixed(f"#{n} "), WORDS) for n in (1, 2, 3)])
    assert lines is not None
    assert all(estimate_tokens(line) <= 40 for line, _ in lines)
    assert estimate_tokens("\n".join(["Recalled:", *(line for line, _ in lines)])) <= 90


def test_fit_leaves_out_items_that_would_be_cut_too_short() -> None:
    b = Budget(items=3, item_chars=600, total_chars=140)
    lines = b.fit("P" * 50, [(prefixed("#1 "), "x " * 20), (prefixed("#2 "), WORDS)])
    assert lines == [("#1 " + "x " * 20, "x " * 20)]  # 43 chars; #2 would keep under 40


def test_fit_nothing_when_the_preamble_alone_is_too_long() -> None:
    assert Budget(total_chars=10).fit("a long preamble", [(prefixed("#1 "), "text")]) is None
    assert Budget(total_chars=20).fit("PRE", [(prefixed("#1 "), "text")], "C" * 15) is None


def test_zero_items_fits_nothing() -> None:
    assert Budget(items=0).fit("P", [(prefixed("#1 "), "text")]) is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"items": -1},
        {"item_chars": 0},
        {"total_tokens": 0},
        {"items": True},
        {"item_chars": 1.5},
        {"snippet_chars": 0},
        {"snippet_chars": "200"},
    ],
)
def test_invalid_budgets_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        Budget(**kwargs)  # type: ignore[arg-type]


def test_budget_from_mapping_settings_and_instance() -> None:
    s = Settings(
        recall_items=2,
        recall_item_chars=0,  # no limit
        recall_total_chars=900,
        recall_total_tokens=200,
    )
    b = budget_from(None, s)
    assert (b.items, b.item_chars, b.total_chars, b.total_tokens) == (2, None, 900, 200)
    assert b.item_tokens is None  # 0 in the settings: unused
    assert b.snippet_chars is None  # whole texts unless asked for
    assert budget_from(None, Settings(recall_snippet_chars=250)).snippet_chars == 250
    assert budget_from({"items": 1}, s) == Budget(items=1)
    same = Budget(items=5)
    assert budget_from(same, s) is same
    with pytest.raises(InvalidInput):
        budget_from({"bogus": 1}, s)
    with pytest.raises(InvalidInput):
        budget_from(3, s)  # type: ignore[arg-type]
