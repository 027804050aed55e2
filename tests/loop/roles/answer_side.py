"""For the answer-side roles' tests (generate, judge, reflect): a few passages for a real
store, a tiny scripted LLM, and the mind and services the roles run on."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from kredenc.engine import Kredenc
from kredenc.loop.mind import LocalMind
from kredenc.loop.tool import Services
from kredenc.providers.llm.base import LLM, Completion, JsonSchema, Message, Usage

PASSAGES = [
    {
        "text": "Multi-Head Attention\nIn this work we employ h = 8 parallel attention layers, "
        "or heads. For each of these we use dk = dv = 64.",
        "title": "attention",
    },
    {
        "text": "5.3 Optimizer\nWe used the Adam optimizer with beta1 = 0.9, beta2 = 0.98 and "
        "epsilon = 1e-9. We varied the learning rate over the course of training.",
        "title": "attention",
    },
    {
        "text": "The big model reaches 28.4 BLEU on the WMT 2014 English-to-German "
        "translation task [12]. It trained for 3.5 days on 8 GPUs.",
        "title": "attention",
    },
    {
        "text": "Sourdough bread needs a starter, flour, water and salt. Bake it in a hot "
        "oven for about forty minutes.",
        "title": "baking",
    },
]


def filled(home: Path) -> Iterator[Kredenc]:
    """A store at ``home`` holding :data:`PASSAGES`, with the bundled MiniLM model (the
    roles score meaning with it; a hash embedder has none)."""
    with Kredenc.open(home, durability="none") as kb:
        kb.add_passages(PASSAGES)
        yield kb


class TinyLLM(LLM):
    """Replies with the scripted texts (or JSON objects) in order; keeps the messages."""

    name = "tiny"
    model = "tiny-1"

    def __init__(self, *replies: str | dict[str, Any]) -> None:
        self.replies = list(replies)
        self.calls: list[list[Message]] = []

    def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: JsonSchema | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Completion:
        self.calls.append(list(messages))
        reply = self.replies.pop(0)
        data = reply if isinstance(reply, dict) else None
        text = reply if isinstance(reply, str) else str(reply)
        return Completion(text, self.model, Usage(10, 5, 0.001), data=data)


def services(kb: Kredenc, llm: LLM | None = None, **settings: Any) -> Services:
    chosen = kb.settings.model_copy(update=settings)
    return Services(store=kb.store, ns=kb.namespace, settings=chosen, llm=llm)


def mind_for(kb: Kredenc, question: str, *, k: int = 4, **extra: Any) -> LocalMind:
    """A mind as the roles before generate leave it: every hit kept."""
    initial: dict[str, Any] = {
        "ask.question": question,
        "ask.options": {},
        "ask.history": [],
        "decide.retrieve": True,
        "rewrite.query": question,
        "verify.kept": kb.search(question, k=k),
    }
    initial.update(extra)
    return LocalMind(initial)
