"""The engine as an evaluation ``Retriever``: each group in a fresh namespace of the
open store, filed and searched as ``Kredenc.add_passages`` and ``Kredenc.search`` do.

Documents longer than the store's chunk size are cut by the same chunker ingestion
uses (the embedding model reads at most 256 tokens); a document's rank is the rank
of its best chunk, as for any document a user ingests.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kredenc.eval.datasets import EvalDoc
from kredenc.ingest.chunker import DEFAULT_SENTENCE_SIZE, sentence_spans, split_spans
from kredenc.ingest.mentions import Titled, mention_pairs
from kredenc.ingest.passages import add_passages
from kredenc.ingest.pipeline import link_payloads
from kredenc.memory.turns import turn_context
from kredenc.retrieve.iterative import RoundHits
from kredenc.retrieve.query import search

if TYPE_CHECKING:
    from kredenc.storage.store import Store

_BATCH = 256
_OVERFETCH = 4  # chunks asked for per wanted document
_SENTENCE_OVERFETCH = 10  # sentence units asked for per wanted document


class EngineRetriever:
    """Files each corpus as passages (``record_type``) and searches with ``search_opts``.

    ``mention_links`` > 0 files ``mentions`` edges between passages whose text names
    another document's title (at most that many per passage; ``ingest.mentions``), so
    graph expansion (``hops``) has links to walk in titled corpora such as Wikipedia
    paragraphs. ``namespace`` is the group's namespace (a new one at each ``reset``).
    ``dated``: each document is filed at its time (``EvalDoc.meta["time"]``, where the
    dataset dates them) and each query searched as asked at its time (``search``'s
    ``asked_at``), so a time the query names is read.
    ``units="sentences"`` files sentence windows instead of chunks: each unit is a
    sentence or a few (``ingest.chunker.sentence_spans``, at most ``sentence_size``
    characters) with its document's title as a field, and the ``window`` units on
    either side of it (default 1) as its card's context (found by, weighted below its
    own words; not embedded). With chunks, ``window`` > 0 gives each chunk its
    neighbouring chunks as context the same way (default 0). Both shape chunk corpora
    only; turns are filed as conversations (each with the turns before it).
    """

    def __init__(
        self,
        store: Store,
        *,
        record_type: str = "chunk",
        chunk_size: int | None = None,
        mention_links: int = 0,
        dated: bool = False,
        units: str = "chunks",
        sentence_size: int = DEFAULT_SENTENCE_SIZE,
        window: int | None = None,
        **search_opts: Any,
    ) -> None:
        if units not in ("chunks", "sentences"):
            raise ValueError("units must be 'chunks' or 'sentences'")
        if window is not None and window < 0:
            raise ValueError("window must be 0 or more")
        self.units = units
        self.sentence_size = sentence_size
        self.window = (1 if units == "sentences" else 0) if window is None else window
        self.store = store
        self.dated = dated
        self.mention_links = mention_links
        self.links = 0
        self.record_type = record_type
        self.chunk_size = chunk_size or store.settings.chunk_size
        self.overlap = min(store.settings.chunk_overlap, self.chunk_size // 2)
        self.search_opts = search_opts
        self._run = secrets.token_hex(3)
        self._groups = 0
        self.namespace = f"eval-{self._run}-0"
        self._chunked = False
        self.queries = 0
        self.searches = 0  # searches run (an iterative query runs several)

    def reset(self) -> None:
        self._groups += 1
        self._chunked = False
        self.namespace = f"eval-{self._run}-{self._groups}"

    def index(self, docs: Sequence[EvalDoc]) -> None:
        items: list[dict[str, Any]] = []
        titles: list[str] = []
        sessions: dict[Any, list[str]] = {}
        for d in docs:
            text = d.text.strip()
            if not text:
                continue
            if self.record_type == "chunk":
                units = self._units(d, text)
                items += units
                titles += [d.title] * len(units)
                continue
            # Filed as a conversation: each turn's card carries the turns before it in
            # the same session, as memory.turns.TurnFiler files a conversation.
            context = ""
            session = d.meta.get("session")
            if session is not None:
                before = sessions.setdefault(session, [])
                context = turn_context([*before, text], len(before))
                before.append(text)
            spans = self.chunk_spans(text)
            self._chunked = self._chunked or len(spans) > 1
            for start, end in spans:
                piece = text[start:end].strip()
                if piece:
                    items.append(self._item(d, piece, context))
                    titles.append(d.title)
        ids: list[str] = []
        for start in range(0, len(items), _BATCH):
            batch = items[start : start + _BATCH]
            ids += add_passages(self.store, self.namespace, batch, record_type=self.record_type)
        if self.mention_links > 0:
            passages = [
                Titled(rid, title, item["text"])
                for rid, title, item in zip(ids, titles, items, strict=True)
            ]
            pairs = mention_pairs(passages, max_per_doc=self.mention_links)
            if pairs:
                self.store.write(link_payloads(self.namespace, pairs, "mentions"), batch=True)
                self.links += len(pairs)

    def chunk_spans(self, text: str) -> list[tuple[int, int]]:
        """Where ``text`` is cut into chunks: whole when it fits ``chunk_size``, else
        by the ingest chunker's :func:`~kredenc.ingest.chunker.split_spans`."""
        if len(text) <= self.chunk_size:
            return [(0, len(text))]
        return split_spans(text, self.chunk_size, self.overlap)

    def _units(self, d: EvalDoc, text: str) -> list[dict[str, Any]]:
        """``d`` as chunks, or as sentence units (``units="sentences"``, titled), each
        with its ``window`` neighbours on either side as context."""
        title = ""
        if self.units == "sentences":
            body = text[len(d.title) :] if d.title and text.startswith(d.title) else text
            title = d.title
            spans = sentence_spans(body, self.sentence_size)
        else:
            body = text
            spans = self.chunk_spans(text)
        pieces = [p for p in (body[a:b].strip() for a, b in spans) if p] or [text]
        self._chunked = self._chunked or len(pieces) > 1
        w = self.window
        return [
            self._item(
                d, piece, " ".join(pieces[max(0, n - w) : n] + pieces[n + 1 : n + 1 + w]), title
            )
            for n, piece in enumerate(pieces)
        ]

    def _item(self, d: EvalDoc, text: str, context: str, title: str = "") -> dict[str, Any]:
        item: dict[str, Any] = {
            "text": text,
            "context": context,
            "doc_id": f"eval:{d.id}",
            "meta": {"eval_id": d.id},
        }
        if title:
            item["title"] = title
        if self.dated and d.meta.get("time") is not None:
            item["ts"] = float(d.meta["time"])
        return item

    def search(self, query: str, k: int, *, asked_at: float | None = None) -> list[str]:
        if not query.strip():
            return []
        overfetch = _SENTENCE_OVERFETCH if self.units == "sentences" else _OVERFETCH
        depth = min(1000, k * overfetch) if self._chunked else k
        when = asked_at if self.dated else None
        hits = search(self.store, self.namespace, query, k=depth, asked_at=when, **self.search_opts)
        self.queries += 1
        self.searches += hits.searches if isinstance(hits, RoundHits) else 1
        ranked: dict[str, None] = {}
        for hit in hits:
            ranked.setdefault(str(hit.meta.get("eval_id", hit.id)), None)
            if len(ranked) == k:
                break
        return list(ranked)
