"""The command line: ``kredenc …``.

Every command takes ``--json`` for machine-readable output with stable field names.
Errors are one line on stderr and a non-zero exit (2 for usage, 1 for failures);
this module maps the exception tree in exactly one place (:func:`main`).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import click

from kredenc.errors import InvalidInput, KredencError

F = TypeVar("F", bound=Callable[..., Any])

log = logging.getLogger("kredenc.cli")


class Context:
    def __init__(self, store: str | None, namespace: str | None, as_json: bool) -> None:
        self.store = store
        self.namespace = namespace
        self.json = as_json

    def open(self, *, read_only: bool = False) -> Any:
        from kredenc.engine import Kredenc

        return Kredenc.open(self.store, self.namespace, read_only=read_only)

    def emit(self, data: Any, human: Callable[[], None]) -> None:
        if self.json:
            click.echo(json.dumps(data, ensure_ascii=False, default=str))
        else:
            human()


def json_option(func: F) -> F:
    def callback(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            ctx.meta["kredenc.json"] = True

    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        expose_value=False,
        callback=callback,
        help="Print JSON.",
    )(func)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--store", "store", metavar="DIR", help="Store directory (default $KREDENC_HOME or ./.kredenc)."
)
@click.option("--namespace", "-n", metavar="NAME", help="Namespace (tenant).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Log progress to stderr.")
@click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
@click.version_option(package_name="kredenc")
@click.pass_context
def cli(
    ctx: click.Context,
    store: str | None,
    namespace: str | None,
    as_json: bool,
    verbose: bool,
    debug: bool,
) -> None:
    """kredenc: a local-first memory and retrieval engine for LLM agents."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    ctx.obj = Context(store, namespace, as_json)


def _ctx() -> Context:
    ctx = click.get_current_context()
    obj = ctx.find_object(Context)
    assert obj is not None
    if ctx.meta.get("kredenc.json"):
        obj.json = True
    return obj


def _check_arg_text(text: str, what: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid UTF-8", f"pass the {what} as UTF-8") from None
    return text


def _read_stdin_text() -> str:
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"standard input is not valid UTF-8 (byte {exc.start})", "pass UTF-8 text"
        ) from None


def _memory_json(mem: Any) -> dict[str, Any]:
    data = asdict(mem)
    data["tags"] = list(mem.tags)
    return data


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
@click.option("--hops", default=0, show_default=True, type=click.IntRange(0, 3), help="Graph hops.")
@click.option("--rerank", default=None, metavar="NAME", help="Reranker (default: settings).")
@click.option("--per-document", is_flag=True, help="One hit per document (its best chunk).")
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
    hops: int,
    rerank: str | None,
    per_document: bool,
) -> None:
    """Search memories and documents: each hit shows its legs' ranks and scores, the
    fused and rerank scores, and the edge that brought it when graph expansion did."""
    c = _ctx()
    query = _check_arg_text(query, "query")
    page_range = _page_range(pages)
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
        )
    data = {"query": query, "mode": mode, "hits": [_hit_json(h) for h in hits]}

    def human() -> None:
        if not hits:
            click.echo("no hits")
        for i, h in enumerate(hits, 1):
            click.echo(f"{i:>2}. {h.score:.4f}  {h.id}  [{h.kind or h.type}] {_short(h.text)}")
            click.echo(f"      {_provenance(h)}")

    c.emit(data, human)


def _page_range(text: str | None) -> tuple[int, int] | None:
    """``"7"`` → (7, 7), ``"3-9"`` → (3, 9); anything else is refused."""
    if text is None:
        return None
    first, _, last = text.strip().partition("-")
    try:
        pages = (int(first), int(last or first))
    except ValueError:
        raise InvalidInput(
            f"--pages {text!r} is not a page range", "use N or N-M, e.g. --pages 3-9"
        ) from None
    if not 1 <= pages[0] <= pages[1]:
        raise InvalidInput(f"--pages {text!r} is not a page range", "use 1 <= N <= M")
    return pages


def _provenance(hit: Any) -> str:
    """Where a hit came from and why it ranks: source, page or time, each leg's rank and
    score, the fused and rerank scores, and the graph edge that added it."""
    parts: list[str] = []
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
    if hit.rerank is not None:
        parts.append(f"rerank {hit.rerank:.3f}")
    if hit.graph:
        parts.append(f"via {hit.graph}")
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
        "tags": list(hit.tags),
        "meta": hit.meta,
        "title": hit.title,
        "source": hit.origin,
        "page": hit.page,
        "start_s": hit.start_s,
        "graph": hit.graph,
    }


def _short(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@cli.command()
@click.argument("sources", nargs=-1, required=True)
@click.option("--drawer", default="documents", show_default=True)
@click.option("--include", multiple=True, help="Glob of files to take from folders (repeat).")
@click.option("--exclude", multiple=True, help="Glob of files to skip (repeat).")
@json_option
def ingest(
    sources: tuple[str, ...], drawer: str, include: tuple[str, ...], exclude: tuple[str, ...]
) -> None:
    """Load files, folders and URLs into the knowledge base."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    c = _ctx()
    for source in sources:
        _check_arg_text(source, "source")
    with (
        c.open() as kb,
        Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed} sources"),
            TimeElapsedColumn(),
            # On stderr, and only on a terminal: stdout keeps the summary (or the JSON).
            disable=c.json or not sys.stderr.isatty(),
            console=Console(stderr=True),
            transient=True,
        ) as bar,
    ):
        task = bar.add_task("ingesting", total=None)

        def progress(source: str, _report: Any) -> None:
            bar.update(task, advance=1, description=_short(source, 50))

        report = kb.ingest(
            list(sources),
            drawer=drawer,
            include=list(include) or None,
            exclude=list(exclude) or None,
            on_progress=progress,
        )
    data = report.to_json()

    def human() -> None:
        click.echo(
            f"{data['documents']} documents filed ({data['chunks']} chunks), "
            f"{data['unchanged']} unchanged, {data['replaced']} replaced, "
            f"{len(data['failed'])} failed, in {data['seconds']} s"
        )
        for fail in data["failed"]:
            click.echo(f"  failed: {fail['error']}")

    c.emit(data, human)
    if data["failed"] and not data["documents"] and not data["unchanged"]:
        sys.exit(1)


@cli.command()
@click.argument("record_id")
@json_option
def get(record_id: str) -> None:
    """Show one record."""
    c = _ctx()
    with c.open(read_only=True) as kb:
        mem = kb.get(record_id)
    c.emit(_memory_json(mem), lambda: click.echo(f"{mem.id} [{mem.kind}] {mem.text}"))


@cli.command()
@click.argument("record_id")
@json_option
def forget(record_id: str) -> None:
    """Hide a record everywhere (appends a tombstone)."""
    c = _ctx()
    with c.open() as kb:
        kb.forget(record_id)
    c.emit({"id": record_id, "forgotten": True}, lambda: click.echo(f"forgot {record_id}"))


@cli.command()
@json_option
def stats() -> None:
    """Counts per drawer, log size, model."""
    c = _ctx()
    with c.open(read_only=True) as kb:
        data = kb.stats()

    def human() -> None:
        click.echo(f"store {data['store']}  namespace {data['namespace']}  model {data['model']}")
        click.echo(f"log: {data['log_records']} records, {data['log_bytes']} bytes")
        for d in data["drawers"]:
            click.echo(f"  {d['drawer']:<20} {d['type']:<10} {d['records']}")

    c.emit(data, human)


@cli.command()
@json_option
def demo() -> None:
    """File sample memories into the store, search them, and show the timings."""
    from kredenc.interfaces.demo import run_demo

    c = _ctx()
    report = run_demo(c.store, c.namespace, quiet=c.json)
    if c.json:
        click.echo(json.dumps(report, ensure_ascii=False))


def _home(c: Context) -> Path:
    from kredenc.config import resolve_home

    return resolve_home(c.store)


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
    """Entry point: run the CLI and map errors to one line and an exit code."""
    args = sys.argv[1:] if argv is None else argv
    try:
        _check_args_utf8(args)
        cli.main(args=args, prog_name="kredenc", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("error: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        # One line, like every other error: the message, then the hint in parentheses.
        hint = "see 'kredenc --help'"
        ctx = getattr(exc, "ctx", None)
        if ctx is not None:
            hint = f"see '{ctx.command_path} --help'"
        message = " ".join(exc.format_message().split())
        click.echo(f"error: {message} ({hint})", err=True)
        sys.exit(exc.exit_code)
    except KredencError as exc:
        line = f"error: {exc.message}"
        if exc.hint:
            line += f" ({exc.hint})"
        click.echo(line, err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        click.echo(f"error: {exc.strerror or exc} ({exc.filename or ''})", err=True)
        sys.exit(1)
    except Exception as exc:
        if "--debug" in (argv if argv is not None else sys.argv):
            raise
        click.echo(
            f"error: internal error: {type(exc).__name__}: {exc} "
            "(run with --debug for the traceback, and please report it)",
            err=True,
        )
        sys.exit(1)


def _register_subcommands() -> None:
    # Command groups living in their own modules register on ``cli`` when imported.
    from kredenc.interfaces import cli_eval, cli_memory, cli_recall, cli_store  # noqa: F401


_register_subcommands()
