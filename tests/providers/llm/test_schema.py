"""The JSON Schema subset structured replies are checked against."""

from __future__ import annotations

from typing import Any

import pytest

from kredenc.errors import InvalidInput
from kredenc.providers.llm.schema import (
    Mismatch,
    check_schema,
    errors,
    extract_json,
    parse,
    strict_compatible,
)

JUDGE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "context_sufficient": {"type": "boolean"},
        "confidence_score": {"type": "integer", "minimum": 0, "maximum": 100},
        "hallucination_detected": {"type": "boolean"},
        "hallucination_reason": {"type": "string"},
        "sentences": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 1},
                    "chunk": {"type": ["integer", "null"]},
                },
                "required": ["text", "chunk"],
                "additionalProperties": False,
            },
            "maxItems": 3,
        },
    },
    "required": ["context_sufficient", "confidence_score", "hallucination_detected"],
    "additionalProperties": False,
}
GOOD = {
    "context_sufficient": True,
    "confidence_score": 88,
    "hallucination_detected": False,
    "hallucination_reason": "",
    "sentences": [{"text": "h = 8", "chunk": 2}, {"text": "no source", "chunk": None}],
}


def test_a_matching_value_has_no_errors() -> None:
    check_schema(JUDGE)
    assert errors(GOOD, JUDGE) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"confidence_score": 101}, "$.confidence_score: expected at most 100, got 101"),
        ({"confidence_score": -1}, "$.confidence_score: expected at least 0, got -1"),
        ({"confidence_score": 7.5}, "$.confidence_score: expected integer, got a number 7.5"),
        ({"confidence_score": True}, "$.confidence_score: expected integer, got a boolean true"),
        (
            {"context_sufficient": "yes"},
            '$.context_sufficient: expected boolean, got a string "yes"',
        ),
        ({"extra": 1}, "$: unexpected property 'extra'"),
        (
            {"sentences": [{"text": "", "chunk": 1}]},
            "$.sentences[0].text: expected at least 1 characters",
        ),
        (
            {"sentences": [{"text": "a", "chunk": "2"}]},
            "$.sentences[0].chunk: expected integer or null",
        ),
        ({"sentences": [{"text": "a"}]}, "$.sentences[0]: missing required property 'chunk'"),
        (
            {"sentences": [{"text": "a", "chunk": 1}] * 4},
            "$.sentences: expected at most 3 items, got 4",
        ),
    ],
)
def test_each_keyword_is_enforced_and_named(change: dict[str, Any], problem: str) -> None:
    found = errors({**GOOD, **change}, JUDGE)
    assert any(line.startswith(problem) for line in found), found


def test_enum_and_a_missing_property() -> None:
    schema = {"type": "object", "properties": {"v": {"enum": ["A", "B"]}}, "required": ["v", "w"]}
    assert errors({"v": "C"}, schema) == [
        "$: missing required property 'w'",
        '$.v: expected one of ["A", "B"], got "C"',
    ]


def test_a_whole_number_float_counts_as_an_integer() -> None:
    assert errors(3.0, {"type": "integer"}) == []
    assert errors(3, {"type": "number"}) == []


def test_parse_reads_json_and_raises_mismatch() -> None:
    assert parse('{"a": 1}', {"type": "object"}) == {"a": 1}
    assert parse('```json\n{"a": 1}\n```', {"type": "object"}) == {"a": 1}
    with pytest.raises(Mismatch, match="not JSON"):
        parse("Sure, here: {", {"type": "object"})
    with pytest.raises(Mismatch, match="expected object, got an array"):
        parse("[1]", {"type": "object"})


def test_extract_finds_the_first_object_in_prose() -> None:
    text = 'I think {not json} so: {"verdict": "CORRECT", "why": "a {brace}"} and {"b": 2}'
    assert extract_json(text) == {"verdict": "CORRECT", "why": "a {brace}"}
    assert parse(text, {"type": "object"}, extract=True)["verdict"] == "CORRECT"
    with pytest.raises(Mismatch, match="no JSON object"):
        extract_json("no braces at all")


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"type": "object", "oneOf": []}, "'oneOf'"),
        ({"type": "thing"}, "'thing'"),
        ({"type": "object", "properties": {"a": {"pattern": "x"}}}, "'pattern' at $.a"),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "additionalProperties"),
        ({"type": "array", "items": {"$ref": "#"}}, "'$ref' at $[]"),
    ],
)
def test_an_unsupported_schema_is_refused_up_front(schema: dict[str, Any], keyword: str) -> None:
    with pytest.raises(InvalidInput, match=keyword.replace("$", r"\$").replace("[", r"\[")):
        check_schema(schema)


def test_strict_compatibility() -> None:
    assert strict_compatible({**JUDGE, "required": list(JUDGE["properties"])})
    assert not strict_compatible(JUDGE)  # not every property is required
    assert not strict_compatible({"type": "object", "properties": {}})  # open object
