"""Filing loaded documents into a store: the ingest run behind ``Kredenc.ingest``.

Every function takes the open store and the namespace ``ns`` to file into.

Each document is one all-or-nothing batch (see ``pipeline``); ``links_to`` edges
are drawn at the end, once both ends are filed, and so are ``mentions`` edges: a
chunk that names the title of another document filed in the same run is linked to
that document's lead chunk (``ingest.mentions``; at most ``mention_links`` each).
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kredenc.checks import check_name
from kredenc.config import Settings
from kredenc.errors import KredencError, StoreError
from kredenc.ingest.chunker import chunk as cut
from kredenc.ingest.document import Chunk, LoadedDocument
from kredenc.ingest.loaders.base import (
    EMPTY,
    LoadLimits,
    collapsed_warnings,
    symlink_policy,
)
from kredenc.ingest.loaders.registry import loader_for
from kredenc.ingest.mentions import Titled, mention_pairs
from kredenc.ingest.pipeline import (
    FileOutcome,
    IngestReport,
    content_hash,
    document_payloads,
    link_payloads,
)
from kredenc.ingest.redact import redact_url
from kredenc.ingest.sources import iter_sources

if TYPE_CHECKING:
    from kredenc.storage.store import Store

log = logging.getLogger(__name__)


def ingest(
    store: Store,
    ns: str,
    sources: Sequence[str | Path] | str | Path,
    *,
    drawer: str = "documents",
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    on_progress: Callable[[str, IngestReport], None] | None = None,
    follow_symlinks: bool = False,
    names: Mapping[str, str] | None = None,
) -> IngestReport:
    """Load files, folders and URLs and file each document into ``ns`` as one batch.

    ``chunk_size`` and ``chunk_overlap`` default to the store's settings. One bad
    source never stops the rest: its error lands in ``report.failed``. ``names`` maps
    a source (its resolved path) to the name it is filed and reported under: a file
    uploaded to a server is saved under a generated name, and filed as the name it was
    uploaded with (see :func:`_rename`).
    """
    store.check_writable()
    check_name("drawer", drawer)
    s = store.settings
    chunk_size = chunk_size or s.chunk_size
    chunk_overlap = s.chunk_overlap if chunk_overlap is None else chunk_overlap
    items = [sources] if isinstance(sources, str | Path) else list(sources)
    report = IngestReport()
    started = time.perf_counter()
    links: list[tuple[str, str]] = []
    filed: list[tuple[str, list[tuple[str, str]]]] = []
    inc = list(include) if include is not None else None
    excl = list(exclude) if exclude is not None else None
    with symlink_policy(follow=follow_symlinks, on_skip=lambda s, why: _skip(report, s, why)):
        for source in iter_sources([str(s) for s in items], inc, excl):
            name = (names or {}).get(source)
            try:
                for doc in _load(source, store.settings):
                    if name is not None:
                        _rename(doc, name)
                    chunks = cut(doc, size=chunk_size, overlap=chunk_overlap)
                    if not chunks:  # nothing to find it by: no document of 0 chunks
                        _skip(report, redact_url(doc.source), _emptied(store, ns, doc))
                        continue
                    parts = file_document(store, ns, doc, chunks, drawer, report)
                    if parts:
                        filed.append((doc.title, parts))
                    links.extend((doc.source, target) for target in doc.links)
            except StoreError:
                # The store failed, not this source: the run stops (what was filed
                # stays filed, each document whole) rather than fail every file after.
                raise
            except KredencError as exc:
                reason = redact_url(str(exc))  # a URL's password is never reported
                if name is not None:  # nor the path an upload was saved under
                    reason = reason.replace(source, name)
                # INFO, not WARNING: the report carries it, and the CLI prints it once.
                log.info("ingest: %s", reason)
                shown = redact_url(source if name is None else name)
                report.failed.append((shown, reason))
                report.files.append(FileOutcome(shown, "failed", error=reason))
            if on_progress is not None:
                on_progress(source if name is None else name, report)
    file_links(store, ns, links, report)
    file_mentions(store, ns, filed, report)
    report.seconds = time.perf_counter() - started
    return report


def _load(source: str, settings: Settings) -> list[LoadedDocument]:
    """The documents of one source, within the ``ingest_*`` limits; a loader's repeated
    warnings are collapsed into one line with a count."""
    loader = loader_for(source, settings)
    limits = LoadLimits.from_settings(settings)
    limits.check_file(source)
    with collapsed_warnings(type(loader).__module__):
        docs = loader.load(source)
    limits.cut_lines(docs)
    limits.check_documents(docs)
    return docs


def _rename(doc: LoadedDocument, name: str) -> None:
    """File ``doc`` as ``name``: its origin (the key a later upload of the same name
    replaces), and its title where the loader fell back to the file's stem."""
    if doc.title == Path(doc.source).stem:
        doc.title = Path(name).stem or name
    doc.source = name


def _skip(report: IngestReport, source: str, reason: str) -> None:
    log.info("ingest: %s: skipped: %s", source, reason)  # the report carries it
    report.skipped.append((source, reason))


def _emptied(store: Store, ns: str, doc: LoadedDocument) -> str:
    """Why a source with no text is skipped: :data:`EMPTY`, and, when an earlier version
    of it was filed, that it stays (an empty file may be a sync half done) and how to
    forget it."""
    earlier = store.index.document(ns, doc.source)
    if earlier is None:
        return EMPTY
    where = ["--store", shlex.quote(str(store.home))]
    if ns != store.settings.namespace:
        where += ["--namespace", shlex.quote(ns)]
    forget = " ".join(["kredenc", *where, "forget", earlier[0]])
    return (
        f"{EMPTY}; its earlier version, document {earlier[0]}, stays in the store "
        f"(forget it with '{forget}')"
    )


def file_document(
    store: Store,
    ns: str,
    doc: LoadedDocument,
    chunks: list[Chunk],
    drawer: str,
    report: IngestReport,
) -> list[tuple[str, str]]:
    """File one document (or skip it when its content is unchanged); returns the new
    chunks as (id, text), in order (none when unchanged)."""
    digest = content_hash(doc)
    existing = store.index.document(ns, doc.source)
    if existing is not None and existing[1] == digest:
        report.unchanged += 1
        report.doc_ids[doc.source] = existing[0]
        report.files.append(FileOutcome(redact_url(doc.source), "unchanged"))
        return []
    replaces = None
    version = 1
    if existing is not None:
        replaces = (existing[0], store.index.parts_of(ns, existing[0]))
        version = existing[2] + 1
    doc_id, payloads = document_payloads(
        ns, drawer, doc, chunks, digest, version=version, replaces=replaces
    )
    puts = [p for p in payloads if p["op"] == "put" and p["type"] == "chunk"]
    store.write(payloads, batch=True, vectors=store.vectors_for(puts))
    report.documents += 1
    report.chunks += len(puts)
    report.replaced += existing is not None
    report.doc_ids[doc.source] = doc_id
    status = "replaced" if existing is not None else "filed"
    report.files.append(FileOutcome(redact_url(doc.source), status, len(puts)))
    return [(str(p["id"]), str(p["text"])) for p in puts]


def file_links(store: Store, ns: str, links: list[tuple[str, str]], report: IngestReport) -> None:
    pairs: list[tuple[str, str]] = []
    for src, dst in links:
        a = store.index.document(ns, src)
        b = store.index.document(ns, dst)
        if a is not None and b is not None:
            pairs.append((a[0], b[0]))
    if pairs:
        payloads = link_payloads(ns, pairs)
        store.write(payloads, batch=len(payloads) > 1)
        report.links += len(payloads)


def file_mentions(
    store: Store, ns: str, filed: list[tuple[str, list[tuple[str, str]]]], report: IngestReport
) -> None:
    """``mentions`` edges from each chunk filed in this run to the lead chunk of every
    other document of the run whose title it names."""
    limit = store.settings.mention_links
    if limit <= 0 or len(filed) < 2:
        return
    leads = [Titled(parts[0][0], title, "") for title, parts in filed if title]
    chunks = [Titled(cid, title, text) for title, parts in filed for cid, text in parts]
    pairs = mention_pairs(chunks, targets=leads, max_per_doc=limit)
    if pairs:
        store.write(link_payloads(ns, pairs, "mentions"), batch=len(pairs) > 1)
        report.mentions += len(pairs)
