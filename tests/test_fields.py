"""One validation function: strict rejects, lenient clamps and coerces with a warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from kredenc.checks import check_scope_id
from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.fields import (
    MAX_PAGE,
    MAX_TAG_FILTERS,
    MAX_TIME,
    MAX_WHERE_KEY_CHARS,
    MAX_WHERE_KEYS,
    MIN_TIME,
    SCOPE_IDS,
    parse_pages,
    parse_time,
    validate_fields,
    validate_meta,
    validate_tag_filter,
    validate_where,
)
from kredenc.testing.embedders import HashEmbedder


def test_strict_rejects_lenient_clamps_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    bad = {"importance": 1.7, "confidence": -0.2, "kind": "gossip", "status": "great"}
    with pytest.raises(InvalidInput):
        validate_fields(bad, strict=True)
    with caplog.at_level("WARNING"):
        out = validate_fields(bad, strict=False)
    assert (out["importance"], out["confidence"]) == (1.0, 0.0)
    assert (out["kind"], out["status"]) == ("note", "unvalidated")
    assert "clamped" in caplog.text and "unknown" in caplog.text


def test_lenient_batch_files_coerced_values(tmp_path: Path) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        (m,) = kb.remember_many([{"text": "x", "importance": 3, "kind": "??"}], strict=False)
        got = kb.get(m.id)
        assert (got.importance, got.kind) == (1.0, "note")
        with pytest.raises(InvalidInput):
            kb.remember_many([{"text": "x", "importance": 3}])


def test_deprecated_hidden_unless_asked_for(tmp_path: Path) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        old = kb.remember("the deploy day is Monday")
        kb.score(old.id, status="deprecated", reason="moved to Tuesday")
        for mode in ("lexical", "dense", "hybrid"):
            assert old.id not in {h.id for h in kb.search("deploy day", mode=mode)}
            shown = kb.search("deploy day", mode=mode, include_deprecated=True)
            assert old.id in {h.id for h in shown}


# -- edge inputs (issue 13, finding 9): each refused in one line, nothing written ----


def _log_size(kb: Kredenc) -> int:
    return (kb.settings.home / "haystack.log").stat().st_size


def _deep(levels: int) -> dict[str, object]:
    value: dict[str, object] = {}
    for _ in range(levels):
        value = {"d": value}
    return value


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ({"meta": {"x": object()}}, "meta must hold only JSON values"),
        ({"meta": {"x": float("nan")}}, "meta must hold only JSON values"),
        ({"meta": {"x": [1.0, float("inf")]}}, "meta must hold only JSON values"),
        ({"meta": {1: "a"}}, "meta keys must be strings"),
        ({"meta": ["not", "a", "mapping"]}, "meta must be a JSON object"),
        ({"meta": _deep(40)}, "meta is nested deeper than"),
        ({"meta": {"x": "y" * 300_000}}, "meta is larger than"),
        ({"importance": "0.5"}, "importance must be a number"),
        ({"importance": True}, "importance must be a number"),
        ({"confidence": False}, "confidence must be a number"),
        ({"valid_from": 1e30}, "valid_from must be between"),
        ({"valid_to": -1e15}, "valid_to must be between"),
        ({"valid_from": float("inf")}, "valid_from must be a finite time"),
        ({"tags": ["ok", "nul\x00tag"]}, "tags must not hold control characters"),
        ({"tags": ["bell\x07"]}, "tags must not hold control characters"),
    ],
)
def test_edge_inputs_are_invalid_and_write_nothing(
    tmp_path: Path, call: dict[str, object], message: str
) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        before = _log_size(kb)
        with pytest.raises(InvalidInput) as err:
            kb.remember("the kestrel nests on the tower", **call)  # type: ignore[arg-type]
        assert message in err.value.message
        assert "\n" not in str(err.value)
        assert _log_size(kb) == before


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"meta": {"x": object()}}, "meta must hold only JSON values"),
        ({"meta": {"x": float("nan")}}, "meta must hold only JSON values"),
        ({"tags": ["nul\x00"]}, "tags must not hold control characters"),
        ({"user_id": ""}, "user_id must be a non-empty name"),
        ({"run_id": "r\x00"}, "run_id must not contain control characters"),
    ],
)
def test_add_passages_validates_meta_and_tags(
    tmp_path: Path, item: dict[str, object], message: str
) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        before = _log_size(kb)
        with pytest.raises(InvalidInput, match=message):
            kb.add_passages([{"text": "fine"}, {"text": "a passage", **item}])
        assert _log_size(kb) == before


def test_lenient_batches_coerce_strings_but_not_bools(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING"):
        out = validate_fields({"importance": "0.7", "confidence": True}, strict=False)
    assert (out["importance"], out["confidence"]) == (0.7, 0.5)
    assert "not a number" in caplog.text


def test_meta_is_kept_as_given_when_valid() -> None:
    meta = {"a": [1, 2.5, None, True, "x"], "b": {"c": _deep(10)}}
    assert validate_meta(meta) == meta
    assert validate_meta(None) == {}


def test_valid_times_at_the_edges_of_the_calendar() -> None:
    assert parse_time("0001-01-01T00:00:00Z", "t") == MIN_TIME
    assert parse_time("9999-12-31T23:59:59Z", "t") == MAX_TIME
    assert parse_time(MAX_TIME, "t") == MAX_TIME
    with pytest.raises(InvalidInput):
        parse_time(MAX_TIME + 1, "t")


def test_unix_seconds_as_text_are_a_time_as_the_docs_say() -> None:
    """ "ISO 8601 or Unix seconds": a query string or a JSON string carries the number
    as text, and "1700000000" was refused as "not a time"."""
    assert parse_time("1700000000", "t") == 1_700_000_000.0
    assert parse_time(" 1700000000.5 ", "t") == 1_700_000_000.5
    for bad in ("nan", "inf", "1e300"):
        with pytest.raises(InvalidInput):
            parse_time(bad, "t")


@pytest.mark.parametrize(
    ("value", "pages"),
    [("7", (7, 7)), (" 3-9 ", (3, 9)), ((2, 4), (2, 4)), (None, None), ("", None)],
)
def test_page_ranges(value: object, pages: tuple[int, int] | None) -> None:
    assert parse_pages(value) == pages


@pytest.mark.parametrize(
    "value",
    ["9-2", "two", "0", "-3", "1-", f"1-{MAX_PAGE + 1}", "1-99999999999999999999999", (1, 2, 3),
     (True, 2), 5, "1-2-3"],
)  # fmt: skip
def test_a_page_range_out_of_bounds_is_one_clear_error(value: object) -> None:
    """A page number past SQLite's integers crashed the search with OverflowError."""
    with pytest.raises(InvalidInput, match=r"--pages .* is not a page range") as err:
        parse_pages(value, "--pages")
    assert len(str(err.value)) < 200 and "e.g." in err.value.hint


# -- user_id / agent_id / run_id, and the tag and meta filters ------------------------


@pytest.mark.parametrize("key", ["user_id", "agent_id", "run_id"])
@pytest.mark.parametrize(
    ("value", "why"),
    [("", "non-empty"), ("   ", "non-empty"), ("x" * 201, "200"), ("al\x00ex", "control"),
     ("a\nb", "control"), (7, "non-empty"), ("\ud800", "UTF-8")],
)  # fmt: skip
def test_scope_ids_are_names(key: str, value: object, why: str) -> None:
    with pytest.raises(InvalidInput, match=why) as err:
        check_scope_id(key, value)
    assert key in err.value.message


def test_scope_ids_may_be_unset_and_keep_their_text() -> None:
    assert check_scope_id("user_id", None) is None
    assert check_scope_id("user_id", "Ålex 7") == "Ålex 7"
    assert SCOPE_IDS == ("user_id", "agent_id", "run_id")


def test_where_pairs_are_sorted_scalars() -> None:
    assert validate_where(None) == ()
    assert validate_where({"b": 1, "a": "x", "c": None, "d": True, "e": 2.5}) == (
        ("a", "x"), ("b", 1), ("c", None), ("d", True), ("e", 2.5),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("where", "why"),
    [
        (["a", "b"], "map meta keys"),
        ("a=b", "map meta keys"),
        ({"": 1}, "non-empty"),
        ({"k" * (MAX_WHERE_KEY_CHARS + 1): 1}, "non-empty names"),
        ({'a"b': 1}, "quote"),
        ({"a\x07": 1}, "control"),
        ({1: 1}, "non-empty names"),
        ({"a": [1]}, "string, number"),
        ({"a": {"b": 1}}, "string, number"),
        ({"a": float("nan")}, "finite"),
        ({"a": float("inf")}, "finite"),
        ({"a": 2**70}, "64-bit"),
        ({f"k{i}": i for i in range(MAX_WHERE_KEYS + 1)}, f"at most {MAX_WHERE_KEYS}"),
    ],
)
def test_where_refuses_what_sql_cannot_match(where: object, why: str) -> None:
    with pytest.raises(InvalidInput, match=why):
        validate_where(where)


def test_tag_filters_are_tags_and_bounded() -> None:
    assert validate_tag_filter(["a", " b ", "a"]) == ("a", "b")
    with pytest.raises(InvalidInput, match="non-empty strings"):
        validate_tag_filter("birds")  # a string is not a list of tags
    with pytest.raises(InvalidInput, match="control"):
        validate_tag_filter(["bi\x00rds"])
    with pytest.raises(InvalidInput, match=f"at most {MAX_TAG_FILTERS}"):
        validate_tag_filter([f"t{i}" for i in range(MAX_TAG_FILTERS + 1)])


def test_add_passages_files_the_scope_ids(tmp_path: Path) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        a, b = kb.add_passages(
            [{"text": "owned", "user_id": "u1", "agent_id": "bot"}, {"text": "x"}]
        )
        assert (kb.get(a).user_id, kb.get(a).agent_id, kb.get(b).user_id) == ("u1", "bot", None)
        assert [h.id for h in kb.search("owned x", user_id="u1")] == [a]
