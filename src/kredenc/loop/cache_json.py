"""What the operation cache stores, as JSON and back: hits, completions, evaluations,
chunk verdicts.

Each ``*_to_json`` returns plain lists, dicts, strings and numbers; its ``*_from_json``
makes an equal object again (a round trip is the identity; ``tests/loop`` checks it
field by field, so a field added to :class:`~kredenc.records.Hit` and forgotten here
fails there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from kredenc.grounding.base import Evaluation, SentenceSupport
from kredenc.loop.answer import ChunkVerdict
from kredenc.providers.llm.base import Completion, Usage
from kredenc.records import Hit, LegScore

HIT_FIELDS = tuple(f.name for f in fields(Hit))


def hit_to_json(hit: Hit) -> dict[str, Any]:
    out = {name: getattr(hit, name) for name in HIT_FIELDS}
    out["legs"] = {name: [leg.rank, leg.score] for name, leg in hit.legs.items()}
    out["tags"] = list(hit.tags)
    out["meta"] = dict(hit.meta)
    return out


_HIT_NAMES = frozenset(HIT_FIELDS)


def hit_from_json(raw: dict[str, Any]) -> Hit:
    values = dict(raw) if raw.keys() <= _HIT_NAMES else {k: raw[k] for k in HIT_FIELDS if k in raw}
    values["legs"] = {name: LegScore(int(r), float(s)) for name, (r, s) in raw["legs"].items()}
    values["tags"] = tuple(raw.get("tags") or ())
    return Hit(**values)


def _copy_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    return value  # str, int, float, bool, None: immutable


def copy_hits(hits: Sequence[Hit]) -> list[Hit]:
    """New hits equal to ``hits``, sharing nothing a caller could change (legs and meta
    are copied; texts, numbers, tags and leg scores are immutable): a decoded search
    value handed out again without decoding its JSON."""
    out = []
    for hit in hits:
        new = object.__new__(Hit)  # copy.copy without its __reduce_ex__ round (5x slower)
        new.__dict__.update(hit.__dict__)
        new.legs = dict(hit.legs)
        new.meta = _copy_json(hit.meta) if hit.meta else {}
        out.append(new)
    return out


def completion_to_json(done: Completion) -> dict[str, Any]:
    return {
        "text": done.text,
        "model": done.model,
        "usage": [done.usage.prompt_tokens, done.usage.completion_tokens, done.usage.cost_usd],
        "finish_reason": done.finish_reason,
        "data": done.data,
    }


def completion_from_json(raw: dict[str, Any], *, usage: bool = True) -> Completion:
    """The completion; with ``usage=False`` its usage is zero (a cache hit costs nothing)."""
    prompt, completion, cost = raw["usage"]
    return Completion(
        text=raw["text"],
        model=raw["model"],
        usage=Usage(int(prompt), int(completion), float(cost)) if usage else Usage(),
        finish_reason=raw["finish_reason"],
        data=raw["data"],
    )


def evaluation_to_json(ev: Evaluation) -> dict[str, Any]:
    return ev.to_json()


def evaluation_from_json(raw: dict[str, Any]) -> Evaluation:
    return Evaluation(
        context_sufficient=bool(raw["context_sufficient"]),
        confidence_score=int(raw["confidence_score"]),
        hallucination_detected=bool(raw["hallucination_detected"]),
        hallucination_reason=str(raw["hallucination_reason"]),
        evaluation_summary=str(raw["evaluation_summary"]),
        sentences=tuple(SentenceSupport(**s) for s in raw.get("sentences") or ()),
    )


def verdict_to_json(v: ChunkVerdict) -> list[Any]:
    return [v.id, v.verdict, v.relevance, v.reason, v.verified_by]


def verdict_from_json(raw: list[Any]) -> ChunkVerdict:
    ident, verdict, relevance, reason, verified_by = raw
    return ChunkVerdict(str(ident), verdict, float(relevance), str(reason), verified_by)


def verdicts_to_json(verdicts: Sequence[ChunkVerdict]) -> list[list[Any]]:
    return [verdict_to_json(v) for v in verdicts]


def verdicts_from_json(raw: Sequence[list[Any]]) -> list[ChunkVerdict]:
    return [verdict_from_json(v) for v in raw]
