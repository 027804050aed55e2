"""Which log and index a store opens: ``backend = "sqlite"`` (the haystack file and
the SQLite index in the store directory) or ``"postgres"`` (both as tables in the
``postgres_schema`` of the ``postgres_dsn`` database; ``storage/postgres``).

The store directory exists either way: it holds ``store.json`` (the log id, the
model), the writer's lock, settings and the operation cache's file. The PostgreSQL
modules are imported only when that backend is chosen (they need psycopg).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kredenc.config import Settings
from kredenc.errors import MissingExtra
from kredenc.storage import layout
from kredenc.storage.base import Index, Log
from kredenc.storage.haystack import Haystack
from kredenc.storage.index.sqlite import SqliteIndex
from kredenc.storage.index.vectors import AnnParams

if TYPE_CHECKING:
    from kredenc.storage.postgres.claims import PostgresClaims
    from kredenc.storage.postgres.index import PostgresIndex
    from kredenc.storage.postgres.log import PostgresLog


def is_postgres(settings: Settings) -> bool:
    return settings.backend == "postgres"


def ann_params(settings: Settings) -> AnnParams:
    s = settings
    return AnnParams(
        threshold=s.ann_threshold,
        dtype=s.ann_dtype,
        connectivity=s.ann_connectivity,
        expansion_add=s.ann_expansion_add,
        expansion_search=s.ann_expansion_search,
    )


def _postgres_log() -> type[PostgresLog]:
    try:
        from kredenc.storage.postgres.log import PostgresLog
    except ImportError:
        raise MissingExtra("backend = 'postgres'", "postgres") from None
    return PostgresLog


def _postgres_index() -> type[PostgresIndex]:
    try:
        from kredenc.storage.postgres.index import PostgresIndex
    except ImportError:
        raise MissingExtra("backend = 'postgres'", "postgres") from None
    return PostgresIndex


def create_log(settings: Settings) -> tuple[bytes | None, bool]:
    """For a new store: create the backend's empty log; its id (None for the file
    backend: ``layout.init_store`` writes the haystack file itself) and whether this
    call made it (False: the schema held a log already, which the store adopts)."""
    if not is_postgres(settings):
        return None, False
    log = open_log(settings, settings.home, read_only=False)
    try:
        return log.log_id, bool(getattr(log, "created", False))
    finally:
        log.close()


def discard_log(settings: Settings, log_id: bytes) -> bool:
    """Take away a log :func:`create_log` made, if it still holds no record (PostgreSQL:
    its schema is dropped); whether it was. The file backend's log goes with its
    folder."""
    if not is_postgres(settings):
        return False
    return _postgres_log().discard(
        settings.postgres_dsn.get_secret_value(), settings.postgres_schema, log_id
    )


def open_log(settings: Settings, home: Path, *, read_only: bool) -> Log:
    """The store's log, recovered (only a writer cuts anything)."""
    if is_postgres(settings):
        return _postgres_log()(
            settings.postgres_dsn.get_secret_value(),
            settings.postgres_schema,
            durability=settings.durability,
            writable=not read_only,
        )
    return Haystack(home / layout.LOG_FILE, durability=settings.durability, writable=not read_only)


def new_index(
    settings: Settings,
    home: Path,
    *,
    dim: int,
    model_id: str,
    read_only: bool,
    staging: bool = False,
) -> Index:
    """The store's index (created when missing, unless ``read_only``). With
    ``staging`` (PostgreSQL only), an empty one beside it for a rebuild to fill while
    the store's keeps answering, then :func:`swap_in_index`."""
    if is_postgres(settings):
        return _postgres_index()(
            settings.postgres_dsn.get_secret_value(),
            settings.postgres_schema,
            dim=dim,
            model_id=model_id,
            ann=ann_params(settings),
            read_only=read_only,
            staging=staging,
        )
    if staging:
        raise ValueError("a staging index exists on the postgres backend only")
    return SqliteIndex(
        home / layout.INDEX_FILE,
        dim=dim,
        model_id=model_id,
        cache_path=settings.embed_cache,
        read_only=read_only,
        ann=ann_params(settings),
    )


def swap_in_index(settings: Settings, home: Path) -> None:
    """Make the staging index (``new_index(..., staging=True)``, filled and closed) the
    store's, in one transaction, and drop the operation cache's file (PostgreSQL)."""
    _postgres_index().swap_in(settings.postgres_dsn.get_secret_value(), settings.postgres_schema)
    layout.drop_opcache(home)


def open_claims(settings: Settings) -> PostgresClaims:
    """A PostgreSQL store's period claims (``storage/postgres/claims.py``): the
    processes of a store without Redis claim a period in its database."""
    try:
        from kredenc.storage.postgres.claims import PostgresClaims
    except ImportError:
        raise MissingExtra("backend = 'postgres'", "postgres") from None
    return PostgresClaims(settings.postgres_dsn.get_secret_value(), settings.postgres_schema)


def drop_index(settings: Settings, home: Path) -> None:
    """Drop the derived index (never the log, never the embedding cache) and the
    operation cache's file."""
    if is_postgres(settings):
        _postgres_index().drop(settings.postgres_dsn.get_secret_value(), settings.postgres_schema)
        layout.drop_opcache(home)
        return
    layout.drop_index(home)
