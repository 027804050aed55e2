"""Chat completions from any OpenAI-compatible ``/chat/completions`` endpoint: the
request shape and the parsing of the reply; the wire (URL checks, the key, timeouts,
retries, error mapping) is :mod:`kredenc.providers.openai_compat`'s.

Which server and what it costs is a :class:`~kredenc.providers.llm.records.ProviderRecord`;
this class takes the two facts of it that shape a call, ``json_schema`` (whether the
server enforces ``response_format: json_schema``) and ``prices``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator, Sequence
from contextlib import closing
from typing import Any

from pydantic import SecretStr

from kredenc.errors import InvalidInput
from kredenc.providers.llm.base import LLM, Completion, JsonSchema, Message, Stream, Usage
from kredenc.providers.llm.schema import strict_compatible
from kredenc.providers.llm.structured import (
    Prices,
    check_messages,
    check_options,
    complete_structured,
    estimate_prompt_tokens,
    estimate_tokens,
    schema_instruction,
    usage_of,
    with_instruction,
)
from kredenc.providers.openai_compat import FORMAT_HINT, OpenAICompatClient, snippet

PATH = "/chat/completions"
#: A reply's body, read at most: this many bytes per token asked for, and some room for
#: the JSON around the text (a token is a few characters; escaping and logprobs add).
BYTES_PER_TOKEN = 64
REPLY_SLACK_BYTES = 256 * 1024
TOO_LARGE_HINT = (
    "the server sent far more than max_tokens allows: check it, or raise llm_max_tokens"
)


def reply_bytes(max_tokens: object) -> int | None:
    """The most bytes read of a reply to a call allowed ``max_tokens`` (None: no bound)."""
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        return None
    return REPLY_SLACK_BYTES + BYTES_PER_TOKEN * max_tokens


_NAME = re.compile(r"[^A-Za-z0-9_-]+")
SCHEMA_HINT = "use a model that supports structured output (json_schema), or a simpler schema"


class OpenAICompatLLM(LLM):
    """Replies from ``POST {base_url}/chat/completions``.

    ``name`` is the provider (``"openai"``, ``"ollama"``); ``json_schema`` says the
    server enforces ``response_format: {"type": "json_schema"}`` (otherwise a schema
    call asks for ``{"type": "json_object"}`` and states the schema in the system
    message). Every schema reply is parsed and checked here whatever the server
    promises, with one retry that names the problem. ``prices`` (USD per million
    input and output tokens, by model) gives ``Usage.cost_usd``; a model it does not
    list costs 0.0.

    Token counts are the server's ``usage``; where a server sends none they are
    *estimated* (one token per four characters, plus four per message: see
    :mod:`kredenc.providers.llm.structured`). A chat request is not safe to repeat,
    so only refusals (429, 503) and failed connections are retried. Thread-safe;
    :meth:`close` it when done.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        name: str = "openai-compatible",
        api_key: str | SecretStr | None = None,
        json_schema: bool = True,
        prices: Prices | None = None,
        timeout: float = 60.0,
        max_tokens: int | None = None,
        max_retries: int = 2,
        backoff_s: float = 0.5,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InvalidInput(
                f"LLM provider {name!r} needs a model name", "set llm_model (KREDENC_LLM_MODEL)"
            )
        if max_tokens is not None and max_tokens < 1:
            raise InvalidInput(f"max_tokens must be positive, got {max_tokens}")
        self._http = OpenAICompatClient(
            base_url,
            api_key=api_key,
            label=f"LLM {name!r}",
            timeout=timeout,
            hints={
                400: "check the model name and that the server accepts this request "
                "(response_format, max_tokens)",
                413: "the prompt is too long for the server: shorten it",
            },
            timeout_hint="raise llm_timeout_s, or lower llm_max_tokens",
            max_retries=max_retries,
            backoff_s=backoff_s,
        )
        self.name = name
        self.model = model
        self.url = self._http.url(PATH)
        self.json_schema = json_schema
        self.prices: Prices = dict(prices or {})
        self.max_tokens = max_tokens

    def __repr__(self) -> str:
        return f"OpenAICompatLLM(name={self.name!r}, model={self.model!r}, url={self.url!r})"

    def fingerprint(self) -> str:
        return f"{self.name}:{self.model}@{self._http.shown_url}"

    def describe(self) -> str:
        return f"{self.model} ({self.name} at {self._http.shown_url})"

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
            return self._call(checked, temperature, max_tokens, None)
        if self.json_schema:
            response_format: dict[str, Any] = {
                "type": "json_schema",
                "json_schema": {
                    "name": _schema_name(schema),
                    "schema": dict(schema),
                    "strict": strict_compatible(schema),
                },
            }
        else:
            response_format = {"type": "json_object"}
            checked = with_instruction(checked, schema_instruction(schema))
        return complete_structured(
            lambda sent: self._call(sent, temperature, max_tokens, response_format),
            checked,
            schema,
            what=f"LLM {self.name!r} ({self.model})",
            hint=SCHEMA_HINT,
        )

    def stream(
        self,
        messages: Sequence[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Stream:
        checked = check_messages(messages)
        check_options(temperature, max_tokens)
        body = self._body(checked, temperature, max_tokens)
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        events = self._http.stream_lines(PATH, body)
        state: dict[str, Any] = {"usage": None, "finish": "stop", "model": self.model}

        def deltas() -> Iterator[str]:
            with closing(events):  # the response closes at [DONE], not when collected
                yield from read(events)

        def read(events: Generator[str]) -> Iterator[str]:
            most, said = reply_bytes(body.get("max_tokens")), 0
            for event in events:
                said += len(event)
                if most is not None and said > most:
                    raise self._http.fail(
                        PATH, f"the reply is larger than {most:,} bytes; not read", TOO_LARGE_HINT
                    )
                if event == "[DONE]":
                    return
                chunk = self._event(event)
                if isinstance(chunk.get("usage"), dict):
                    state["usage"] = chunk["usage"]
                state["model"] = chunk.get("model") or state["model"]
                for choice in chunk.get("choices") or []:
                    if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                        continue
                    if choice.get("finish_reason"):
                        state["finish"] = choice["finish_reason"]
                    delta = choice.get("delta") or {}
                    text = delta.get("content") if isinstance(delta, dict) else None
                    if isinstance(text, str) and text:
                        yield text

        def finish(text: str) -> Completion:
            return Completion(
                text,
                str(state["model"]),
                self._usage(state["usage"], checked, text),
                str(state["finish"]),
            )

        return Stream(deltas(), finish)

    def close(self) -> None:
        self._http.close()

    def _body(
        self, messages: list[dict[str, str]], temperature: float, max_tokens: int | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": temperature,
        }
        limit = max_tokens if max_tokens is not None else self.max_tokens
        if limit is not None:
            body["max_tokens"] = limit
        return body

    def _call(
        self,
        messages: list[dict[str, str]],
        temperature: float,
        max_tokens: int | None,
        response_format: dict[str, Any] | None,
    ) -> Completion:
        body = self._body(messages, temperature, max_tokens)
        if response_format is not None:
            body["response_format"] = response_format
        limit = body.get("max_tokens")
        reply = self._http.post_json(
            PATH, body, max_bytes=reply_bytes(limit), too_large_hint=TOO_LARGE_HINT
        )
        choice = _first_choice(reply)
        if choice is None:
            raise self._http.fail(
                PATH, f"the reply has no choices: {snippet(json.dumps(reply))!r}", FORMAT_HINT
            )
        message = choice.get("message") or {}
        text = message.get("content") if isinstance(message, dict) else None
        if not isinstance(text, str):
            refusal = message.get("refusal") if isinstance(message, dict) else None
            if refusal:
                raise self._http.fail(
                    PATH, f"the model refused: {snippet(str(refusal))}", "rephrase the request"
                )
            text = ""
        return Completion(
            text,
            str(reply.get("model") or self.model),
            self._usage(reply.get("usage"), messages, text),
            str(choice.get("finish_reason") or "stop"),
        )

    def _usage(self, usage: Any, messages: list[dict[str, str]], text: str) -> Usage:
        prompt = completion = None
        if isinstance(usage, dict):
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if not isinstance(prompt, int) or not isinstance(completion, int):
            prompt, completion = estimate_prompt_tokens(messages), estimate_tokens(text)
        return usage_of(self.prices, self.model, prompt, completion)

    def _event(self, event: str) -> dict[str, Any]:
        try:
            chunk = json.loads(event)
        except json.JSONDecodeError:
            raise self._http.fail(
                PATH, f"a stream event is not JSON: {snippet(event)!r}", FORMAT_HINT
            ) from None
        if not isinstance(chunk, dict):
            raise self._http.fail(
                PATH, f"a stream event is not an object: {snippet(event)!r}", FORMAT_HINT
            )
        error = chunk.get("error")
        if error is not None:
            what = error.get("message", error) if isinstance(error, dict) else error
            raise self._http.fail(
                PATH,
                f"the stream ended with an error: {snippet(str(what))}",
                "check the server's logs",
            )
        return chunk


def _first_choice(reply: Any) -> dict[str, Any] | None:
    if not isinstance(reply, dict):
        return None
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    first: dict[str, Any] = choices[0]
    return first


def _schema_name(schema: JsonSchema) -> str:
    """``response_format``'s schema name: the title, in the characters OpenAI allows."""
    title = schema.get("title")
    name = _NAME.sub("_", title).strip("_") if isinstance(title, str) else ""
    return (name or "reply")[:64]


__all__ = ["PATH", "SCHEMA_HINT", "OpenAICompatLLM"]
