"""A scripted LLM at our own seam, for unit tests of whatever calls an LLM.

:class:`ScriptedLLM` answers from a list (in turn) or a function of the call, records
every call, and behaves like a real provider where it matters: a schema reply is
parsed and checked with the same one retry (so a test can script a bad reply and
then a good one), the text streams word by word, tokens are counted (estimated, as
:mod:`kredenc.providers.llm.structured` does: deterministic) and priced::

    llm = ScriptedLLM([{"verdict": "CORRECT"}, "The answer [1]."], prices=(1.0, 2.0))
    llm.complete(msgs, schema=VERDICT).data   # {"verdict": "CORRECT"}
    llm.calls[0].schema is VERDICT
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.llm.base import LLM, Completion, JsonSchema, Message, Stream
from kredenc.providers.llm.structured import (
    CHARS_PER_TOKEN,
    check_messages,
    check_options,
    complete_structured,
    estimate_prompt_tokens,
    estimate_tokens,
    usage_of,
)
from kredenc.testing.chat_server import words

#: A scripted reply: text, a JSON value (its JSON text is the reply), or a whole
#: Completion (its text, usage and cost used as they are).
ScriptedReply = str | dict[str, Any] | list[Any] | Completion
Responder = Callable[[list[dict[str, str]], JsonSchema | None], ScriptedReply]


@dataclass(frozen=True)
class Call:
    """One call the model received (a schema retry is a call of its own)."""

    messages: list[dict[str, str]]
    schema: JsonSchema | None
    temperature: float
    max_tokens: int | None
    stream: bool = False


class ScriptedLLM(LLM):
    """An :class:`~kredenc.providers.llm.base.LLM` that replies from a script.

    ``replies``: a sequence, one reply per call in turn (past its end a ProviderError
    says the script ran out), or a function ``(messages, schema) -> reply``. A reply
    is text, a JSON value (with a schema, ``Completion.data`` is the parsed value,
    checked like a real reply: a mismatch asks once more, then raises), or a
    :class:`Completion` returned as it is. ``prices``: USD per million input and
    output tokens, so cost code can be tested. Thread-safe.
    """

    name = "scripted"

    def __init__(
        self,
        replies: Sequence[ScriptedReply] | Responder = ("OK",),
        *,
        model: str = "scripted",
        prices: tuple[float, float] = (0.0, 0.0),
    ) -> None:
        if isinstance(replies, str):
            raise InvalidInput("replies must be a list of replies or a function", "wrap it: [text]")
        self.model = model
        self.prices = {model: prices}
        self.calls: list[Call] = []
        self._replies: list[ScriptedReply] | None = None if callable(replies) else list(replies)
        self._responder: Responder | None = replies if callable(replies) else None
        self._lock = threading.Lock()
        self.closed = False

    @property
    def remaining(self) -> int | None:
        """Replies left in a scripted list (None for a function)."""
        return None if self._replies is None else len(self._replies)

    def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: JsonSchema | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Completion:
        checked = check_messages(messages)
        check_options(temperature, max_tokens)
        if schema is None:
            return self._reply(checked, None, temperature, max_tokens, stream=False)
        return complete_structured(
            lambda sent: self._reply(sent, schema, temperature, max_tokens, stream=False),
            checked,
            schema,
            what=f"scripted LLM ({self.model})",
            hint="script a reply that matches the schema",
        )

    def stream(
        self,
        messages: Sequence[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Stream:
        check_options(temperature, max_tokens)
        done = self._reply(check_messages(messages), None, temperature, max_tokens, stream=True)
        return Stream(iter(words(done.text)), lambda _text: done)

    def close(self) -> None:
        self.closed = True

    def _reply(
        self,
        messages: list[dict[str, str]],
        schema: JsonSchema | None,
        temperature: float,
        max_tokens: int | None,
        *,
        stream: bool,
    ) -> Completion:
        with self._lock:
            self.calls.append(Call(messages, schema, temperature, max_tokens, stream))
            if self._replies is not None:
                if not self._replies:
                    raise ProviderError(
                        f"scripted LLM ({self.model}) has no reply left for call {len(self.calls)}",
                        "script more replies",
                    )
                reply = self._replies.pop(0)
        if self._responder is not None:
            reply = self._responder(messages, schema)
        if isinstance(reply, Completion):
            return reply
        text = reply if isinstance(reply, str) else json.dumps(reply)
        if max_tokens is not None and estimate_tokens(text) > max_tokens:
            text, finish = text[: max_tokens * CHARS_PER_TOKEN], "length"
        else:
            finish = "stop"
        usage = usage_of(
            self.prices, self.model, estimate_prompt_tokens(messages), estimate_tokens(text)
        )
        return Completion(text, self.model, usage, finish)


__all__ = ["Call", "Responder", "ScriptedLLM", "ScriptedReply"]
