"""What every LLM provider shares around a call: checked messages, token estimates,
cost from a price table, and the one-retry loop for replies that must match a schema.

Token estimate: where a server reports no ``usage`` (and for the local model and the
scripted test model), tokens are *estimated* as one per four characters of text
(rounded up), plus four per message for the chat template. It is the usual rule of
thumb for English with GPT-style tokenizers: good to perhaps ±30 % on prose, worse
on code or other languages. It keeps budgets and costs roughly right; it is not a
tokenizer.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.llm.base import Completion, JsonSchema, Message, Usage
from kredenc.providers.llm.schema import Mismatch, check_schema, parse

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
MESSAGE_TOKENS = 4  # role and separators of the chat template, per message
ROLES = frozenset({"system", "user", "assistant", "tool", "developer"})

#: USD per million (input, output) tokens, by model id.
Prices = Mapping[str, tuple[float, float]]

RETRY_PROMPT = (
    "Your reply does not match the required JSON Schema: {problem}. "
    "Reply again with only the corrected JSON object."
)


def estimate_tokens(text: str) -> int:
    """A rough token count of ``text`` (see the module docstring); 0 for no text."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def estimate_prompt_tokens(messages: Sequence[Message]) -> int:
    """A rough token count of a chat prompt: its texts plus the template per message."""
    return sum(estimate_tokens(m.get("content", "")) + MESSAGE_TOKENS for m in messages)


def cost_usd(prices: Prices, model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """What a call cost under ``prices``; 0.0 for a model the table does not list."""
    price = prices.get(model)
    if price is None:
        return 0.0
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000


def usage_of(prices: Prices, model: str, prompt_tokens: int, completion_tokens: int) -> Usage:
    """A :class:`Usage` with its cost from ``prices``."""
    return Usage(
        prompt_tokens, completion_tokens, cost_usd(prices, model, prompt_tokens, completion_tokens)
    )


def check_messages(messages: object) -> list[dict[str, str]]:
    """``messages`` as a list of ``{"role", "content"}`` dicts; InvalidInput if not."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence) or not messages:
        raise InvalidInput(
            "messages must be a non-empty list of {'role', 'content'} objects",
            'e.g. [{"role": "user", "content": "Hello"}]',
        )
    checked: list[dict[str, str]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidInput(f"message {i} is a {type(message).__name__}, not an object")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise InvalidInput(
                f"message {i} has role {role!r}", f"roles: {', '.join(sorted(ROLES))}"
            )
        if not isinstance(content, str):
            raise InvalidInput(f"message {i} has no text content", "content must be a string")
        checked.append({"role": role, "content": content})
    return checked


def check_options(temperature: float, max_tokens: int | None) -> None:
    """Refuse a temperature outside [0, 2] or a ``max_tokens`` below 1 (InvalidInput)."""
    if not isinstance(temperature, int | float) or not 0.0 <= temperature <= 2.0:
        raise InvalidInput(f"temperature must be between 0 and 2, got {temperature!r}")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise InvalidInput(f"max_tokens must be a positive integer, got {max_tokens!r}")


def schema_instruction(schema: JsonSchema) -> str:
    """The system prompt line that asks for JSON where the server cannot enforce it."""
    return (
        "Reply with one JSON object and nothing else (no prose, no code fence). "
        f"It must match this JSON Schema:\n{json.dumps(schema, separators=(',', ':'))}"
    )


def with_instruction(messages: Sequence[Message], instruction: str) -> list[dict[str, str]]:
    """``messages`` with ``instruction`` added to the first system message (or as one)."""
    sent = [dict(m) for m in messages]
    if sent and sent[0].get("role") == "system":
        sent[0]["content"] = f"{sent[0]['content']}\n\n{instruction}"
    else:
        sent.insert(0, {"role": "system", "content": instruction})
    return sent


def complete_structured(
    attempt: Callable[[list[dict[str, str]]], Completion],
    messages: Sequence[Message],
    schema: JsonSchema,
    *,
    what: str,
    hint: str,
    extract: bool = False,
) -> Completion:
    """``attempt(messages)``, its text parsed and checked against ``schema``; on a
    mismatch one more attempt with the reply and the problem appended, then a
    ProviderError naming ``what`` with ``hint``. The usage of both attempts is added;
    ``data`` holds the parsed object. With ``extract`` the first JSON object in the
    text is taken (for models that cannot be held to JSON)."""
    check_schema(schema)
    sent = [dict(m) for m in messages]
    usage = Usage()
    for tries in (1, 2):
        done = attempt(sent)
        usage += done.usage
        try:
            data = parse(done.text, schema, extract=extract)
        except Mismatch as exc:
            if tries == 2:
                raise ProviderError(
                    f"{what}: the reply does not match the JSON Schema after 2 tries: {exc}",
                    hint,
                ) from None
            log.info("%s: reply does not match the schema (%s); asking once more", what, exc)
            sent += [
                {"role": "assistant", "content": done.text},
                {"role": "user", "content": RETRY_PROMPT.format(problem=exc)},
            ]
            continue
        return replace(done, usage=usage, data=data)
    raise AssertionError("unreachable")  # pragma: no cover


#: What to do about a reply that answers nothing (:func:`check_reply`).
UNUSABLE_HINT = "check the model and its server's logs; the roles answer by their rules meanwhile"


def unusable(done: Completion, schema: JsonSchema | None = None) -> str:
    """Why ``done`` answers nothing, or '' when it is a reply: a text without a word
    (empty, blank, punctuation only) or, when ``schema`` asked for an object, no parsed
    JSON object."""
    if schema is not None:
        return "" if isinstance(done.data, dict) else "no JSON object"
    if any(ch.isalnum() for ch in done.text):
        return ""
    return "an empty reply" if not done.text.strip() else "a reply without a word"


def check_reply(done: Completion, who: str, schema: JsonSchema | None = None) -> Completion:
    """``done`` when it is a reply (:func:`unusable`); else a ProviderError naming
    ``who`` (the LLM) and what was wrong. Such a reply is a failure of the call, never
    a result to keep (or to cache)."""
    why = unusable(done, schema)
    if why:
        raise ProviderError(f"the LLM {who} gave {why}", UNUSABLE_HINT)
    return done


__all__ = [
    "CHARS_PER_TOKEN",
    "MESSAGE_TOKENS",
    "RETRY_PROMPT",
    "ROLES",
    "UNUSABLE_HINT",
    "Prices",
    "check_messages",
    "check_options",
    "check_reply",
    "complete_structured",
    "cost_usd",
    "estimate_prompt_tokens",
    "estimate_tokens",
    "schema_instruction",
    "unusable",
    "usage_of",
    "with_instruction",
]
