"""The Kredenc facade: one object to open a store, file, find and forget."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from kredenc.config import Settings, load_settings
from kredenc.errors import InvalidInput, NotFound, ReadOnlyRecord, StoreError

if TYPE_CHECKING:
    from kredenc.recall.budget import Budget
    from kredenc.recall.reflex import RecallResult
from kredenc.ingest.pipeline import IngestReport
from kredenc.memory.fields import SCORES, parse_time, validate_fields, validate_tags
from kredenc.memory.relations import check_relation, edge_payloads
from kredenc.memory.turns import CONTEXT_TURNS, turn_context, turn_tags
from kredenc.providers.embed.base import Embedder
from kredenc.providers.rerank import Reranker, make_reranker
from kredenc.records import Appended, ContextGraph, Hit, Memory, new_id, now
from kredenc.retrieve import context_graph as graphs
from kredenc.retrieve import search as searching
from kredenc.storage import purge as purging
from kredenc.storage import repair
from kredenc.storage import store as layout
from kredenc.storage.haystack import HEADER_SIZE, Haystack
from kredenc.storage.housekeeper import Housekeeper, StoreLock
from kredenc.storage.index.filters import Filters
from kredenc.storage.index.sqlite import (
    IndexedRecord,
    IndexOutdated,
    SqliteIndex,
    embed_text_of,
    text_hash,
)
from kredenc.storage.index.vectors import F32, AnnParams

log = logging.getLogger(__name__)

_REPLAY_CHUNK = 2000


def make_default_embedder(settings: Settings) -> Embedder:
    from kredenc.providers.embed.factory import make_embedder

    if settings.embed_provider == "openai":
        return make_embedder(
            "openai",
            base_url=settings.embed_url,
            model=settings.embed_model,
            api_key=settings.embed_api_key,
        )
    return make_embedder(
        "minilm",
        intra_op_num_threads=settings.embed_threads,
        quantized_queries=settings.embed_query_quantized,
    )


class Kredenc:
    """An open store. Use :meth:`open`; close it (or use ``with``) when done."""

    def __init__(
        self,
        settings: Settings,
        embedder: Embedder,
        *,
        namespace: str,
        read_only: bool = False,
    ) -> None:
        self.settings = settings
        self.embedder = embedder
        self.namespace = _check_name("namespace", namespace)
        self.home = settings.home
        self.read_only = read_only
        layout.check_directory(self.home)
        if not layout.is_store(self.home):
            if read_only:
                raise StoreError(f"no store at {self.home}", "run 'kredenc init' first")
            layout.init_store(self.home, embedder.model_id, embedder.dim)
        self.meta = layout.read_meta(self.home)
        layout.check_model(self.meta, embedder.model_id, embedder.dim)
        self._lock = None if read_only else StoreLock(self.home / layout.LOCK_FILE)
        self._housekeeper: Housekeeper | None = None
        try:
            self.haystack = Haystack(
                self.home / layout.LOG_FILE,
                durability=settings.durability,
                writable=not read_only,  # only a writer cuts a torn tail
            )
            if self.haystack.log_id.hex() != self.meta.log_id:
                raise StoreError(
                    f"{self.home}: haystack log id does not match store.json",
                    "the log and store.json belong to different stores",
                )
            self.index = self._open_index()
            if not read_only:
                purging.discard_stale_generation(self.home)
                self._catch_up()
                self._housekeeper = Housekeeper(self.haystack, self.index, self._embed_many)
        except BaseException:
            if self._lock is not None:
                self._lock.release()
            raise
        self._embed_query = lru_cache(maxsize=1024)(self._query_vector)
        self.embed_query = self._embed_query  # public: a query's vector, cached
        self._rerankers: dict[str, Reranker | None] = {}
        self._access: dict[str, dict[str, int]] = {}
        # The last turns filed per session in this process: context for the next ones.
        self._recent_turns: dict[str, list[str]] = {}
        self._access_lock = threading.Lock()

    # -- opening and closing --------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | Path | None = None,
        namespace: str | None = None,
        *,
        embedder: Embedder | None = None,
        read_only: bool = False,
        **overrides: Any,
    ) -> Kredenc:
        """Open (creating if needed) the store at ``path`` (default ``KREDENC_HOME``)."""
        settings = load_settings(path, namespace=namespace, **overrides)
        layout.check_directory(settings.home)
        return cls(
            settings,
            embedder or make_default_embedder(settings),
            namespace=settings.namespace,
            read_only=read_only,
        )

    def __enter__(self) -> Kredenc:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Flush, stop the writer, close files and release the lock. Idempotent."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        if self._housekeeper is not None:
            self.flush_access()
            self._housekeeper.close()
            self._housekeeper = None
        if getattr(self, "index", None) is not None:
            self.index.close()
        if getattr(self, "haystack", None) is not None:
            self.haystack.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _open_index(self) -> SqliteIndex:
        if self.read_only and not (self.home / layout.INDEX_FILE).exists():
            # A reader creates nothing: the index is built by a writer (or rebuild).
            raise StoreError(
                f"{self.home / layout.INDEX_FILE} is missing",
                f"run 'kredenc --store {self.home} rebuild' to build it from the log",
            )
        try:
            return self._new_index()
        except IndexOutdated as exc:
            if self.read_only:
                raise
            log.warning("%s: dropping the index; it is rebuilt from the log", exc.message)
            layout.drop_index(self.home)
            return self._new_index()
        except StoreError as exc:  # name the derived file at fault (index or cache)
            raise repair.blame(self.home, self._cache_path()) or exc from exc

    def _cache_path(self) -> Path:
        return repair.cache_path_of(self.home, self.settings.embed_cache)

    def _new_index(self) -> SqliteIndex:
        s = self.settings
        return SqliteIndex(
            self.home / layout.INDEX_FILE,
            dim=self.embedder.dim,
            model_id=self.embedder.model_id,
            cache_path=s.embed_cache,
            ann=AnnParams(
                threshold=s.ann_threshold,
                dtype=s.ann_dtype,
                connectivity=s.ann_connectivity,
                expansion_add=s.ann_expansion_add,
                expansion_search=s.ann_expansion_search,
            ),
        )

    def _catch_up(self) -> None:
        """Apply log records the index has not seen (after a crash or a rebuild)."""
        applied_seq, applied_end = self.index.applied()
        hay = self.haystack
        if applied_seq > hay.last_seq or applied_end > hay.end:
            log.warning(
                "index is ahead of the log (seq %d > %d): rebuilding", applied_seq, hay.last_seq
            )
            self.index.close()
            layout.drop_index(self.home)
            self.index = self._open_index()
            applied_seq, applied_end = 0, 0
        if applied_seq == hay.last_seq:
            return
        chunk: list[tuple[int, dict[str, Any]]] = []
        start = applied_end if applied_end >= HEADER_SIZE else HEADER_SIZE
        for rec in hay.iter_from(start):
            chunk.append((rec.offset, rec.payload))
            if len(chunk) >= _REPLAY_CHUNK:
                self.index.apply(chunk, None, self._embed_many, rec.end)
                chunk = []
        if chunk:
            self.index.apply(chunk, None, self._embed_many, hay.end)

    def rebuild(self, *, fresh_cache: bool = False) -> dict[str, int]:
        """Drop the index and rebuild it from the log (embeddings come from the cache).

        A derived file that is unreadable (or a cache with vectors of the wrong size,
        or any cache with ``fresh_cache``) is set aside as ``<name>.bad-<time>`` first.
        """
        self._writable()
        assert self._housekeeper is not None
        self._housekeeper.close()
        self.index.close()
        repair.set_aside_bad_files(
            self.home, self._cache_path(), dim=self.embedder.dim, fresh_cache=fresh_cache
        )
        layout.drop_index(self.home)
        self.index = self._open_index()
        self._catch_up()
        self.index.compact()  # one FTS5 segment: what the replay wrote in many
        self.index.shards()  # load vectors and build ANN graphs now, not on first search
        self.index.save_ann()
        self._housekeeper = Housekeeper(self.haystack, self.index, self._embed_many)
        live = self.index.reader().execute("SELECT count(*) FROM records WHERE deleted=0")
        return {"records": int(live.fetchone()[0]), "last_seq": self.haystack.last_seq}

    def compact(
        self, *, purge: bool = False, on_step: Callable[[str], None] | None = None
    ) -> dict[str, Any]:
        """Merge the card index; with ``purge``, first write a new log generation without
        the text of forgotten records and rebuild the index and cache from it
        (``kredenc.storage.purge``). The writer lock is held throughout."""
        hk = self._writable()
        if not purge:
            return {"purged": 0, "seconds": round(self.index.compact(), 3)}
        self.flush_access()
        hk.close()
        self.index.close()
        self.haystack.close()
        try:
            report = purging.purge_store(self.home, self._cache_path(), on_step=on_step)
        finally:
            self.haystack = Haystack(
                self.home / layout.LOG_FILE, durability=self.settings.durability
            )
            self.index = self._open_index()
            self._catch_up()
            self.index.compact()
            self._housekeeper = Housekeeper(self.haystack, self.index, self._embed_many)
        return report.to_json()

    # -- embedding ------------------------------------------------------------
    def _embed_many(self, texts: Sequence[str]) -> F32:
        return self.embedder.embed(list(texts))

    def _query_vector(self, text: str) -> F32:
        vec: F32 = self.embedder.embed_query(text)
        return vec

    def _vectors_for(self, payloads: Iterable[dict[str, Any]]) -> dict[str, F32]:
        """Vectors for new records: from the cache by text hash, else embedded now."""
        texts = {p["id"]: embed_text_of(p) for p in payloads}
        hashes = {rid: text_hash(t) for rid, t in texts.items()}
        cached = self.index.cached_vectors(list(set(hashes.values())))
        missing = [rid for rid, h in hashes.items() if h not in cached]
        out = {rid: cached[h] for rid, h in hashes.items() if h in cached}
        if missing:
            fresh = self.embedder.embed([texts[rid] for rid in missing])
            out.update({rid: fresh[i] for i, rid in enumerate(missing)})
        return out

    # -- writing --------------------------------------------------------------
    def write(
        self,
        payloads: list[dict[str, Any]],
        *,
        batch: bool = False,
        vectors: dict[str, F32] | None = None,
    ) -> list[Appended]:
        """Append prepared log records through the housekeeper (for jobs and filers
        inside kredenc that build their own payloads); returns where they landed."""
        return self._writable().write(payloads, batch=batch, vectors=vectors)

    def vectors_for(self, payloads: Iterable[dict[str, Any]]) -> dict[str, F32]:
        """Vectors for new ``put`` payloads: from the cache by text hash, else embedded."""
        return self._vectors_for(payloads)

    def _writable(self) -> Housekeeper:
        if self._housekeeper is None:
            raise StoreError("the store is open read-only or closed", "open it for writing")
        return self._housekeeper

    def remember(
        self,
        text: str,
        *,
        kind: str = "note",
        drawer: str = "memories",
        tags: Sequence[str] = (),
        meta: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Memory:
        """File one memory; returns it once it is durable and searchable.

        ``fields`` are the memory's scores and state: importance, confidence,
        stability (in [0, 1]), status, source, read_only, episode_id, task_status,
        valid_from, valid_to. Invalid values are rejected; nothing is written.
        """
        hk = self._writable()
        payload = self.memory_payload(text, kind, drawer, tags, meta, fields, strict=True)
        vectors = self._vectors_for([payload])
        (placed,) = hk.write([payload], vectors=vectors)
        return Memory.from_payload(payload, placed.offset)

    def remember_many(
        self, items: Sequence[Mapping[str, Any]], *, drawer: str = "memories", strict: bool = True
    ) -> list[Memory]:
        """File many memories as one all-or-nothing batch (one fsync).

        Each item is a mapping with ``text`` and any of remember()'s keywords.
        ``strict=False`` clamps and coerces bad fields with a warning instead.
        """
        hk = self._writable()
        payloads = []
        for item in items:
            rest = dict(item)
            text = rest.pop("text", None)
            payloads.append(
                self.memory_payload(
                    text,
                    rest.pop("kind", "note"),
                    rest.pop("drawer", drawer),
                    rest.pop("tags", ()),
                    rest.pop("meta", None),
                    rest,
                    strict=strict,
                )
            )
        if not payloads:
            return []
        vectors = self._vectors_for(payloads)
        placed = hk.write(payloads, batch=True, vectors=vectors)
        return [Memory.from_payload(p, w.offset) for p, w in zip(payloads, placed, strict=True)]

    def memory_payload(
        self,
        text: object,
        kind: str,
        drawer: str,
        tags: Sequence[str],
        meta: Mapping[str, Any] | None,
        fields: Mapping[str, Any],
        *,
        strict: bool,
    ) -> dict[str, Any]:
        """A validated ``put`` payload for a new memory (not yet written)."""
        checked_text = self._check_text(text)
        _check_name("drawer", drawer)
        if meta is not None and not isinstance(meta, Mapping):
            raise InvalidInput("meta must be a JSON object")
        values = validate_fields({**fields, "kind": kind, "tags": tags}, strict=strict)
        payload: dict[str, Any] = {
            "op": "put",
            "ns": self.namespace,
            "id": new_id("memory"),
            "type": "memory",
            "drawer": drawer,
            "kind": values["kind"],
            "ts": now(),
            "text": checked_text,
            "tags": values["tags"],
            "meta": dict(meta or {}),
            "scores": {k: values[k] for k in SCORES},
            "status": values["status"],
            "source": values["source"],
        }
        for key in ("read_only", "episode_id", "task_status", "valid_from", "valid_to"):
            if values[key] not in (None, False):
                payload[key] = values[key]
        return payload

    def _check_text(self, text: object) -> str:
        if not isinstance(text, str):
            raise InvalidInput("text must be a string")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput("text is not valid UTF-8", "pass UTF-8 text") from None
        if not text.strip():
            raise InvalidInput("text is empty", "pass the text to remember")
        limit = self.settings.max_text_chars
        if len(text) > limit:
            raise InvalidInput(
                f"text has {len(text):,} characters; the limit for one memory is {limit:,}",
                "split it, or ingest it as a document",
            )
        return text

    def _live(self, record_id: str) -> IndexedRecord:
        if not isinstance(record_id, str):
            raise InvalidInput("record id must be a string")
        _check_utf8("record id", record_id)
        found = self.index.lookup(self.namespace, record_id)
        if found is None or found.deleted:
            raise NotFound(f"no record {record_id!r} in namespace {self.namespace!r}")
        return found

    def score(self, record_id: str, *, reason: str | None = None, **fields: Any) -> Memory:
        """Change a memory's scores or state; only the fields given change."""
        hk = self._writable()
        if not fields:
            raise InvalidInput("nothing to change", "give at least one field, e.g. importance")
        if "kind" in fields or "tags" in fields or "read_only" in fields or "source" in fields:
            raise InvalidInput("kind, tags, source and read_only cannot be changed by score")
        values = validate_fields(fields, strict=True, partial=True)
        found = self._live(record_id)
        if found.state["read_only"]:
            raise ReadOnlyRecord(f"memory {record_id} is read-only", "it cannot be changed")
        if "task_status" in values and found.state["kind"] != "task":
            raise InvalidInput("task_status is only for memories of kind 'task'")
        payload: dict[str, Any] = {"op": "score", "ns": self.namespace, "id": record_id}
        payload.update(values)
        payload["ts"] = now()
        if reason:
            payload["reason"] = reason
        hk.write([payload])
        return self.get(record_id)

    def forget(self, record_id: str) -> None:
        """Hide a record everywhere at once (a tombstone in the log).

        Edges touching it go with it; memories ``derived_from`` it are marked
        ``disputed`` (with the reason) in the same batch, so nothing is silently
        orphaned.
        """
        hk = self._writable()
        found = self._live(record_id)
        if found.state["read_only"]:
            raise ReadOnlyRecord(f"memory {record_id} is read-only", "it cannot be forgotten")
        ts = now()
        payloads: list[dict[str, Any]] = [
            {"op": "tombstone", "ns": self.namespace, "id": record_id, "ts": ts}
        ]
        for derived in self.index.sources_of(self.namespace, record_id, "derived_from"):
            payloads.append(
                {
                    "op": "score",
                    "ns": self.namespace,
                    "id": derived,
                    "status": "disputed",
                    "reason": f"derived from {record_id}, which was forgotten",
                    "ts": ts,
                }
            )
        hk.write(payloads, batch=len(payloads) > 1)

    def relate(
        self, src: str, dst: str, rel: str, *, weight: float = 1.0, remove: bool = False
    ) -> None:
        """Add (or with ``remove`` delete) a typed edge between two records."""
        hk = self._writable()
        weight = check_relation(rel, weight)
        if src == dst:
            raise InvalidInput("a record cannot be related to itself")
        for rid in (src, dst):
            self._live(rid)
        payloads = edge_payloads(self.namespace, src, dst, rel, weight, now(), remove=remove)
        hk.write(payloads, batch=len(payloads) > 1)

    def use_namespace(self, namespace: str) -> None:
        """Switch this handle to another namespace of the same store."""
        self.namespace = _check_name("namespace", namespace)

    def add_passages(
        self,
        items: Sequence[Mapping[str, Any]],
        *,
        drawer: str = "passages",
        record_type: str = "chunk",
    ) -> list[str]:
        """File plain passages (``text``, optional ``title``, ``meta``, ``tags``) as one batch.

        The light path for corpora that need no loader or chunker (evaluation
        sets, pre-split text): no document record, no edges. Returns the new ids.
        """
        if record_type not in ("chunk", "turn"):
            raise InvalidInput("record_type must be 'chunk' or 'turn'")
        hk = self._writable()
        _check_name("drawer", drawer)
        ts = now()
        payloads: list[dict[str, Any]] = []
        for item in items:
            payload: dict[str, Any] = {
                "op": "put",
                "ns": self.namespace,
                "id": new_id(record_type),
                "type": record_type,
                "drawer": drawer,
                "ts": float(item.get("ts", ts)),
                "text": self._check_text(item.get("text")),
                "source": "ingest",
            }
            if item.get("title"):
                payload["title"] = str(item["title"])
            if item.get("meta"):
                payload["meta"] = dict(item["meta"])
            if item.get("tags"):
                payload["tags"] = validate_tags(item["tags"])
            for key in ("context", "embed_context", "doc_id"):
                if item.get(key):
                    payload[key] = str(item[key])
            payloads.append(payload)
        if not payloads:
            return []
        hk.write(payloads, batch=True, vectors=self._vectors_for(payloads))
        return [p["id"] for p in payloads]

    def file_turns(
        self,
        session_id: str,
        turns: Sequence[Mapping[str, Any]],
        *,
        drawer: str = "turns",
    ) -> list[str]:
        """File conversation turns (``role``, ``content``) of a session as one batch.

        Each becomes a ``turn`` record whose index card carries the session, the
        speaker and the turns just before it as context, and tags naming the session,
        the speaker and its extracted terms (see ``memory.turns``), so recall can find
        it by words and meaning.
        """
        _check_name("session_id", session_id)
        recent = self._recent_turns.pop(session_id, [])
        self._recent_turns[session_id] = recent  # most recently used last
        while len(self._recent_turns) > 1024:
            del self._recent_turns[next(iter(self._recent_turns))]
        items = []
        for turn in turns:
            role = str(turn.get("role", "user"))
            text = turn.get("content")
            if not isinstance(text, str) or not text.strip():
                continue
            header = f"session {session_id} {role}"
            items.append(
                {
                    "text": text,
                    "context": turn_context([*recent, text], len(recent), header=header),
                    "tags": turn_tags(session_id, role, text),
                    "meta": {"session": session_id, "role": role, **dict(turn.get("meta") or {})},
                }
            )
            recent.append(text)
            del recent[:-CONTEXT_TURNS]
        return self.add_passages(items, drawer=drawer, record_type="turn") if items else []

    # -- documents ------------------------------------------------------------
    def ingest(
        self,
        sources: Sequence[str | Path] | str | Path,
        *,
        drawer: str = "documents",
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        on_progress: Callable[[str, IngestReport], None] | None = None,
    ) -> IngestReport:
        """Load files, folders and URLs; file each document as one batch.

        One bad source never stops the rest: its error lands in ``report.failed``.
        Unchanged sources are skipped; changed ones replace their old version.
        """
        from kredenc.ingest.filing import ingest

        self._writable()
        _check_name("drawer", drawer)
        return ingest(
            self,
            sources,
            drawer=drawer,
            include=include,
            exclude=exclude,
            chunk_size=chunk_size or self.settings.chunk_size,
            chunk_overlap=self.settings.chunk_overlap if chunk_overlap is None else chunk_overlap,
            on_progress=on_progress,
        )

    # -- reading --------------------------------------------------------------
    def get(self, record_id: str) -> Memory:
        found = self._live(record_id)
        return Memory.from_payload(self.haystack.read(found.offset), found.offset, found.state)

    def search(
        self,
        query: str,
        *,
        k: int = 10,
        mode: str = "hybrid",
        drawer: str | None = None,
        kinds: Sequence[str] = (),
        include_deprecated: bool = False,
        as_of: float | str | None = None,
        hops: int = 0,
        rerank: str | None = None,
        loaders: Sequence[str] = (),
        source: str | None = None,
        pages: tuple[int, int] | None = None,
        types: Sequence[str] = (),
        older_than: float | None = None,
        per_document: bool = False,
        since: float | str | None = None,
        until: float | str | None = None,
    ) -> list[Hit]:
        """Hybrid (or lexical, or dense) search in this namespace.

        Deprecated memories are left out unless ``include_deprecated``; ``as_of``
        (Unix seconds or ISO 8601) keeps what was recorded and valid at that time.
        ``hops`` adds graph neighbours of the best hits; ``rerank`` names a reranker
        (default: the ``rerank`` setting). ``loaders``, ``source`` (a glob) and
        ``pages`` (first, last) filter document chunks, inside SQL; ``since`` and
        ``until`` (Unix seconds or ISO 8601) keep what was filed in ``[since, until)``.
        ``per_document`` keeps each document's best chunk per leg before fusing
        (document retrieval).
        """
        s = self.settings
        params = searching.SearchParams(
            k=k,
            mode=mode,
            leg_k=s.leg_k,
            rrf_k=s.rrf_k,
            weight_dense=s.weight_dense,
            weight_lexical=s.weight_lexical,
            fusion=s.fusion,
            per_document=per_document,
            hops=hops,
            neighbors_max=s.neighbors_max,
            rerank_depth=s.rerank_depth,
            context_weight=s.lexical_context_weight,
            lexical_max_scored=s.lexical_max_scored,
        )
        query = searching.validate(query, params)
        if drawer is not None:
            _check_name("drawer", drawer)
        after, before = parse_time(since, "since"), parse_time(until, "until")
        if after is not None and before is not None and after >= before:
            raise InvalidInput("since must be earlier than until")
        if pages is not None and not (
            len(pages) == 2 and all(type(p) is int for p in pages) and 1 <= pages[0] <= pages[1]
        ):
            raise InvalidInput(f"pages must be (first, last), 1 <= first <= last, not {pages!r}")
        filters = Filters(
            drawer=drawer,
            kinds=tuple(kinds),
            include_deprecated=include_deprecated,
            as_of=parse_time(as_of, "as_of"),
            loaders=tuple(loaders),
            origin_glob=source,
            pages=pages,
            types=tuple(types),
            older_than=older_than,
            created_after=after,
            created_before=before,
        )
        return searching.search(
            self.index,
            self.haystack,
            self.namespace,
            query,
            params,
            filters,
            self._embed_query,
            self._reranker(rerank),
        )

    def _reranker(self, name: str | None) -> Reranker | None:
        key = self.settings.rerank if name is None else name
        if key not in self._rerankers:
            self._rerankers[key] = make_reranker(key)
        return self._rerankers[key]

    def context_graph(
        self,
        query: str,
        *,
        hops: int = 2,
        neighbors_max: int = 40,
        seed_ids: Sequence[str] | None = None,
        k: int = 10,
        weights: tuple[float, float, float] | None = None,
        drawer: str | None = None,
        include_deprecated: bool = False,
        as_of: float | str | None = None,
    ) -> ContextGraph:
        """Seeds by meaning (words when meaning is weak), expanded along relations,
        ranked by similarity, importance and recency (``weights``, normalised)."""
        if not isinstance(query, str):
            raise InvalidInput("query must be text")
        if not 0 <= hops <= 3 or not 1 <= k <= 1000 or neighbors_max < 0:
            raise InvalidInput("hops must be 0-3, k 1-1000 and neighbors_max >= 0")
        s = self.settings
        w = weights or (s.rank_similarity, s.rank_importance, s.rank_recency)
        if drawer is not None:
            _check_name("drawer", drawer)
        filters = Filters(
            drawer=drawer,
            include_deprecated=include_deprecated,
            as_of=parse_time(as_of, "as_of"),
        )

        def hybrid_seeds(q: str, n: int) -> list[int]:
            params = searching.SearchParams(
                k=n,
                leg_k=max(n, s.leg_k),
                rrf_k=s.rrf_k,
                weight_dense=s.weight_dense,
                weight_lexical=s.weight_lexical,
                fusion=s.fusion,
                context_weight=s.lexical_context_weight,
                lexical_max_scored=s.lexical_max_scored,
            )
            legs = searching.run_legs(
                self.index, self.namespace, q, params, filters, self._embed_query
            )
            fused = searching.fuse(legs, params)
            return [r for r, _ in fused[:n]]

        graph = graphs.build(
            self.index,
            self.haystack,
            self.namespace,
            query,
            embed_query=self._embed_query,
            hybrid_seeds=hybrid_seeds,
            k=k,
            hops=hops,
            neighbors_max=neighbors_max,
            seed_ids=seed_ids,
            blend=graphs.Blend(*w, half_life_days=s.recency_half_life_days),
            filters=filters,
        )
        self.note_access([n.id for n in graph.nodes])
        return graph

    def recall(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        session_id: str,
        budget: Budget | Mapping[str, Any] | None = None,
        dry_run: bool | None = None,
        time_budget_ms: float | None = None,
        session_start: float | None = None,
        mode: str | None = None,
    ) -> RecallResult:
        """The recall reflex: the messages with one system message of memories
        appended at the tail (never raises; see ``kredenc.recall.reflex``)."""
        from kredenc.recall.reflex import recall

        return recall(
            self,
            messages,
            session_id=session_id,
            budget=budget,
            dry_run=dry_run,
            time_budget_ms=time_budget_ms,
            session_start=session_start,
            mode=mode,
        )

    def note_access(self, ids: Sequence[str]) -> None:
        """Count a recall of ``ids``; counts reach the log in batched ``access`` records."""
        if not ids or self._housekeeper is None:
            return
        with self._access_lock:
            pending = self._access.setdefault(self.namespace, {})
            for rid in ids:
                pending[rid] = pending.get(rid, 0) + 1
            due = sum(len(p) for p in self._access.values()) >= self.settings.access_batch
        if due:
            self.flush_access()

    def flush_access(self) -> None:
        """Hand pending access counts to the housekeeper (without waiting)."""
        with self._access_lock:
            pending, self._access = self._access, {}
        if self._housekeeper is None:
            return
        for ns, counts in pending.items():
            if counts:
                self._housekeeper.submit(
                    [{"op": "access", "ns": ns, "counts": counts, "ts": now()}]
                )

    def stats(self) -> dict[str, Any]:
        out = self.index.stats(self.namespace)
        out.update(
            {
                "store": str(self.home),
                "namespace": self.namespace,
                "log_records": self.haystack.last_seq,
                "log_bytes": self.haystack.end,
                "model": self.meta.model_id,
                "dim": self.meta.dim,
            }
        )
        return out


def _check_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise InvalidInput(f"{what} must be a non-empty name of at most 200 characters")
    _check_utf8(what, value)
    if any(ord(c) < 32 for c in value):
        raise InvalidInput(f"{what} must not contain control characters")
    return value


def _check_utf8(what: str, value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid UTF-8", f"pass the {what} as UTF-8") from None
