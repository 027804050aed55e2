"""From loaded documents to log records: one all-or-nothing batch per document.

A document is keyed by its source and the hash of its content. Re-ingesting an
unchanged source writes nothing; a changed one tombstones the old document and its
chunks and files the new ones in the same batch (the embedding cache means only
chunks whose text changed are embedded again). Edges: chunk ``part_of`` document,
chunk ``next`` chunk, document ``links_to`` document and chunk ``mentions`` chunk (drawn
once both are filed).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from kredenc.ingest.document import Chunk, LoadedDocument
from kredenc.records import new_id, now


@dataclass(frozen=True)
class FileOutcome:
    """One document's (or failed source's) outcome: ``status`` is ``filed``,
    ``replaced``, ``unchanged`` or ``failed``; ``chunks`` filed, or the ``error``."""

    source: str
    status: str
    chunks: int = 0
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "status": self.status}
        if self.status == "failed":
            out["error"] = self.error
        else:
            out["chunks"] = self.chunks
        return out


@dataclass
class IngestReport:
    """What an ingest run did; ``failed`` holds (source, one-line reason) for each source
    that could not be read, ``skipped`` (source, reason) for each left out on purpose
    (a symlink that leaves the folder walked), ``files`` each document's or failed
    source's outcome in order."""

    documents: int = 0
    chunks: int = 0
    unchanged: int = 0
    replaced: int = 0
    links: int = 0
    mentions: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    doc_ids: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    #: What happened to each document, or to each source that failed, in order.
    files: list[FileOutcome] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "chunks": self.chunks,
            "unchanged": self.unchanged,
            "replaced": self.replaced,
            "links": self.links,
            "mentions": self.mentions,
            "failed": [{"source": s, "error": e} for s, e in self.failed],
            "skipped": [{"source": s, "reason": r} for s, r in self.skipped],
            "seconds": round(self.seconds, 3),
            "files": [f.to_json() for f in self.files],
        }


def content_hash(doc: LoadedDocument) -> str:
    digest = hashlib.sha256()
    digest.update(doc.title.encode("utf-8"))
    for section in doc.sections:
        digest.update(b"\x1e")
        digest.update(section.text.encode("utf-8"))
        digest.update(repr((section.page, section.heading_path, section.start_s)).encode())
    return digest.hexdigest()


def document_payloads(
    ns: str,
    drawer: str,
    doc: LoadedDocument,
    chunks: list[Chunk],
    digest: str,
    *,
    version: int,
    replaces: tuple[str, list[str]] | None,
) -> tuple[str, list[dict[str, Any]]]:
    """The batch for one document: tombstones of the old version, the document,
    its chunks and their ``part_of``/``next`` edges. Returns (doc id, payloads)."""
    ts = now()
    out: list[dict[str, Any]] = []
    if replaces is not None:
        old_doc, old_chunks = replaces
        out.extend({"op": "tombstone", "ns": ns, "id": cid, "ts": ts} for cid in old_chunks)
        out.append({"op": "tombstone", "ns": ns, "id": old_doc, "ts": ts})
    doc_id = new_id("document")
    out.append(
        {
            "op": "put",
            "ns": ns,
            "id": doc_id,
            "type": "document",
            "drawer": drawer,
            "ts": ts,
            "origin": doc.source,
            "title": doc.title,
            "loader": doc.loader,
            "content_hash": digest,
            "version": version,
            "chunks": len(chunks),
            "meta": doc.meta,
            "source": "ingest",
        }
    )
    previous: str | None = None
    for chunk in chunks:
        cid = new_id("chunk")
        payload: dict[str, Any] = {
            "op": "put",
            "ns": ns,
            "id": cid,
            "type": "chunk",
            "drawer": drawer,
            "ts": ts,
            "text": chunk.text,
            "title": chunk.title,
            "origin": chunk.source,
            "loader": chunk.loader,
            "doc_id": doc_id,
            "index": chunk.index,
            "source": "ingest",
        }
        if chunk.page is not None:
            payload["page"] = chunk.page
        if chunk.heading_path:
            payload["heading_path"] = list(chunk.heading_path)
            payload["context"] = " > ".join(chunk.heading_path)
            payload["embed_context"] = payload["context"]
        if chunk.start_s is not None:
            payload["start_s"] = chunk.start_s
        if chunk.meta:
            payload["meta"] = chunk.meta
        out.append(payload)
        out.append(_edge(ns, cid, doc_id, "part_of", ts))
        if previous is not None:
            out.append(_edge(ns, previous, cid, "next", ts))
        previous = cid
    return doc_id, out


def _edge(ns: str, src: str, dst: str, rel: str, ts: float) -> dict[str, Any]:
    return {"op": "edge", "ns": ns, "src": src, "dst": dst, "rel": rel, "weight": 1.0, "ts": ts}


def link_payloads(
    ns: str, links: list[tuple[str, str]], rel: str = "links_to"
) -> list[dict[str, Any]]:
    ts = now()
    return [_edge(ns, a, b, rel, ts) for a, b in links if a != b]
