"""JSON Schema for structured replies: the subset kredenc's prompts use, checked here.

No JSON Schema library is a dependency, so this module validates the keywords the
loop's schemas need and refuses the rest up front (a keyword silently ignored would
be a constraint that is not enforced):

- ``type``: ``object``, ``array``, ``string``, ``number``, ``integer``, ``boolean``,
  ``null``, or a list of them;
- objects: ``properties``, ``required``, ``additionalProperties`` (``true``/``false``);
- arrays: ``items``, ``minItems``, ``maxItems``;
- strings: ``minLength``, ``maxLength``; numbers: ``minimum``, ``maximum``;
- any: ``enum``; annotations (``title``, ``description``, ``default``, ``examples``,
  ``$comment``) are allowed and ignored.

:func:`check_schema` refuses an unsupported schema (``InvalidInput``, the caller's
mistake); :func:`errors` lists where a value breaks a schema; :func:`parse` reads a
reply (the whole text, or with ``extract`` the first JSON object in it, for models
that wrap JSON in prose or code fences) and raises :class:`Mismatch` when it is not a
match.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from kredenc.errors import InvalidInput
from kredenc.providers.openai_compat import snippet

JsonSchema = Mapping[str, Any]

TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "enum",
    }
)
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment"})
_MAX_ERRORS = 5  # a retry prompt names the first few; more only lengthen it


class Mismatch(ValueError):
    """A reply that is not JSON or does not match the schema; ``str()`` says where."""


def check_schema(schema: object, where: str = "$") -> None:
    """Refuse a schema that uses keywords this module does not enforce."""
    if not isinstance(schema, Mapping):
        raise InvalidInput(
            f"schema at {where} must be an object, got {type(schema).__name__}",
            "pass a JSON Schema as a dict",
        )
    unknown = sorted(set(schema) - _KEYWORDS - _ANNOTATIONS)
    if unknown:
        raise InvalidInput(
            f"schema keyword {unknown[0]!r} at {where} is not supported",
            f"use only {', '.join(sorted(_KEYWORDS))} (see kredenc.providers.llm.schema)",
        )
    kinds = _types(schema)
    bad = [k for k in kinds if k not in TYPES]
    if bad:
        raise InvalidInput(f"schema type {bad[0]!r} at {where} is unknown", f"types: {TYPES}")
    props = schema.get("properties", {})
    if not isinstance(props, Mapping):
        raise InvalidInput(f"schema 'properties' at {where} must be an object")
    for name, sub in props.items():
        check_schema(sub, f"{where}.{name}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise InvalidInput(f"schema 'required' at {where} must be a list of names")
    extra = schema.get("additionalProperties", True)
    if not isinstance(extra, bool):
        raise InvalidInput(
            f"schema 'additionalProperties' at {where} must be true or false",
            "a schema for additional properties is not supported",
        )
    if "items" in schema:
        check_schema(schema["items"], f"{where}[]")
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise InvalidInput(f"schema 'enum' at {where} must be a list")


def errors(value: Any, schema: JsonSchema, where: str = "$") -> list[str]:
    """Where ``value`` breaks ``schema`` (a checked schema), one line each; [] when it
    matches."""
    found: list[str] = []
    _collect(value, schema, where, found)
    return found[:_MAX_ERRORS]


def parse(text: str, schema: JsonSchema, *, extract: bool = False) -> Any:
    """The JSON value of ``text``, checked against ``schema``; :class:`Mismatch` if not."""
    value = extract_json(text) if extract else _loads(text)
    found = errors(value, schema)
    if found:
        raise Mismatch("; ".join(found))
    return value


def extract_json(text: str) -> Any:
    """The first JSON object in ``text`` (prose or a ```json fence around it is fine)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        return value
    raise Mismatch(f"the reply holds no JSON object: {snippet(text, 120)!r}")


def strict_compatible(schema: JsonSchema) -> bool:
    """Whether OpenAI's ``strict`` mode accepts ``schema``: every object closed
    (``additionalProperties: false``) with all its properties required."""
    if "object" in _types(schema):
        props = schema.get("properties", {})
        if schema.get("additionalProperties", True) is not False:
            return False
        if set(schema.get("required", [])) != set(props):
            return False
        if not all(strict_compatible(sub) for sub in props.values()):
            return False
    items = schema.get("items")
    return items is None or strict_compatible(items)


def _loads(text: str) -> Any:
    body = text.strip()
    if body.startswith("```"):  # a fenced block, as some servers send even in JSON mode
        body = body.strip("`").removeprefix("json").strip()
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise Mismatch(
            f"the reply is not JSON ({exc.msg} at {exc.pos}): {snippet(text, 120)!r}"
        ) from None


def _types(schema: JsonSchema) -> list[str]:
    kind = schema.get("type")
    if kind is None:
        return []
    return [kind] if isinstance(kind, str) else list(kind)


def _is(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if kind == "integer":
        return isinstance(value, int) or (math.isfinite(value) and value == int(value))
    return True  # number


def _collect(value: Any, schema: JsonSchema, where: str, found: list[str]) -> None:
    kinds = _types(schema)
    if kinds and not any(_is(value, k) for k in kinds):
        found.append(f"{where}: expected {' or '.join(kinds)}, got {_describe(value)}")
        return
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: expected one of {json.dumps(schema['enum'])}, got {_short(value)}")
    if isinstance(value, dict):
        props: Mapping[str, Any] = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                found.append(f"{where}: missing required property {name!r}")
        for name, item in value.items():
            if name in props:
                _collect(item, props[name], f"{where}.{name}", found)
            elif schema.get("additionalProperties", True) is False:
                found.append(f"{where}: unexpected property {name!r}")
    elif isinstance(value, list):
        low, high = schema.get("minItems"), schema.get("maxItems")
        if low is not None and len(value) < low:
            found.append(f"{where}: expected at least {low} items, got {len(value)}")
        if high is not None and len(value) > high:
            found.append(f"{where}: expected at most {high} items, got {len(value)}")
        if "items" in schema:
            for i, item in enumerate(value):
                _collect(item, schema["items"], f"{where}[{i}]", found)
    elif isinstance(value, str):
        low, high = schema.get("minLength"), schema.get("maxLength")
        if low is not None and len(value) < low:
            found.append(f"{where}: expected at least {low} characters, got {len(value)}")
        if high is not None and len(value) > high:
            found.append(f"{where}: expected at most {high} characters, got {len(value)}")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and value < low:
            found.append(f"{where}: expected at least {low}, got {value}")
        if high is not None and value > high:
            found.append(f"{where}: expected at most {high}, got {value}")


def _describe(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    for kind, name in names.items():
        if isinstance(value, kind):
            return f"{name} {_short(value)}" if kind in (str, bool) else name
    return f"a number {_short(value)}"


def _short(value: Any) -> str:
    return snippet(json.dumps(value), 60)


__all__ = [
    "TYPES",
    "JsonSchema",
    "Mismatch",
    "check_schema",
    "errors",
    "extract_json",
    "parse",
    "strict_compatible",
]
