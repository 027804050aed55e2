"""The opened store: the log, the index, the one writer, vectors, access counts, the clock.

:class:`Store` is what every layer above storage works on (``ingest``, ``memory``,
``retrieve``, ``recall``); the :class:`~kredenc.engine.Kredenc` facade composes it
with a namespace. It knows no namespace itself: every call that reads or writes
records takes ``ns`` (or payloads that carry it).

Opening checks the directory (``layout``), takes the writer's lock (a file lock; a
PostgreSQL store, which several processes may write at once, takes the log's writers'
lock per write instead: ``Log.exclusive``), opens the haystack and the index (an
index of another schema version is dropped and rebuilt from the log), and catches the
index up with records it has not seen (after a crash or an interrupted rebuild).
Writes go through the housekeeper, the one writer.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kredenc.config import Settings
from kredenc.errors import KredencError, StoreError, StoreReadOnly
from kredenc.records import Appended
from kredenc.records import now as wall_clock
from kredenc.storage import backends, layout, locks, redis_sessions, repair
from kredenc.storage import purge as purging
from kredenc.storage.base import CacheTier, Index, Log
from kredenc.storage.gate import CallGate
from kredenc.storage.haystack import Haystack, LogRecord
from kredenc.storage.housekeeper import Housekeeper, StoreLock
from kredenc.storage.index.sqlite import IndexOutdated, embed_text_of, text_hash
from kredenc.storage.index.vectors import F32
from kredenc.storage.opcache_chain import tiers_for_store
from kredenc.storage.query_vectors import QueryVectors
from kredenc.storage.redis_client import shared_id
from kredenc.storage.redis_sessions import SessionCache

if TYPE_CHECKING:
    from kredenc.storage.postgres.claims import PostgresClaims

log = logging.getLogger(__name__)

_REPLAY_CHUNK = 2000
QUERY_CACHE = 1024  # query vectors kept per store (an LRU)
#: Text vectors ``embed_cached`` keeps in memory over embeddings.db (~1.5 KiB each at 384-d).
VECTOR_CACHE = 8192
#: How long :meth:`Store.close` waits for calls in flight (seconds).
CLOSE_TIMEOUT = 30.0


class TextEmbedder(Protocol):
    """What the store needs of an embedder (``providers.embed.base.Embedder`` is one)."""

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> F32: ...

    def embed_query(self, text: str) -> F32: ...

    def describe(self) -> str: ...


def records_after(log: Log, applied_end: int) -> Iterable[LogRecord]:
    """The log's records from the address an index's position ends at (0: the first).
    Addresses are the log's own: past the file header in a haystack, seqs in
    PostgreSQL."""
    return log.iter_from(applied_end) if applied_end > 0 else log.iter_from()


def replay(
    log: Log,
    index: Index,
    embed: Callable[[Sequence[str]], F32],
    applied_end: int = 0,
    on_chunk: Callable[[int], None] | None = None,
) -> int:
    """Apply ``log``'s records from ``applied_end`` to ``index`` in chunks, vectors from
    the embedding cache or ``embed``; ``on_chunk`` gets the records applied so far.
    Returns how many records were applied."""
    done = 0
    chunk: list[tuple[int, dict[str, Any]]] = []
    for rec in records_after(log, applied_end):
        chunk.append((rec.offset, rec.payload))
        if len(chunk) >= _REPLAY_CHUNK:
            index.apply(chunk, None, embed, rec.end)
            done += len(chunk)
            chunk = []
            if on_chunk is not None:
                on_chunk(done)
    if chunk:
        index.apply(chunk, None, embed, log.end)
        done += len(chunk)
        if on_chunk is not None:
            on_chunk(done)
    return done


class Store:
    """An open store. Use :meth:`open`; :meth:`close` it when done."""

    def __init__(
        self,
        settings: Settings,
        embedder: TextEmbedder,
        *,
        read_only: bool = False,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.settings = settings
        self.embedder = embedder
        self.home = settings.home
        self.read_only = read_only
        #: The wall clock records are stamped with (``now()``); tests set their own.
        self.clock: Callable[[], float] = clock or wall_clock
        self._closed = False
        #: Every call passes it (``with store.gate:``); close() waits for those in flight.
        self.gate = CallGate()
        layout.check_directory(self.home)
        #: The id of the log this open made in another backend (a new PostgreSQL
        #: schema's), else None: ``backends.discard_log`` takes it away if the command
        #: that made it fails.
        self.made_log: bytes | None = None
        if not layout.is_store(self.home):
            if read_only:
                layout.require_store(self.home)
            log_id, made = backends.create_log(settings)
            schema = settings.postgres_schema if backends.is_postgres(settings) else None
            layout.init_store(
                self.home, embedder.model_id, embedder.dim, log_id, postgres_schema=schema
            )
            self.made_log = log_id if made else None
        self.meta = layout.read_meta(self.home)
        layout.check_backend(self.meta, self.home, settings.backend)
        layout.check_model(self.meta, embedder.model_id, embedder.dim)
        # Several processes may write a PostgreSQL store: they take turns under the
        # log's writers' lock (``Log.exclusive``), not one file lock for life.
        shared = backends.is_postgres(settings)
        self._lock = None if read_only or shared else StoreLock(self.home / layout.LOCK_FILE)
        self._housekeeper: Housekeeper | None = None
        try:
            # Only a writer cuts a torn tail.
            self.haystack: Log = backends.open_log(settings, self.home, read_only=read_only)
            if self.haystack.log_id.hex() != self.meta.log_id:
                raise StoreError(
                    f"{self.home}: log id does not match store.json",
                    "the log and store.json belong to different stores",
                )
            self.index: Index = self._open_index()
            if not read_only:
                purging.discard_stale_generation(self.home)
                with self.haystack.exclusive():
                    self._catch_up()
                self._housekeeper = Housekeeper(self.haystack, self.index, self.embed_many)
        except BaseException:
            for part in ("index", "haystack"):  # what opened before the failure
                opened = self.__dict__.get(part)
                if opened is not None:
                    with contextlib.suppress(Exception):
                        opened.close()
            if self._lock is not None:
                self._lock.release()
            self._discard_made()
            raise
        #: A query's vector, cached (an LRU of ``QUERY_CACHE`` queries). Not gated: it
        #: touches no store file (a late embedding may finish on a worker after close).
        self.embed_query = QueryVectors(
            self._query_vector, getattr(self.embedder, "embed_queries", None), QUERY_CACHE
        )
        self._access: dict[str, dict[str, int]] = {}
        self._access_lock = threading.Lock()
        self._opcache: CacheTier | None = None
        self._opcache_lock = threading.Lock()
        self._claims: PostgresClaims | None = None
        self._claims_lock = threading.Lock()
        self._sessions: SessionCache | None = None
        self._sessions_opened = False
        # embed_cached's in-process tier over embeddings.db: text hash -> vector.
        self._vectors: OrderedDict[bytes, F32] = OrderedDict()
        self._vectors_lock = threading.Lock()

    @classmethod
    def open(
        cls,
        settings: Settings,
        embedder: TextEmbedder,
        read_only: bool = False,
        *,
        clock: Callable[[], float] | None = None,
    ) -> Store:
        """Open (creating it unless ``read_only``) the store at ``settings.home``."""
        return cls(settings, embedder, read_only=read_only, clock=clock)

    def now(self) -> float:
        """The time records are stamped with (Unix seconds)."""
        return self.clock()

    # -- closing --------------------------------------------------------------
    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Refuse new calls (they raise :class:`~kredenc.errors.StoreClosed`), wait up to
        ``timeout`` seconds for the calls in flight, then flush access counts, stop the
        writer, close files and release the lock. Idempotent and thread-safe.

        Should a call still run after ``timeout``, the writer is stopped and the lock
        released all the same, but the log and index files are left open for that call
        (they close with the process): closing them under it could crash the process.
        """
        running = self.gate.shut(timeout)
        if running is None:
            return
        self._closed = True
        if self._housekeeper is not None:
            self._flush_access()
            self._housekeeper.close()
            self._housekeeper = None
        if running:
            log.warning(
                "%s: %d call(s) still running %.0f s after close(); their files stay open",
                self.home,
                running,
                timeout,
            )
        else:
            if getattr(self, "index", None) is not None:
                self.index.close()
            if getattr(self, "haystack", None) is not None:
                self.haystack.close()
        if self._opcache is not None:
            self._opcache.close()
        if self._claims is not None:
            self._claims.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def shared(self) -> bool:
        """Whether other processes may write this store while it is open (a PostgreSQL
        store: several servers on one database; ``Log.shared``)."""
        return self.haystack.shared

    # -- the index --------------------------------------------------------------
    def _discard_made(self) -> None:
        """After a first open failed: take away the log it made in another backend and
        the ``store.json`` pointing at it (best effort; the failure is what is raised)."""
        if self.made_log is None:
            return
        try:
            if backends.discard_log(self.settings, self.made_log):
                (self.home / layout.META_FILE).unlink(missing_ok=True)
        except (KredencError, OSError) as exc:
            log.warning("%s: could not take away the new store's log (%s)", self.home, exc)

    def _open_index(self) -> Index:
        postgres = backends.is_postgres(self.settings)
        if self.read_only and not postgres and not (self.home / layout.INDEX_FILE).exists():
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
            backends.drop_index(self.settings, self.home)
            return self._new_index()
        except StoreError as exc:  # name the derived file at fault (index or cache)
            if postgres:
                raise
            raise repair.blame(self.home, self._cache_path()) or exc from exc

    def _cache_path(self) -> Path:
        return repair.cache_path_of(self.home, self.settings.embed_cache)

    def _new_index(self, *, staging: bool = False) -> Index:
        return backends.new_index(
            self.settings,
            self.home,
            dim=self.embedder.dim,
            model_id=self.embedder.model_id,
            read_only=self.read_only,
            staging=staging,
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
            backends.drop_index(self.settings, self.home)
            self.index = self._open_index()
            applied_seq, applied_end = 0, 0
        if applied_seq == hay.last_seq:
            return
        replay(hay, self.index, self.embed_many, applied_end)

    def rebuild(self, *, fresh_cache: bool = False) -> dict[str, int]:
        """Drop the index and rebuild it from the log (embeddings come from the cache).

        A derived file that is unreadable (or a cache with vectors of the wrong size,
        or any cache with ``fresh_cache``) is set aside as ``<name>.bad-<time>`` first.
        """
        with self.gate, locks.held(self.lock("rebuild"), "a rebuild of this store"):
            return self._rebuild(fresh_cache=fresh_cache)

    def _rebuild(self, *, fresh_cache: bool) -> dict[str, int]:
        self._writable()
        assert self._housekeeper is not None
        self._housekeeper.close()
        self.index.close()
        self._clear_opcache()
        self._clear_sessions()
        if not backends.is_postgres(self.settings):
            repair.set_aside_bad_files(
                self.home, self._cache_path(), dim=self.embedder.dim, fresh_cache=fresh_cache
            )
        with self.haystack.exclusive():  # other writers of a shared log wait
            if backends.is_postgres(self.settings):
                # Filled beside the old index, which other processes go on searching,
                # then swapped in at once (storage/postgres/index.py).
                # A fill that fails leaves the old index as it was (the next rebuild
                # drops the half-filled staging schema first).
                self.index = staged = self._new_index(staging=True)
                try:
                    self._catch_up()
                except BaseException:
                    staged.close()
                    self.index = self._open_index()
                    self._housekeeper = Housekeeper(self.haystack, self.index, self.embed_many)
                    raise
                staged.close()
                backends.swap_in_index(self.settings, self.home)
            else:
                backends.drop_index(self.settings, self.home)
            self.index = self._open_index()
            self._catch_up()
        self.index.compact()  # one FTS5 segment: what the replay wrote in many
        self.index.shards()  # load vectors and build ANN graphs now, not on first search
        self.index.save_ann()
        self._housekeeper = Housekeeper(self.haystack, self.index, self.embed_many)
        return {"records": self.index.live_count(), "last_seq": self.haystack.last_seq}

    def compact(
        self, *, purge: bool = False, on_step: Callable[[str], None] | None = None
    ) -> dict[str, Any]:
        """Merge the card index; with ``purge``, first write a new log generation without
        the text of forgotten records and rebuild the index and cache from it
        (``kredenc.storage.purge``). The writer lock is held throughout."""
        with self.gate:
            return self._compact(purge=purge, on_step=on_step)

    def _compact(self, *, purge: bool, on_step: Callable[[str], None] | None) -> dict[str, Any]:
        hk = self._writable()
        if not purge:
            return {"purged": 0, "seconds": round(self.index.compact(), 3)}
        if backends.is_postgres(self.settings):
            raise StoreError(
                "purge rewrites the log file, and this store's log is in PostgreSQL",
                "forget records instead; purging a PostgreSQL log is not supported yet",
            )
        self._flush_access()
        hk.close()
        self.index.close()
        self.haystack.close()
        self._clear_opcache()  # it may hold forgotten text (in prompts, replies, hits)
        self._clear_sessions()
        try:
            report = purging.purge_store(self.home, self._cache_path(), on_step=on_step)
        finally:
            self.haystack = Haystack(
                self.home / layout.LOG_FILE, durability=self.settings.durability
            )
            self.index = self._open_index()
            self._catch_up()
            self.index.compact()
            self._housekeeper = Housekeeper(self.haystack, self.index, self.embed_many)
        return report.to_json()

    def stats(self, ns: str) -> dict[str, Any]:
        """What ``ns`` holds (records per drawer and type, edges) and the store's size."""
        with self.gate:
            if self.read_only or self.haystack.shared:
                self.haystack.follow()  # the log's size now, not when this handle opened
            out = self.index.stats(ns)
        out.update(
            {
                "store": str(self.home),
                "namespace": ns,
                "log_records": self.haystack.last_seq,
                # the file's size; a PostgreSQL log has no file (its end is a seq)
                "log_bytes": None if backends.is_postgres(self.settings) else self.haystack.end,
                "model": self.meta.model_id,
                "dim": self.meta.dim,
            }
        )
        return out

    # -- what caches key on ----------------------------------------------------
    def generation(self, ns: str, types: Sequence[str] = (), *, edges: bool = False) -> int:
        """Changes whenever a write could change what a search of ``ns`` over ``types``
        (all when empty; edges too with ``edges``) finds (``Index.generation``)."""
        with self.gate:  # a reader sees the writer's commits: the index is shared
            return self.index.generation(ns, types, edges=edges)

    def opcache_tier(self) -> CacheTier | None:
        """The operation cache's persistent tiers (``opcache.db``, under Redis when
        ``opcache_redis_url`` is set: ``storage/opcache_chain.py``), opened on first use,
        or None when off. The same object for the life of the store: a rebuild or purge
        empties it (its ``epoch`` grows)."""
        with self._opcache_lock:
            if self._opcache is None:
                self._opcache = tiers_for_store(
                    self.settings, self.home, self.meta.log_id, read_only=self.read_only
                )
            return self._opcache

    def lock(self, name: str) -> locks.Lock:
        """The store's lock ``name`` (``storage/locks.py``): in Redis when the store has
        one (:meth:`locks_redis_url`: every process of the store shares it), else in
        this process."""
        s = self.settings
        key = f"{s.redis_prefix}lock:{self._shared_id()}:{name}"
        return locks.lock_for(self.locks_redis_url(), key, ttl_s=s.lock_ttl_s)

    def claim(self, name: str, ttl_s: float, *, ns: str = "") -> float:
        """Claim ``name`` for ``ttl_s`` seconds across the store's processes: 0.0 when
        this call took it, else the seconds left on the claim another caller holds. The
        scheduler claims each job's period with it. In Redis when the store has one
        (``locks.claim``); else in a PostgreSQL store's own database (``claims`` rows
        of namespace ``ns``: ``storage/postgres/claims.py``), which every process of
        the store reaches; else in this process (a file store has one writer process)."""
        url = self.locks_redis_url()
        if not url and backends.is_postgres(self.settings):
            with self._claims_lock:
                if self._claims is None:
                    self._claims = backends.open_claims(self.settings)
                claims = self._claims
            return claims.claim(ns, name, ttl_s)
        key = f"{self.settings.redis_prefix}claim:{self._shared_id()}:{name}"
        return locks.claim(url, key, ttl_s)

    def locks_redis_url(self) -> str:
        """The Redis that the store's locks and claims live in: ``redis_url``, else
        (``jobs_queue = "rq"``) the job queue's ``jobs_redis_url``, which every server
        and worker of the deployment reaches; empty: in-process locks."""
        s = self.settings
        url = s.redis_url.get_secret_value()
        if not url and s.jobs_queue == "rq":
            url = s.jobs_redis_url.get_secret_value()
        return url

    def _shared_id(self) -> str:
        return shared_id(self.meta.log_id, self.home, backend=self.settings.backend)

    def session_cache(self) -> SessionCache | None:
        """Sessions' hot history in Redis (``redis_url``; ``storage/redis_sessions.py``),
        made on first use, or None when off. Writes through :meth:`write` keep it
        correct: a turn filed or forgotten invalidates its session's copy."""
        with self._opcache_lock:
            if not self._sessions_opened:
                self._sessions_opened = True
                self._sessions = redis_sessions.for_store(
                    self.settings, self.meta.log_id, self.home
                )
            return self._sessions

    def _sessions_changed(self, payloads: list[dict[str, Any]]) -> None:
        cache = self.session_cache()
        if cache is None:
            return

        def forgotten(ns: str, rid: str) -> dict[str, Any] | None:
            found = self.index.lookup(ns, rid)
            if found is None or found.state.get("type") != "turn":
                return None
            return self.haystack.read(found.offset)

        try:
            changed = redis_sessions.touched(payloads, forgotten)
        except Exception as exc:  # noqa: BLE001 - the write stands; no copy may outlive it
            log.warning("sessions touched by a write unknown (%s); every copy is dropped", exc)
            cache.clear()
            return
        if changed:
            cache.invalidate(changed)

    def _clear_sessions(self) -> None:
        cache = self.session_cache()
        if cache is not None:
            cache.clear()

    def _clear_opcache(self) -> None:
        """Empty the operation cache's file (and tell the tiers above it) and the
        in-process vectors (a purge drops forgotten texts' vectors from the file)."""
        if self._opcache is not None:
            self._opcache.clear()
        elif not self.read_only:
            # Not opened by this handle (a CLI purge): Redis may still hold another
            # process's entries, forgotten text among them. The file goes below anyway.
            tier = tiers_for_store(
                self.settings, self.home, self.meta.log_id, read_only=False, even_off=True
            )
            if tier is not None:
                tier.clear()
                tier.close()
        layout.drop_opcache(self.home)
        with self._vectors_lock:
            self._vectors.clear()

    # -- embedding ------------------------------------------------------------
    def embed_many(self, texts: Sequence[str]) -> F32:
        """Embed texts now (no cache): the function the index calls for missing vectors."""
        return self.embedder.embed(list(texts))

    def embed_cached(self, texts: Sequence[str]) -> F32:
        """Vectors for ``texts`` (rows in order): from an in-process LRU of
        :data:`VECTOR_CACHE` vectors, then the embedding cache by text hash; the missing
        ones are embedded now and cached (the judge's, the roles' and evals' embedder).
        A repeated ask reads its sentences' vectors from memory, not SQLite."""
        import numpy as np

        with self.gate:
            hashes = [text_hash(t) for t in texts]
            with self._vectors_lock:
                found: dict[bytes, F32] = {}
                for h in hashes:
                    vec = self._vectors.get(h)
                    if vec is not None:
                        self._vectors.move_to_end(h)
                        found[h] = vec
            wanted = list({h for h in hashes if h not in found})
            cached = self.index.cached_vectors(wanted) if wanted else {}
            missing = list(
                dict.fromkeys(
                    t
                    for t, h in zip(texts, hashes, strict=True)
                    if h not in found and h not in cached
                )
            )
            if missing:
                fresh = self.embedder.embed(missing)
                new = {text_hash(t): fresh[i] for i, t in enumerate(missing)}
                if not self.read_only:
                    self.index.cache_vectors(new)
                cached.update(new)
            if cached:
                with self._vectors_lock:
                    self._vectors.update(cached)
                    while len(self._vectors) > VECTOR_CACHE:
                        self._vectors.popitem(last=False)
            found.update(cached)
            dim = self.embedder.dim
            if not hashes:
                return np.zeros((0, dim), dtype=np.float32)
            return np.vstack([found[h] for h in hashes]).astype(np.float32, copy=False)

    def _query_vector(self, text: str) -> F32:
        vec: F32 = self.embedder.embed_query(text)
        return vec

    def vectors_for(self, payloads: Iterable[dict[str, Any]]) -> dict[str, F32]:
        """Vectors for new ``put`` payloads: from the cache by text hash, else embedded now."""
        with self.gate:
            return self._vectors_for(payloads)

    def _vectors_for(self, payloads: Iterable[dict[str, Any]]) -> dict[str, F32]:
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
    def _writable(self) -> Housekeeper:
        if self._housekeeper is None:
            if self.read_only and not self._closed:
                raise StoreReadOnly(
                    "the store is open read-only: it takes no writes",
                    "write through a handle opened for writing (a server: one started "
                    "without --read-only)",
                )
            raise StoreError("the store is open read-only or closed", "open it for writing")
        return self._housekeeper

    def check_writable(self) -> None:
        """Raise :class:`StoreError` unless the store is open for writing."""
        self._writable()

    def write(
        self,
        payloads: list[dict[str, Any]],
        *,
        batch: bool = False,
        vectors: dict[str, F32] | None = None,
    ) -> list[Appended]:
        """Append prepared log records through the housekeeper; returns where they
        landed once they are durable (under the policy) and applied to the index.
        ``batch`` lands them all or none; ``vectors`` (by record id) saves embedding."""
        with self.gate:
            done = self._writable().write(payloads, batch=batch, vectors=vectors)
            self._sessions_changed(payloads)  # after the index has them: see redis_sessions
            return done

    # -- access counts --------------------------------------------------------
    def note_access(self, ns: str, ids: Sequence[str]) -> None:
        """Count a recall of ``ids`` in ``ns``; counts reach the log in batched
        ``access`` records (see ``access_batch``). Nothing is counted read-only."""
        if not ids or self._housekeeper is None:
            return
        with self.gate:
            self._note_access(ns, ids)

    def _note_access(self, ns: str, ids: Sequence[str]) -> None:
        with self._access_lock:
            pending = self._access.setdefault(ns, {})
            for rid in ids:
                pending[rid] = pending.get(rid, 0) + 1
            due = sum(len(p) for p in self._access.values()) >= self.settings.access_batch
        if due:
            self._flush_access()

    def flush_access(self) -> None:
        """Hand pending access counts to the housekeeper (without waiting)."""
        with self.gate:
            self._flush_access()

    def _flush_access(self) -> None:
        with self._access_lock:
            pending, self._access = self._access, {}
        if self._housekeeper is None:
            return
        for ns, counts in pending.items():
            if counts:
                self._housekeeper.submit(
                    [{"op": "access", "ns": ns, "counts": counts, "ts": self.now()}]
                )
