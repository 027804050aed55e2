"""The command line: ``kredenc …``; the group, the core commands and the entry point.

Every command but ``proxy`` takes ``--json`` for machine-readable output with stable
field names. Errors are one line on stderr and a non-zero exit (2 for bad input or
usage, 1 for failures, 130 when aborted); this module maps the exception tree in
exactly one place (:func:`main`).

Command modules (``cli_*.py``) import what they share from :mod:`.cli_common`, never
from here, and list their commands in ``COMMANDS``; :data:`COMMAND_MODULES` registers
them on the group.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import asdict
from types import ModuleType
from typing import Any

import click

from kredenc.errors import InvalidInput, KredencError
from kredenc.fields import parse_pages, where_pairs
from kredenc.interfaces import (
    cli_ask,
    cli_eval,
    cli_keys,
    cli_mcp,
    cli_memory,
    cli_recall,
    cli_serve,
    cli_store,
    cli_transfer,
    cli_worker,
)
from kredenc.interfaces.cli_common import (
    CREATED,
    MADE_LOGS,
    Context,
    add_global_options,
    check_arg_text,
    check_query,
    context,
    corrected_line,
    count_of,
    discard_created_stores,
    json_option,
    memory_json,
    scope_ids,
    scope_options,
    scope_text,
    short,
)
from kredenc.interfaces.terminal import EscapingFormatter, escape, json_text, one_line
from kredenc.records import corrections_of
from kredenc.retrieve.iterative import RoundHits

log = logging.getLogger("kredenc.cli")


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, no_args_is_help=True)
@click.option(
    "--store", "store", metavar="DIR", help="Store directory (default $KREDENC_HOME or ./.kredenc)."
)
@click.option("--namespace", "-n", metavar="NAME", help="Namespace (tenant).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Log progress to stderr.")
@click.option(
    "--debug", is_flag=True, help="Show tracebacks of internal errors (and log as -v does)."
)
@click.option(
    "--url",
    metavar="URL",
    envvar="KREDENC_URL",
    help="Run the command against this kredenc server ($KREDENC_URL).",
)
@click.option(
    "--api-key", metavar="KEY", envvar="KREDENC_API_KEY", help="Its API key ($KREDENC_API_KEY)."
)
@click.version_option(package_name="kredenc")
@click.pass_context
def cli(
    ctx: click.Context,
    store: str | None,
    namespace: str | None,
    as_json: bool,
    verbose: bool,
    debug: bool,
    url: str | None,
    api_key: str | None,
) -> None:
    """kredenc: a local-first memory and retrieval engine for LLM agents."""
    handler = logging.StreamHandler()
    handler.setFormatter(EscapingFormatter("%(levelname)s %(name)s: %(message)s"))
    level = logging.INFO if verbose or debug else logging.WARNING  # -v: tracebacks in the log
    logging.basicConfig(level=level, handlers=[handler])
    ctx.obj = Context(store, namespace, as_json, url or None, api_key or None)


@cli.command()
@click.argument("query")
@click.option("-k", "k", default=10, show_default=True, type=click.IntRange(1, 1000))
@click.option(
    "--mode", type=click.Choice(["hybrid", "lexical", "dense"]), default="hybrid", show_default=True
)
@click.option("--drawer", default=None, help="Only this drawer.")
@click.option("--kind", "kinds", multiple=True, help="Only records of this kind (repeat).")
@click.option("--loader", "loaders", multiple=True, help="Only chunks from this loader (repeat).")
@click.option("--source", default=None, metavar="GLOB", help="Only chunks whose source matches.")
@click.option("--pages", default=None, metavar="N[-M]", help="Only chunks on these pages.")
@click.option("--since", default=None, metavar="TIME", help="Filed at or after (ISO 8601).")
@click.option("--until", default=None, metavar="TIME", help="Filed before (ISO 8601).")
@click.option(
    "--asked-at",
    default=None,
    metavar="TIME",
    help="When the query is asked (ISO 8601): a time it names ('two months ago') puts what "
    "was filed since then first.",
)
@click.option("--hops", default=0, show_default=True, type=click.IntRange(0, 3), help="Graph hops.")
@click.option(
    "--iterative",
    is_flag=True,
    help="Multi-hop: --hops N rounds that search the names the top hits add (not graph hops).",
)
@click.option("--rerank", default=None, metavar="NAME", help="Reranker (default: settings).")
@click.option("--per-document", is_flag=True, help="One hit per document (its best chunk).")
@click.option("--tag", "tags", multiple=True, help="Only records with this tag (repeat: all).")
@click.option(
    "--where",
    "wheres",
    multiple=True,
    metavar="KEY=VALUE",
    help="Only records whose meta KEY is VALUE (a JSON scalar, else text; repeat: all).",
)
@click.option(
    "--min-score",
    default=None,
    type=click.FloatRange(0.0, 1.0),
    metavar="P",
    help="Drop hits whose calibrated relevance (0-1, same scale for every query) is below P.",
)
@scope_options
@json_option
def search(
    query: str,
    k: int,
    mode: str,
    drawer: str | None,
    kinds: tuple[str, ...],
    loaders: tuple[str, ...],
    source: str | None,
    pages: str | None,
    since: str | None,
    until: str | None,
    asked_at: str | None,
    hops: int,
    iterative: bool,
    rerank: str | None,
    per_document: bool,
    tags: tuple[str, ...],
    wheres: tuple[str, ...],
    min_score: float | None,
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
) -> None:
    """Search memories and documents: each hit shows its legs' ranks and scores, the
    fused and rerank scores, and the edge that brought it when graph expansion did."""
    c = context()
    query = check_query(query)
    page_range = parse_pages(pages, "--pages")
    where = where_pairs(wheres)
    scope = scope_ids(user_id=user_id, agent_id=agent_id, run_id=run_id)
    with c.open(read_only=True) as kb:  # a read command never changes the store
        hits = kb.search(
            query,
            k=k,
            mode=mode,
            drawer=drawer,
            kinds=kinds,
            loaders=loaders,
            source=source,
            pages=page_range,
            since=since,
            until=until,
            hops=hops,
            rerank=rerank,
            per_document=per_document,
            tags=tags,
            where=where or None,
            min_score=min_score,
            iterative=iterative,
            asked_at=asked_at,
            **scope,
        )
        # A memory's importance now (scores change after filing): from the index.
        importance = {h.id: kb.get(h.id).importance for h in hits if h.type == "memory"}
    corrections = corrections_of(hits)
    data = {
        "query": query,
        "mode": mode,
        "hits": [_hit_json(h) | {"importance": importance.get(h.id)} for h in hits],
        "corrections": corrections,
    }
    if isinstance(hits, RoundHits):  # an iterative search: what each round searched
        data["rounds"] = [asdict(r) for r in hits.rounds]

    def human() -> None:
        if line := corrected_line(corrections):
            click.echo(escape(line))
        if isinstance(hits, RoundHits):
            click.echo(escape(hits.explain()))
        if not hits:
            click.echo("no hits")
        for i, h in enumerate(hits, 1):
            click.echo(f"{i:>2}. {h.score:.4f}  {h.id}  [{h.kind or h.type}] {short(h.text)}")
            click.echo(f"      {_provenance(h, importance.get(h.id))}")

    c.emit(data, human)


def _provenance(hit: Any, importance: float | None = None) -> str:
    """Where a hit came from and why it ranks: a memory's or turn's date (and a
    memory's importance), a chunk's source and page or time, each leg's rank and score,
    the fused score and coverage bonus, the rerank score, and the graph edge that added
    it."""
    parts: list[str] = []
    if hit.type in ("memory", "turn") and hit.created_at:
        parts.append(time.strftime("%Y-%m-%d %H:%M", time.gmtime(hit.created_at)))
    if importance is not None:
        parts.append(f"importance {importance:.2f}")
    if hit.title or hit.origin:
        where = hit.title or hit.origin
        if hit.page is not None:
            where += f" p.{hit.page}"
        elif hit.start_s is not None:
            where += f" @{int(hit.start_s) // 60}:{int(hit.start_s) % 60:02d}"
        parts.append(where)
    parts += [f"{n} #{v.rank} ({v.score:.3f})" for n, v in hit.legs.items()]
    if hit.fused:
        parts.append(f"fused {hit.fused:.3f}")
        bonus = hit.score - hit.fused if hit.rerank is None else 0.0
        if bonus >= 5e-4:  # the query terms it adds to the hits above it
            parts.append(f"coverage +{bonus:.3f}")
    if hit.rerank is not None:
        parts.append(f"rerank {hit.rerank:.3f}")
    if getattr(hit, "relevance", None) is not None:
        parts.append(f"relevance {hit.relevance:.2f}")
    if hit.graph:
        parts.append(f"via {hit.graph}")
    if scope_text(hit):
        parts.append(scope_text(hit))
    return " · ".join(parts) or "-"


def _hit_json(hit: Any) -> dict[str, Any]:
    return {
        "id": hit.id,
        "text": hit.text,
        "score": hit.score,
        "kind": hit.kind,
        "drawer": hit.drawer,
        "type": hit.type,
        "seq": hit.seq,
        "offset": hit.offset,
        "legs": {n: {"rank": v.rank, "score": v.score} for n, v in hit.legs.items()},
        "fused": hit.fused,
        "rerank": hit.rerank,
        "relevance": hit.relevance,
        "tags": list(hit.tags),
        "meta": hit.meta,
        "title": hit.title,
        "source": hit.origin,
        "page": hit.page,
        "start_s": hit.start_s,
        "graph": hit.graph,
        "created_at": hit.created_at,
        "user_id": hit.user_id,
        "agent_id": hit.agent_id,
        "run_id": hit.run_id,
    }


@cli.command()
@click.argument("sources", nargs=-1, required=True)
@click.option("--drawer", default="documents", show_default=True)
@click.option("--include", multiple=True, help="Glob of files to take from folders (repeat).")
@click.option("--exclude", multiple=True, help="Glob of files to skip (repeat).")
@click.option(
    "--follow-symlinks", is_flag=True, help="Read files in folders that symlink out of them."
)
@json_option
def ingest(
    sources: tuple[str, ...],
    drawer: str,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    follow_symlinks: bool,
) -> None:
    """Load files, folders and URLs into the knowledge base."""
    import rich.markup
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from kredenc.ingest.loaders.base import LEAVES_FOLDER, page_progress
    from kredenc.ingest.redact import redact_url

    c = context()
    for source in sources:
        check_arg_text(source, "source")

    def shown(source: str) -> str:
        return rich.markup.escape(one_line(redact_url(short(source, 50))))

    with (
        c.open() as kb,
        Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[count]}"),
            TimeElapsedColumn(),
            # On stderr, and only on a terminal: stdout keeps the summary (or the JSON).
            disable=c.json or not sys.stderr.isatty(),
            console=Console(stderr=True),
            transient=True,
        ) as bar,
    ):
        # One row counts the sources done; the other moves through a long file's pages.
        files = bar.add_task("ingesting", total=None, count="0 files done")
        pages = bar.add_task("", total=None, count="", visible=False)

        def on_page(source: str, page: int, total: int) -> None:
            bar.update(
                pages,
                description=shown(source),
                completed=page,
                total=total,
                count=f"page {page} of {total}",
                visible=True,
            )

        def progress(source: str, _report: Any) -> None:
            done = int(bar.tasks[files].completed) + 1
            bar.update(
                files, advance=1, description=shown(source), count=f"{count_of(done, 'file')} done"
            )
            bar.update(pages, visible=False)

        with page_progress(on_page):
            report = kb.ingest(
                list(sources),
                drawer=drawer,
                include=list(include) or None,
                exclude=list(exclude) or None,
                on_progress=progress,
                follow_symlinks=follow_symlinks,
            )
    data = report.to_json()

    def human() -> None:
        # A replaced file is one of the documents filed (its new version), said so.
        replaced = data["replaced"]
        versions = f"; {replaced} of them a new version of a file filed before" if replaced else ""
        click.echo(
            f"{count_of(data['documents'], 'document')} filed "
            f"({count_of(data['chunks'], 'chunk')}{versions}), "
            f"{data['unchanged']} unchanged, "
            f"{len(data['failed'])} failed, {len(data['skipped'])} skipped, in {data['seconds']} s"
        )
        # One line a file: a path's newlines and tabs are escaped too (one_line).
        for outcome in report.files:
            source = one_line(outcome.source)
            if outcome.status == "failed":
                # The reason names the source when it starts with it (most do).
                reason = outcome.error
                if not reason.startswith(outcome.source):
                    reason = f"{outcome.source}: {reason}"
                click.echo(f"  failed: {one_line(reason)}")
            elif outcome.status == "unchanged":
                click.echo(f"  unchanged: {source}")
            else:
                chunks = count_of(outcome.chunks, "chunk")
                click.echo(f"  {outcome.status}: {source} ({chunks})")
        for skip in data["skipped"]:
            click.echo(f"  skipped: {one_line(skip['source'])}: {one_line(skip['reason'])}")
        if any(skip["reason"] == LEAVES_FOLDER for skip in data["skipped"]):
            click.echo("  (--follow-symlinks reads files that symlink out of the folder)")

    c.emit(data, human)
    if data["failed"] and not data["documents"] and not data["unchanged"]:
        sys.exit(1)


@cli.command()
@click.argument("record_id")
@json_option
def get(record_id: str) -> None:
    """Show one record."""
    c = context()
    with c.open(read_only=True) as kb:
        mem = kb.get(record_id)
        source = kb.provenance(record_id)
        document = kb.read_document(record_id)[0] if mem.type == "document" else None
    data = memory_json(mem)
    if source is not None:
        data["source_document"] = source
    if document is not None:
        data["document"] = asdict(document)

    def human() -> None:
        # A memory by its kind; a chunk, turn or document by what it is.
        label = mem.kind if mem.type == "memory" else mem.type
        click.echo(f"{mem.id} [{label}] {mem.text}".rstrip())
        if scope_text(mem):
            click.echo(scope_text(mem))
        if document is not None:
            click.echo(
                f"{document.title or 'untitled'}: {document.origin} ({document.loader}, "
                f"{count_of(document.chunks, 'chunk')}, version {document.version})"
            )
        if source is not None:
            page = f", page {source['page']}" if source["page"] is not None else ""
            click.echo(
                f"from document {source['document']} ({source['title'] or 'untitled'}): "
                f"{source['file']}{page}"
            )

    c.emit(data, human)


@cli.command()
@click.argument("record_id")
@json_option
def forget(record_id: str) -> None:
    """Hide a record everywhere (appends a tombstone)."""
    c = context()
    with c.open(create=False) as kb:
        kb.forget(record_id)
    c.emit({"id": record_id, "forgotten": True}, lambda: click.echo(f"forgot {record_id}"))


@cli.command()
@json_option
def stats() -> None:
    """Counts per drawer, log size, model."""
    c = context()
    with c.open(read_only=True) as kb:
        data = kb.stats()

    def human() -> None:
        # A server's tenant with a key is not shown the store's folder and log (REST /stats).
        where = f"store {data['store']}  " if "store" in data else ""
        click.echo(f"{where}namespace {data['namespace']}  model {data['model']}")
        if "log_records" in data:
            size = f", {data['log_bytes']} bytes" if data.get("log_bytes") is not None else ""
            click.echo(f"log: {data['log_records']} records{size}")
        for d in data["drawers"]:
            click.echo(f"  {d['drawer']:<20} {d['type']:<10} {d['records']}")

    c.emit(data, human)


@cli.command()
@json_option
def demo() -> None:
    """File sample memories into the store, search them, and show the timings."""
    from kredenc.interfaces.demo import run_demo

    c = context()
    report = run_demo(c.store, c.namespace, quiet=c.json)
    if c.json:
        click.echo(json_text(report))


def _check_args_utf8(args: list[str]) -> None:
    """Refuse arguments that are not UTF-8 (Python hands them over as lone surrogates).

    Checked once here for every command and option, so that no such value reaches the
    log, SQLite or a path as an internal error.
    """
    for position, arg in enumerate(args, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
            raise InvalidInput(
                f"argument {position} ('{shown}') is not valid UTF-8", "pass UTF-8 text"
            ) from None


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and map errors to one line and an exit code.

    The one place the exception tree meets the command line: each error is
    ``error: MESSAGE (HINT)`` on stderr, or with ``--json`` (anywhere before a ``--``)
    the one JSON error shape ``{"error": {"code", "message", "hint"}}``; the exit codes
    are the same either way.
    """
    args = sys.argv[1:] if argv is None else argv
    try:
        _main(args)
    except SystemExit as exc:
        if exc.code not in (0, None):
            discard_created_stores()  # a failed write leaves no empty store
        raise
    CREATED.clear()
    MADE_LOGS.clear()


def _main(args: list[str]) -> None:
    options = args[: args.index("--")] if "--" in args else args
    as_json = "--json" in options
    try:
        _check_args_utf8(args)
        cli.main(args=args, prog_name="kredenc", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # plain ``kredenc``: the help
        click.echo(exc.ctx.get_help() if exc.ctx is not None else cli.get_help(click.Context(cli)))
    except click.exceptions.Abort:
        _fail("aborted", "aborted", "", as_json)
        sys.exit(130)
    except click.ClickException as exc:
        hint = "see 'kredenc --help'"
        ctx = getattr(exc, "ctx", None)
        if ctx is not None:
            hint = f"see '{ctx.command_path} --help'"
        code = "usage" if isinstance(exc, click.UsageError) else "error"
        _fail(code, " ".join(exc.format_message().split()), hint, as_json)
        sys.exit(exc.exit_code)
    except KredencError as exc:
        _fail(exc.code, exc.message, exc.hint or "", as_json)
        sys.exit(exc.exit_code)
    except OSError as exc:
        _fail("os_error", str(exc.strerror or exc), str(exc.filename or ""), as_json)
        sys.exit(1)
    except Exception as exc:
        if "--debug" in options:
            raise
        _fail(
            "internal_error",
            f"internal error: {type(exc).__name__}: {exc}",
            "run with --debug for the traceback, and please report it",
            as_json,
        )
        sys.exit(1)


def _fail(code: str, message: str, hint: str, as_json: bool) -> None:
    """Print an error on stderr, one line: ``error: MESSAGE (HINT)``, or the JSON error
    shape; URL credentials masked, control characters escaped (JSON escapes them)."""
    from kredenc.ingest.redact import redact_url

    message, hint = redact_url(message), redact_url(hint)
    if as_json:
        click.echo(json_text({"error": {"code": code, "message": message, "hint": hint}}), err=True)
        return
    line = f"error: {message}" + (f" ({hint})" if hint else "")
    click.echo(escape(line), err=True)


# Command modules: one import above and one entry here each.
COMMAND_MODULES: tuple[ModuleType, ...] = (
    cli_ask,
    cli_eval,
    cli_keys,
    cli_mcp,
    cli_memory,
    cli_recall,
    cli_serve,
    cli_store,
    cli_transfer,
    cli_worker,
)
for _module in COMMAND_MODULES:
    for _command in _module.COMMANDS:
        cli.add_command(_command)
for _command in cli.commands.values():
    add_global_options(_command)
