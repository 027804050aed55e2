"""Build an embedder from a provider name and its options (as configuration gives them)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from kredenc.errors import InvalidInput
from kredenc.providers.embed.base import Embedder


def _minilm() -> type[Embedder]:
    from kredenc.providers.embed.minilm import MiniLMEmbedder

    return MiniLMEmbedder


def _openai() -> type[Embedder]:
    from kredenc.providers.embed.openai import OpenAIEmbedder

    return OpenAIEmbedder


# name -> loader of the class; modules are imported only when their provider is asked for.
PROVIDERS: dict[str, Callable[[], type[Embedder]]] = {
    "minilm": _minilm,
    "openai": _openai,
}


def make_embedder(provider: str, **options: Any) -> Embedder:
    """``make_embedder("minilm")``, ``make_embedder("openai", base_url=..., model=...)``."""
    known = ", ".join(sorted(PROVIDERS))
    loader = PROVIDERS.get(provider.strip().lower())
    if loader is None:
        raise InvalidInput(f"unknown embedding provider {provider!r}", f"known: {known}")
    cls = loader()
    try:
        inspect.signature(cls).bind(**options)
    except TypeError as exc:
        params = ", ".join(p for p in inspect.signature(cls).parameters if p != "self")
        raise InvalidInput(
            f"bad options for embedding provider {provider!r}: {exc}", f"it takes: {params}"
        ) from exc
    return cls(**options)
