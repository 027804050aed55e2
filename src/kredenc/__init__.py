"""kredenc: a local-first memory and retrieval engine for LLM agents.

The public API is what ``__all__`` names (pinned by ``tests/test_public_api.py``):
the facade :class:`Kredenc`, its asyncio twin :class:`AsyncKredenc` and :func:`wrap`,
the facade over HTTP :class:`Client` (a running ``kredenc serve``),
the records and results it hands back (the answer loop's :class:`Answer` and what it
holds among them), and the exception tree. Everything else is internal and may change.

``import kredenc`` stays light: the records and errors load now, the facade and the
result types that live beside the machinery (recall, ingest) on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any, TypeVar

from kredenc.errors import (
    CannotListen,
    CorruptLog,
    DeadlineExceeded,
    FetchRefused,
    FormatError,
    IndexOutdated,
    IngestError,
    InvalidInput,
    KredencError,
    MissingExtra,
    NotFound,
    ProviderError,
    ReadOnlyRecord,
    StoreClosed,
    StoreError,
    StoreLocked,
    StoreReadOnly,
)
from kredenc.records import ContextGraph, GraphEdge, GraphNode, Hit, Hits, LegScore, Memory

if TYPE_CHECKING:
    from kredenc.aio import AsyncKredenc
    from kredenc.client import Client
    from kredenc.engine import Kredenc
    from kredenc.grounding.base import Evaluation, SentenceSupport
    from kredenc.ingest.pipeline import IngestReport
    from kredenc.loop.answer import Answer, ChunkVerdict, Citation, Step
    from kredenc.recall.budget import Budget
    from kredenc.recall.deps import Conversant
    from kredenc.recall.result import RecallItem, RecallResult

__all__ = [
    "Answer",
    "AsyncKredenc",
    "Budget",
    "CannotListen",
    "ChunkVerdict",
    "Citation",
    "Client",
    "ContextGraph",
    "CorruptLog",
    "DeadlineExceeded",
    "Evaluation",
    "FetchRefused",
    "FormatError",
    "GraphEdge",
    "GraphNode",
    "Hit",
    "Hits",
    "IndexOutdated",
    "IngestError",
    "IngestReport",
    "InvalidInput",
    "Kredenc",
    "KredencError",
    "LegScore",
    "Memory",
    "MissingExtra",
    "NotFound",
    "ProviderError",
    "ReadOnlyRecord",
    "RecallItem",
    "RecallResult",
    "SentenceSupport",
    "Step",
    "StoreClosed",
    "StoreError",
    "StoreLocked",
    "StoreReadOnly",
    "wrap",
]
__version__ = "0.1.0"

# Names whose modules pull in storage, providers or the recall machinery: imported on
# first use (``kredenc.Kredenc``, ``from kredenc import wrap``), then cached here.
_LAZY = {
    "Kredenc": "kredenc.engine",
    "AsyncKredenc": "kredenc.aio",
    "Client": "kredenc.client",
    "Answer": "kredenc.loop.answer",
    "ChunkVerdict": "kredenc.loop.answer",
    "Citation": "kredenc.loop.answer",
    "Step": "kredenc.loop.answer",
    "Evaluation": "kredenc.grounding.base",
    "SentenceSupport": "kredenc.grounding.base",
    "IngestReport": "kredenc.ingest.pipeline",
    "Budget": "kredenc.recall.budget",
    "RecallItem": "kredenc.recall.result",
    "RecallResult": "kredenc.recall.result",
}
C = TypeVar("C")


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kredenc' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def wrap(client: C, kb: Conversant | None = None, **options: Any) -> C:
    """Recall before and filing after every ``client.chat.completions.create``
    (:func:`kredenc.recall.wrap.wrap`); without ``kb`` the default store
    (``KREDENC_HOME``, else ``./.kredenc``) is opened for the life of the process."""
    from kredenc.recall.wrap import wrap as wrap_client

    if kb is None:
        from kredenc.engine import Kredenc

        return wrap_client(client, Kredenc.open(), **options)
    return wrap_client(client, kb, **options)
