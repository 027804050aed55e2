"""Store upkeep on the command line: ``init``, ``check``, ``rebuild``, ``reembed``,
``compact``, ``salvage``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from kredenc.errors import InvalidInput, KredencError, StoreError, StoreLocked
from kredenc.interfaces.cli_common import Context, context, json_option, settings_of, store_home


@click.command()
@click.option(
    "--new-log",
    is_flag=True,
    help="For a store whose haystack.log is gone: start an empty log (its records are lost).",
)
@json_option
def init(new_log: bool) -> None:
    """Create a store (a directory) if it does not exist."""
    from kredenc.storage import layout, repair
    from kredenc.storage.haystack import missing_log_hint

    c = context()
    home = store_home(c)
    log_missing = layout.is_store(home) and not (home / layout.LOG_FILE).exists()
    if log_missing:  # a PostgreSQL store keeps its log in its schema, not here
        layout.check_backend(layout.read_meta(home), home, settings_of(c).backend)
        log_missing = settings_of(c).backend != "postgres"
    if log_missing and not new_log:
        raise StoreError(
            f"{home} has a store.json but its {layout.LOG_FILE} is missing",
            missing_log_hint(home / layout.LOG_FILE),
        )
    if new_log and not log_missing:
        raise InvalidInput(
            "--new-log is only for a store whose haystack.log is missing", "leave it out"
        )
    if new_log:
        repair.start_new_log(home)
    with c.open() as kb:
        stats = kb.stats()
    c.emit(stats, lambda: click.echo(f"store ready at {stats['store']} ({stats['model']})"))


@click.command()
@click.option("--full", is_flag=True, help="Compare every record with the index, not a sample.")
@json_option
def check(full: bool) -> None:
    """Verify the store without changing it; exit 0 when sound, 1 when not."""
    from kredenc.engine import make_default_embedder
    from kredenc.storage import repair
    from kredenc.storage.verify import verify_store

    c = context()
    if c.url:  # the server's store, checked where it is
        with c.client(c.url) as client:
            report = client.check(full=full)
        _emit_check(c, report)
        return
    home = store_home(c)
    settings = settings_of(c)
    model_id: str | None = None
    dim: int | None = None
    embed: Any = None
    try:
        embedder = make_default_embedder(settings)
        model_id, dim, embed = embedder.model_id, embedder.dim, embedder.embed
    except KredencError as exc:
        click.echo(f"warning: the configured embedder is not checked ({exc.message})", err=True)
    report = verify_store(
        home,
        model_id=model_id,
        dim=dim,
        cache=repair.cache_path_of(home, settings.embed_cache),
        full=full,
        embed=embed,
        settings=settings,
    )
    _emit_check(c, report)


def _emit_check(c: Context, report: dict[str, Any]) -> None:
    c.emit(report, lambda: click.echo("\n".join(report["findings"])))
    if not report["sound"]:
        sys.exit(1)


@click.command()
@click.option(
    "--fresh-cache", is_flag=True, help="Set the embedding cache aside and embed every record."
)
@json_option
def rebuild(fresh_cache: bool) -> None:
    """Drop the index and rebuild it from the log (a bad index.db or embeddings.db is
    set aside as <name>.bad-<time> first)."""
    from kredenc.storage import layout, repair
    from kredenc.storage.housekeeper import StoreLock

    c = context()
    home = store_home(c)
    layout.require_store(home)
    # Before opening: a file that cannot be opened would stop the open itself. Under
    # the store's lock: a running writer's files (their tables still in the WAL) would
    # look bad from outside and be set aside under it.
    try:
        lock = StoreLock(home / layout.LOCK_FILE)
    except StoreLocked as exc:
        c.through_server(exc)  # names the server holding it, when one advertises itself
        raise
    try:
        cache = repair.cache_path_of(home, settings_of(c).embed_cache)
        aside = repair.set_aside_bad_files(home, cache)
    finally:
        lock.release()
    with c.open(create=False) as kb:
        t0 = time.perf_counter()
        out: dict[str, Any] = dict(kb.rebuild(fresh_cache=fresh_cache))
        out["seconds"] = round(time.perf_counter() - t0, 3)
    out["set_aside"] = aside

    def human() -> None:
        for line in aside:
            click.echo(line)
        click.echo(f"rebuilt {out['records']} records in {out['seconds']} s")

    c.emit(out, human)


@click.command()
@click.option(
    "--to",
    "spec",
    default=None,
    metavar="SPEC",
    help="The embedder to move to: NAME or NAME:PATH (onnx:/models/m); default: the "
    "configured one (embed_provider, embed_model_path).",
)
@json_option
def reembed(spec: str | None) -> None:
    """Move the store to another embedding model: embed every chunk, memory and turn card
    again into a new index beside the old one, then switch index and recorded model
    (stopped midway, the old model still opens the store). Refused while another
    process holds the store."""
    from kredenc.engine import make_default_embedder
    from kredenc.storage.reembed import reembed as run_reembed

    c = context()
    home = store_home(c)
    settings = settings_of(c)
    if spec is not None:
        settings = settings.with_embedder(spec)
    embedder = make_default_embedder(settings)
    last = [0.0]

    def progress(done: int) -> None:
        if not c.json and time.monotonic() - last[0] > 5:
            last[0] = time.monotonic()
            click.echo(f"  {done} records replayed", err=True)

    try:
        report = run_reembed(settings, embedder, on_progress=progress)
    except StoreLocked as exc:
        c.through_server(exc)  # names the server holding it, when one advertises itself
        raise
    out = report.to_json()

    def human() -> None:
        if not report.changed:
            click.echo(f"{home} already uses {report.model}; nothing to do")
            return
        click.echo(
            f"reembedded {report.records} records ({report.embedded} texts embedded) in "
            f"{report.seconds} s: {report.old_model} ({report.old_dim}-d) -> "
            f"{report.model} ({report.dim}-d)"
        )
        if spec is not None:
            path = settings.embed_model_path
            where = f", embed_model_path = {str(path)!r}" if path is not None else ""
            click.echo(
                f"open it with embed_provider = {settings.embed_provider!r}{where} "
                "(kredenc.toml in the store, or KREDENC_* variables)"
            )

    c.emit(out, human)


@click.command()
@click.option(
    "--purge",
    is_flag=True,
    help="Rewrite the log without the text of forgotten records (see docs/storage.md).",
)
@json_option
def compact(purge: bool) -> None:
    """Merge the card index; with --purge, erase forgotten records' text from every file."""
    c = context()
    with c.open(create=False) as kb:
        t0 = time.perf_counter()
        out = kb.compact(purge=purge)
        out["seconds"] = round(time.perf_counter() - t0, 3)

    def human() -> None:
        if purge:
            click.echo(
                f"purged {out['purged']} forgotten records ({out['stripped']} records reduced "
                f"to ids); log {out['bytes_before']} -> {out['bytes_after']} bytes; "
                f"{out['cache_dropped']} cached vectors dropped"
            )
            for name in out["removed_files"]:
                click.echo(f"  removed {name}")
        click.echo(f"compacted in {out['seconds']} s")

    c.emit(out, human)


@click.command()
@click.argument("dest", type=click.Path(path_type=Path))
@json_option
def salvage(dest: Path) -> None:
    """Copy every readable record of a damaged store into a new store at DEST.

    The damaged store is only read. Records before and after any damage are kept with
    their ids; a batch missing any part is left out whole; the seqs lost are reported.
    """
    from kredenc.engine import Kredenc, make_default_embedder
    from kredenc.storage import layout
    from kredenc.storage.salvage import salvage as run_salvage

    c = context()
    home = store_home(c)
    model_id: str | None = None
    dim: int | None = None
    embedder = None
    try:
        layout.read_meta(home)
    except KredencError:
        embedder = make_default_embedder(settings_of(c))
        model_id, dim = embedder.model_id, embedder.dim
    report = run_salvage(home, dest, model_id=model_id, dim=dim)
    # Opening DEST for writing builds its index from the new log.
    with Kredenc.open(dest, c.namespace, embedder=embedder) as kb:
        indexed = kb.index.live_count()
    data = {**report.to_json(), "indexed": int(indexed)}

    def human() -> None:
        click.echo(f"salvaged {report.records} records into {dest}")
        lost = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in report.lost_seqs)
        click.echo(f"  seqs lost: {lost or 'none'}")
        for start, end, why in report.damaged_bytes:
            click.echo(f"  damaged bytes {start}-{end}: {why}")
        for txn, n in report.dropped_batches:
            click.echo(f"  batch {txn} left out whole ({n} records): part of it is damaged")
        for note in report.notes:
            click.echo(f"  note: {note}")

    c.emit(data, human)


COMMANDS = (init, check, rebuild, reembed, compact, salvage)
