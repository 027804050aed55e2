"""The backend seams: what a log and an index must do, as ``typing.Protocol``s.

A store is a :class:`Log` (the truth: an append-only sequence of JSON payloads, each
at an address that stays valid for the life of the log) and an :class:`Index`
derived from it (rebuilt from the log at any time). The file haystack
(:class:`~kredenc.storage.haystack.Haystack`) and the SQLite index
(:class:`~kredenc.storage.index.sqlite.SqliteIndex`) implement them; another backend
(PostgreSQL) implements the same methods and proves it with the conformance suites
in :mod:`kredenc.testing.conformance` (docs/storage.md).

Neither protocol exposes a database connection: everything above ``storage/`` asks
the index through these methods. Addresses (``offset``) are integers whose meaning
belongs to the log; the index stores them and hands them back. Rowids are the
index's own integer keys for searchable records: the legs return them, and
``resolve``/``node_info`` turn them into ids and addresses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kredenc.storage.haystack import Durability, LogRecord, Recovery
    from kredenc.storage.index.filters import Filters
    from kredenc.storage.index.lexical import Phrase
    from kredenc.storage.index.projector import EmbedFn
    from kredenc.storage.index.reads import IndexedRecord, RecordQuery
    from kredenc.storage.index.vectors import F32

__all__ = ["Index", "Log"]


class Log(Protocol):
    """The append-only log: the truth of a store.

    Payloads are JSON objects carrying ``op`` (and ``ns`` etc., which the log does not
    read). The log assigns ``seq`` (1, 2, 3, ... with no gaps) in append order and
    returns each record's address. Opening a log recovers it: a torn tail (a record
    cut short by a crash) and an uncommitted batch at the tail are cut; a damaged
    record that valid records follow raises :class:`~kredenc.errors.CorruptLog` with
    its offset and nothing is cut.
    """

    @property
    def log_id(self) -> bytes:
        """The identity of this log generation (an index remembers which it follows)."""
        ...

    @property
    def last_seq(self) -> int:
        """The seq of the last committed record (0 for an empty log)."""
        ...

    @property
    def end(self) -> int:
        """The address just past the last committed record (where the next goes)."""
        ...

    @property
    def durability(self) -> Durability:
        """When appends are made durable: each ``append``, each ``sync``, or never."""
        ...

    @property
    def recovery(self) -> Recovery:
        """What opening the log found and cut."""
        ...

    @property
    def shared(self) -> bool:
        """Whether other processes may append to this log while it is open (PostgreSQL:
        several servers on one database). False for the haystack, whose writer holds
        the store's file lock alone."""
        ...

    def exclusive(self) -> AbstractContextManager[None]:
        """The writers' lock for a block: no other process appends (or feeds the index)
        while it is held, and ``last_seq``/``end`` include what others appended before
        it was taken. A no-op where the log is not ``shared``."""
        ...

    def follow(self) -> bool:
        """Take in records another process appended since this handle last looked;
        whether the end moved (a haystack's writer knows its end already)."""
        ...

    def append(
        self, payloads: Sequence[dict[str, Any]], *, batch: bool = False, sync: bool = True
    ) -> list[tuple[int, int]]:
        """Append payloads in order; (seq, address) for each. With ``batch`` (and
        more than one payload) recovery keeps all of them or none."""
        ...

    def sync(self) -> None:
        """Make every append so far durable (per ``durability``)."""
        ...

    def read(self, offset: int) -> dict[str, Any]:
        """The payload of the record at ``offset`` (verified)."""
        ...

    def iter_from(self, offset: int = ...) -> Iterator[LogRecord]:
        """Records from ``offset`` (default: the first) up to the end at the call."""
        ...

    def check(self) -> tuple[bool, list[str]]:
        """Verify the whole log without changing it: (sound, findings)."""
        ...

    def close(self) -> None: ...


class Index(Protocol):
    """The index derived from a log: records, full text, vectors, edges, documents.

    Every query takes the namespace and never returns another namespace's records.
    ``apply`` is the log-to-index projector: only one thread applies (the store's
    housekeeper); any number of threads read while it does.
    """

    #: The backend's own exceptions for a failed query (``sqlite3.Error``, a driver's
    #: error class): jobs that degrade rather than stop catch these.
    errors: tuple[type[Exception], ...]

    # -- projecting the log -------------------------------------------------
    def apply(
        self,
        entries: Iterable[tuple[int, dict[str, Any]]],
        vectors: dict[str, F32] | None,
        embed: EmbedFn | None,
        end: int,
        applied_through: int | None = None,
    ) -> None:
        """Apply log records (address, payload) atomically and record the position
        (the last seq, at least ``applied_through``, and the log's ``end``). Vectors
        not given come from the embedding cache or ``embed``."""
        ...

    def applied(self) -> tuple[int, int]:
        """(last applied seq, log end address after it)."""
        ...

    def generation(self, ns: str, types: Sequence[str] = (), *, edges: bool = False) -> int:
        """A number that changes whenever a write could change what a search of ``ns``
        over ``types`` (all when empty; edges too with ``edges``) finds, and only then:
        search cache keys carry it. Access counts do not change it."""
        ...

    # -- the legs -----------------------------------------------------------
    def lexical(
        self,
        ns: str,
        phrases: Sequence[Phrase],
        k: int,
        filters: Filters,
        *,
        context_weight: float = ...,
        max_scored: int = ...,
        deadline: float | None = ...,
    ) -> list[tuple[int, float]]:
        """Top ``k`` (rowid, score) by BM25, best first (scores > 0); past ``deadline``
        (``time.perf_counter()`` seconds) it raises ``DeadlineExceeded``."""
        ...

    def dense(self, ns: str, query: F32, k: int, filters: Filters) -> list[tuple[int, float]]:
        """Top ``k`` (rowid, cosine), best first (ties by rowid)."""
        ...

    def vectors_ready(self, wait: float = 0.0) -> bool:
        """Whether :meth:`dense` can run without first loading what it searches into
        this process; if not, that load starts in the background (once) and this waits
        up to ``wait`` seconds for it. A run with a deadline asks before its dense leg
        (True at once where the database searches its own vectors)."""
        ...

    def corrections(self, ns: str, words: Sequence[str], filters: Filters) -> dict[str, str]:
        """Each of ``words`` (lower-cased query words) that no card of any namespace
        holds, mapped to its correction: the word one typo away that the most cards
        hold among those a card of ``ns`` passing ``filters`` holds
        (``index.spelling.nearest``, one rule for every backend). Words that are held,
        not :func:`~kredenc.storage.index.spelling.correctable`, or have no such
        neighbour are left out."""
        ...

    def load_terms(self) -> int:
        """Load what :meth:`corrections` reads into memory now, so that the first
        lookup need not (the recall warm-up calls this); the terms loaded, 0 where a
        lookup reads the database itself."""
        ...

    # -- records and documents ------------------------------------------------
    def lookup(self, ns: str, rid: str) -> IndexedRecord | None:
        """The record's address and current state, tombstoned ones included."""
        ...

    def resolve(self, ns: str, rowids: Sequence[int]) -> dict[int, tuple[str, int]]:
        """rowid -> (id, address) for live records of ``ns``."""
        ...

    def rowids_for(self, ns: str, ids: Sequence[str], filters: Filters) -> dict[str, int]:
        """id -> rowid for live, searchable records of ``ns`` that pass ``filters``."""
        ...

    def node_info(self, ns: str, rowids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """Current state of live records for ranking: ids, addresses, scores, access."""
        ...

    def doc_ids(self, ns: str, rowids: Sequence[int]) -> dict[int, str]:
        """rowid -> the document a chunk belongs to (only for records that have one)."""
        ...

    def vectors_of(self, rowids: Sequence[int]) -> dict[int, F32]:
        """The stored vectors of searchable records."""
        ...

    def document(self, ns: str, origin: str) -> tuple[str, str, int] | None:
        """The live document filed from ``origin``: (doc id, content hash, version)."""
        ...

    def parts_of(self, ns: str, doc_id: str) -> list[str]:
        """Ids of the live chunks of a document, in filing order."""
        ...

    def session_turns(self, ns: str, session: str, limit: int) -> list[tuple[str, int]]:
        """The live ``turn`` records of ``session`` (a turn's ``meta.session``) in ``ns``
        as (id, address), newest first (latest seq first), at most ``limit``."""
        ...

    def list_records(
        self, ns: str, query: RecordQuery, limit: int | None = None, offset: int = 0
    ) -> list[tuple[str, int]]:
        """Live records of ``ns`` that ``query`` selects, as (id, address), in filing
        order (seq): ``offset`` skipped, at most ``limit`` (all when None)."""
        ...

    def sessions(
        self, ns: str, limit: int | None = None, offset: int = 0
    ) -> list[tuple[str, int, float, float]]:
        """Sessions with live turns in ``ns`` as (session, turns, first turn's time,
        last turn's time), the most recently active first."""
        ...

    def taken_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the index holds in any namespace (record ids are unique
        across a store), forgotten records included."""
        ...

    def namespaces(self) -> list[str]:
        """Every namespace holding a live record, sorted."""
        ...

    def edges_of(self, ns: str) -> list[tuple[str, str, str, float]]:
        """Every edge of ``ns`` as (src, dst, rel, weight), in the order written."""
        ...

    def history_of(self, ns: str, rid: str) -> list[tuple[int, int]]:
        """(seq, address) of each log record in the history of memory ``rid`` of
        ``ns``, oldest first: its ``put`` (or the ``purged`` stub an erasure left), then
        every ``score``, ``status``, ``edge``, ``unedge`` and ``tombstone`` naming it,
        and the tombstone of a record at the other end of one of its edges. Forgotten
        memories keep theirs; an id ``ns`` never filed a memory under has none."""
        ...

    # -- edges ----------------------------------------------------------------
    def neighbours(self, ns: str, ids: Sequence[str]) -> list[tuple[str, str, str, float]]:
        """Edges touching ``ids`` as (seed id, neighbour id, relation, weight), both ways."""
        ...

    def edges_among(self, ns: str, ids: Sequence[str]) -> list[tuple[str, str, str, float]]:
        """Edges whose both ends are in ``ids``, in the order they were written."""
        ...

    def sources_of(self, ns: str, dst: str, rel: str) -> list[str]:
        """Ids of live records with an edge ``rel`` pointing at ``dst``."""
        ...

    # -- counts ---------------------------------------------------------------
    def stats(self, ns: str) -> dict[str, Any]:
        """Live records per drawer and type, and the namespace's edge count."""
        ...

    def fingerprint(self) -> dict[str, Any]:
        """A content summary of every namespace, to compare an index with its rebuild."""
        ...

    # -- the queries the memory jobs need ---------------------------------------
    def live_memory_rows(
        self,
        ns: str,
        *,
        not_status: str | None = None,
        reflections: bool | None = None,
        writable_only: bool = False,
        in_episode: bool = False,
        episode_id: str | None = None,
    ) -> list[tuple[Any, ...]]:
        """Live memories of ``ns`` in filing order, one tuple each in the order
        ``kredenc.storage.index.reads.MEMORY_ROW_COLUMNS`` names."""
        ...

    def targets_of(self, ns: str, src: str, rel: str) -> set[str]:
        """Ids ``src`` has an edge ``rel`` to (deleted ends included)."""
        ...

    def edge_pairs(self, ns: str, rel: str) -> list[tuple[str, str]]:
        """Every edge ``rel`` of ``ns`` as (src, dst)."""
        ...

    def live_count(self) -> int:
        """Live (not forgotten) records of every namespace."""
        ...

    # -- embedding cache --------------------------------------------------------
    def cached_vectors(self, hashes: Sequence[bytes]) -> dict[bytes, F32]:
        """Cached vectors by text hash (``cards.text_hash``), for this index's model."""
        ...

    def cache_vectors(self, items: dict[bytes, F32]) -> None:
        """Cache vectors by text hash; a text already cached keeps its vector."""
        ...

    # -- maintenance ------------------------------------------------------------
    def compaction_due(self) -> bool:
        """Whether ``compact`` would pay off now."""
        ...

    def compact(self) -> float:
        """Merge the lexical index; seconds taken."""
        ...

    def shards(self) -> Mapping[str, Sized]:
        """Load the dense leg's vectors (and ANN graphs) now; its shards by key."""
        ...

    def save_ann(self) -> None:
        """Persist the ANN graphs (so the next open need not build them)."""
        ...

    def close(self) -> None: ...


class CacheTier(Protocol):
    """A persistent tier of the operation cache (``kredenc.loop.cache.OpCache``): JSON
    text by (kind, key). A tier is derived data: losing it costs only time, so a tier
    never raises for a bad or busy file (it misses, logs, and sets the file aside).

    ``epoch`` grows whenever the tier is emptied (a rebuild, a purge, a file set aside),
    so the in-process tier above it knows to drop what it holds too.
    """

    @property
    def epoch(self) -> int: ...

    def get(self, kind: str, key: str) -> str | None:
        """The JSON text stored under (kind, key), or None."""
        ...

    def put(self, kind: str, key: str, value: str) -> None:
        """Store ``value`` (JSON text) under (kind, key), replacing any earlier one."""
        ...

    def clear(self) -> None:
        """Drop every entry (and whatever file held them)."""
        ...

    def listen(self, on_clear: Callable[[], None]) -> None:
        """Call ``on_clear`` whenever this tier is emptied (by :meth:`clear`, or a bad
        file set aside), so a tier above it empties itself at once."""
        ...

    def close(self) -> None: ...


if TYPE_CHECKING:
    # The shipped backends implement the protocols (checked by mypy, never run).
    from kredenc.storage.haystack import Haystack
    from kredenc.storage.index.sqlite import SqliteIndex
    from kredenc.storage.opcache import SqliteTier

    _log: type[Log] = Haystack
    _index: type[Index] = SqliteIndex
    _tier: type[CacheTier] = SqliteTier
