"""Helpers of the role tests: where the shared data is, a tiny scripted LLM, a mind."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kredenc.errors import ProviderError
from kredenc.loop.mind import LocalMind
from kredenc.providers.llm.base import LLM, Completion, JsonSchema, Message, Usage

ROOT = Path(__file__).resolve().parents[3]


def shared_data() -> Path:
    """../shared/data beside the checkout, or $KREDENC_DATA."""
    env = os.environ.get("KREDENC_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


ATTENTION = shared_data() / "documents/pdf/attention_is_all_you_need_1706.03762v7.pdf"


class TinyLLM(LLM):
    """Replies from a script: each reply a dict (the JSON object) or an exception;
    records every call's messages and schema."""

    name = "tiny"
    model = "tiny-1"

    def __init__(self, replies: Sequence[dict[str, Any] | Exception]) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[list[dict[str, str]], JsonSchema | None]] = []

    def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: JsonSchema | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Completion:
        self.calls.append(([dict(m) for m in messages], schema))
        if not self.replies:
            raise ProviderError("the script has no reply left", "add one")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return Completion(json.dumps(reply), self.model, Usage(100, 20, 0.001), data=reply)


def mind(question: str, history: Sequence[dict[str, str]] = (), **keys: Any) -> LocalMind:
    """A mind as the orchestrator leaves it after observe, plus ``keys`` ('a_b' = 'a.b')."""
    initial: dict[str, Any] = {
        "ask.question": question,
        "ask.session_id": None,
        "ask.history": list(history),
        "ask.options": {},
        "loop.iteration": 1,
    }
    for key, value in keys.items():
        tool, _, data = key.partition("_")
        initial[f"{tool}.{data}"] = value
    return LocalMind(initial)
