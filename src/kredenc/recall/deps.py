"""What the recall reflex needs from the rest of kredenc, and nothing more.

Recall depends on these protocols, never on the facade: :class:`RecallStore` is what
the reflex reads of an open store (``kredenc.storage.store.Store`` fits it as it is;
every call names its namespace), and :class:`Conversant` is what the integrations
(``wrap``, the filer) need of the memory they recall from and file into (the
``Kredenc`` facade fits it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kredenc.config import Settings
from kredenc.recall.budget import Budget
from kredenc.recall.result import RecallResult
from kredenc.retrieve.search import LegIndex
from kredenc.storage.index.vectors import F32
from kredenc.storage.store import TextEmbedder

if TYPE_CHECKING:
    from kredenc.storage.store import Store


class RecallIndex(LegIndex, Protocol):
    """What recall reads of the index besides the legs."""

    def resolve(self, ns: str, rowids: Sequence[int]) -> dict[int, tuple[str, int]]:
        """rowid -> (id, log offset) of the live records of ``ns``."""
        ...

    def edges_among(self, ns: str, ids: Sequence[str]) -> list[tuple[str, str, str, float]]:
        """(src, dst, relation, weight) of the edges between ``ids``."""
        ...

    def stats(self, ns: str) -> dict[str, Any]:
        """Counts per drawer (``stats["drawers"]``: ``type`` and ``records`` each)."""
        ...

    def shards(self) -> Mapping[str, object]:
        """The vector shards, loaded (the warm-up calls it once)."""
        ...

    def vectors_ready(self, wait: float = ...) -> bool:
        """Whether a dense search needs no load first; starts that load if it does."""
        ...

    def load_terms(self) -> int:
        """Load what a spelling correction reads (the warm-up calls it once)."""
        ...


class RecallLog(Protocol):
    """What recall reads of the log."""

    def read(self, offset: int) -> dict[str, Any]:
        """The record's payload at ``offset``."""
        ...


class RecallStore(Protocol):
    """An open store as recall reads it (namespace-free: every call names ``ns``)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def home(self) -> Path: ...

    @property
    def index(self) -> RecallIndex: ...

    @property
    def haystack(self) -> RecallLog: ...

    @property
    def embedder(self) -> TextEmbedder:
        """The model (named by the startup line; loaded by the warm-up)."""
        ...

    def embed_query(self, text: str) -> F32:
        """A query's vector (cached: a late embedding warms it for a repeat)."""
        ...

    def note_access(self, ns: str, ids: Sequence[str]) -> None:
        """Count a recall of ``ids`` (the store files the counts in batches)."""
        ...


class TurnSink(Protocol):
    """Where the turns of a conversation are filed."""

    def file_turns(self, session_id: str, turns: Sequence[Mapping[str, Any]]) -> list[str]:
        """File the turns (``role``, ``content``) of a session; their ids."""
        ...


@runtime_checkable
class BatchTurnSink(TurnSink, Protocol):
    """A sink whose turns can be prepared as log payloads, to be written in one batch
    with other sessions' turns (``ingest.passages.write_payloads``): what lets the
    background filer embed many turns in one model call (the facade is one)."""

    @property
    def store(self) -> Store: ...

    def prepare_turns(
        self, session_id: str, turns: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        """The log payloads that filing the turns writes, not yet written."""
        ...


class Conversant(TurnSink, Protocol):
    """A memory that recalls before a model call and files the turn after it: what
    ``wrap`` needs (the ``Kredenc`` facade is one)."""

    @property
    def namespace(self) -> str: ...

    @property
    def store(self) -> RecallStore:
        """The open store (warmed up and announced when a client is wrapped)."""
        ...

    def recall(
        self,
        messages: Sequence[Any],
        *,
        session_id: str,
        budget: Budget | Mapping[str, Any] | None = None,
        dry_run: bool | None = None,
        time_budget_ms: float | None = None,
    ) -> RecallResult:
        """The messages with the recalled memories appended (never raises)."""
        ...
