"""The chat-completion seam: one small interface every LLM provider implements.

A provider turns chat messages (``{"role", "content"}`` mappings) into a
:class:`Completion`: the text, the parsed JSON when a schema was asked for, token
counts and cost. :meth:`LLM.stream` yields the text as it comes; the finished
:class:`Completion` is the stream's ``completion`` once it is exhausted.

Failures are :class:`~kredenc.errors.ProviderError` (with a hint), never a vendor's
exception; a reply that does not match the requested schema is one too.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

Message = Mapping[str, str]
JsonSchema = Mapping[str, Any]


@dataclass(frozen=True)
class Usage:
    """Tokens a call used and what it cost (USD; 0.0 when the provider has no price)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cost_usd + other.cost_usd,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Completion:
    """One finished reply. ``data`` is the parsed JSON object when a schema was given."""

    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    data: Any = None


class Stream(Iterator[str]):
    """Text deltas of a streamed reply; ``completion`` is set once it is exhausted."""

    def __init__(self, deltas: Iterator[str], finish: Any) -> None:
        self._deltas = deltas
        self._finish = finish  # () -> Completion, called once the deltas run out
        self._parts: list[str] = []
        self.completion: Completion | None = None

    def __iter__(self) -> Stream:
        return self

    def __next__(self) -> str:
        try:
            part = next(self._deltas)
        except StopIteration:
            if self.completion is None:
                self.completion = self._finish("".join(self._parts))
            raise
        self._parts.append(part)
        return part


class LLM(ABC):
    """A chat-completion model. ``name`` is the provider, ``model`` the model id; both
    (with :meth:`fingerprint`) key the operation cache, so a change of either misses."""

    name: str
    model: str

    @abstractmethod
    def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: JsonSchema | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Completion:
        """One reply. With ``schema`` (a JSON Schema of an object) the reply is
        constrained to it where the provider can, and always parsed and checked:
        ``Completion.data`` holds the object, and a reply that is not one raises
        ``ProviderError``."""

    def stream(
        self,
        messages: Sequence[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Stream:
        """The reply's text as it comes. The default streams a whole :meth:`complete`."""
        done = self.complete(messages, temperature=temperature, max_tokens=max_tokens)
        return Stream(iter([done.text]), lambda _text: done)

    def fingerprint(self) -> str:
        """What shapes this model's replies besides the messages (provider, model, base
        URL): part of every cache key of its calls."""
        return f"{self.name}:{self.model}"

    def describe(self) -> str:
        """The model as a startup line names it."""
        return f"{self.model} ({self.name})"

    def close(self) -> None:  # noqa: B027 (optional to override)
        """Release connections or the loaded model."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
