"""``kredenc list memories|documents|sessions``, ``kredenc export`` and ``kredenc import``.

``cli.py`` registers :data:`COMMANDS` on the ``kredenc`` group. The export format is
described in docs/export.md.
"""

from __future__ import annotations

import io
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from kredenc.errors import InvalidInput, NotFound
from kredenc.interfaces.cli_common import (
    context,
    count_of,
    is_remote,
    json_option,
    memory_json,
    scope_ids,
    scope_options,
    scope_text,
    short,
)


def _paging(func: Any) -> Any:
    func = click.option(
        "--offset", type=click.IntRange(0), default=0, show_default=True, help="Skip this many."
    )(func)
    return click.option(
        "--limit",
        type=click.IntRange(1, 10_000),
        default=50,
        show_default=True,
        help="Show at most this many.",
    )(func)


def _day(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts)) if ts else "-"


def _more(n: int, limit: int, offset: int) -> None:
    if n == limit:
        click.echo(f"(more may follow: --offset {offset + limit})")


def _page(key: str, rows: list[Any], limit: int, offset: int) -> dict[str, Any]:
    """A page for ``--json``: its rows, its offset, and ``next_offset`` (the --offset of
    the next page; null when this page was not full, so nothing follows)."""
    more = len(rows) == limit
    return {key: rows, "offset": offset, "next_offset": offset + limit if more else None}


@click.group("list")
def list_group() -> None:
    """List memories, documents or sessions, page by page."""


@list_group.command("memories")
@click.option("--kind", "kinds", multiple=True, help="Only this kind (repeat for several).")
@click.option("--status", "statuses", multiple=True, help="Only this status (repeat).")
@click.option("--tag", "tags", multiple=True, help="Only memories with this tag (repeat: all).")
@click.option("--drawer", help="Only this drawer.")
@click.option("--since", metavar="TIME", help="Filed at or after (ISO 8601 or Unix seconds).")
@click.option("--until", metavar="TIME", help="Filed before (ISO 8601 or Unix seconds).")
@scope_options
@_paging
@json_option
def list_memories(
    kinds: tuple[str, ...],
    statuses: tuple[str, ...],
    tags: tuple[str, ...],
    drawer: str | None,
    since: str | None,
    until: str | None,
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
    limit: int,
    offset: int,
) -> None:
    """Memories in filing order (oldest first)."""
    c = context()
    scope = scope_ids(user_id=user_id, agent_id=agent_id, run_id=run_id)
    with c.open(read_only=True) as kb:
        found = kb.list_memories(
            kinds=kinds,
            statuses=statuses,
            tags=tags,
            drawer=drawer,
            since=_time(since),
            until=_time(until),
            limit=limit,
            offset=offset,
            **scope,
        )

    def human() -> None:
        if not found:
            click.echo("no memories")
        for m in found:
            tags_text = f" #{' #'.join(m.tags)}" if m.tags else ""
            whose = f"  ({scope_text(m)})" if scope_text(m) else ""
            click.echo(
                f"{m.id}  {_day(m.created_at)}  {m.kind:<10} {m.status:<11} "
                f"imp {m.importance:.2f}  {short(m.text, 60)}{tags_text}{whose}"
            )
        _more(len(found), limit, offset)

    c.emit(_page("memories", [memory_json(m) for m in found], limit, offset), human)


def _time(value: str | None) -> str | float | None:
    """A time option: Unix seconds stay a number, anything else is parsed as ISO 8601."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return value


@list_group.command("documents")
@click.option("--loader", "loaders", multiple=True, help="Only documents this loader read.")
@click.option("--source", metavar="GLOB", help="Only files matching this glob (e.g. '*.pdf').")
@click.option("--drawer", help="Only this drawer.")
@_paging
@json_option
def list_documents(
    loaders: tuple[str, ...], source: str | None, drawer: str | None, limit: int, offset: int
) -> None:
    """Documents in filing order: id, chunks, loader, file, title."""
    c = context()
    with c.open(read_only=True) as kb:
        found = kb.list_documents(
            loaders=loaders, source=source, drawer=drawer, limit=limit, offset=offset
        )

    def human() -> None:
        if not found:
            click.echo("no documents")
        for d in found:
            click.echo(
                f"{d.id}  {_day(d.created_at)}  {count_of(d.chunks, 'chunk'):>10}  {d.loader:<9} "
                f"{d.origin}  {short(d.title, 40)}"
            )
        _more(len(found), limit, offset)

    c.emit(_page("documents", [asdict(d) for d in found], limit, offset), human)


@list_group.command("sessions")
@_paging
@json_option
def list_sessions(limit: int, offset: int) -> None:
    """Sessions with turns, the most recently active first."""
    c = context()
    with c.open(read_only=True) as kb:
        found = kb.list_sessions(limit=limit, offset=offset)

    def human() -> None:
        if not found:
            click.echo("no sessions")
        for s in found:
            click.echo(f"{s.session}  {s.turns} turns  {_day(s.first_at)} .. {_day(s.last_at)}")
        _more(len(found), limit, offset)

    c.emit(_page("sessions", [asdict(s) for s in found], limit, offset), human)


@click.command("export")
@click.option(
    "--namespace",
    "-n",
    "namespaces",
    multiple=True,
    metavar="NAME",
    help="Export this namespace (repeat for several; default: every namespace).",
)
@json_option
def export_command(namespaces: tuple[str, ...]) -> None:
    """Write the store as JSON lines to standard output (docs/export.md); with or
    without --json the output is those lines (--json makes errors JSON)."""
    c = context()
    chosen = list(namespaces) or ([c.namespace] if c.namespace else None)
    out = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", newline="\n")
    try:
        with c.open(read_only=True) as kb:
            if chosen and not is_remote(kb):
                # The store's owner: a mistyped namespace is named, not an empty backup.
                # (A server's tenant gets the header alone: it may not learn the others.)
                known = kb.index.namespaces()
                missing = [ns for ns in chosen if ns not in known]
                if missing:
                    raise NotFound(
                        f"no namespace {missing[0]!r} in this store (none of its records"
                        " is live there)",
                        f"its namespaces: {', '.join(known) or 'none'}",
                    )
            kb.export(out, chosen)
        out.flush()
    finally:
        out.detach()


@click.command("import")
@click.argument("path", metavar="FILE")
@click.option(
    "--from",
    "fmt",
    type=click.Choice(["kredenc", "mem0"]),
    default="kredenc",
    show_default=True,
    help="kredenc: a 'kredenc export' file; mem0: mem0's get_all JSON.",
)
@click.option("--skip-existing", is_flag=True, help="Leave out records whose id exists.")
@json_option
def import_command(path: str, fmt: str, skip_existing: bool) -> None:
    """File an export (FILE, or - for standard input) into the store, ids kept."""
    c = context()
    name = "standard input" if path == "-" else path
    raw = _read(path)
    with c.open() as kb:
        if fmt == "mem0":
            try:
                data = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InvalidInput(
                    f"{name} is not JSON (line {exc.lineno}: {exc.msg})",
                    "give the JSON mem0's get_all returns",
                ) from None
            report = kb.import_mem0(data, skip_existing=skip_existing)
        else:
            report = kb.import_lines(raw.splitlines(), skip_existing=skip_existing, name=name)
    data = asdict(report)

    def human() -> None:
        skipped = f", {report.skipped} skipped (id exists)" if report.skipped else ""
        if report.held_edges:
            skipped += f", {count_of(report.held_edges, 'edge')} already held"
        click.echo(
            f"imported {count_of(report.records, 'record')} and "
            f"{count_of(report.edges, 'edge')} into "
            f"{', '.join(report.namespaces) or 'no namespace'} in "
            f"{report.batches} {'batch' if report.batches == 1 else 'batches'}{skipped}"
        )

    c.emit(data, human)


def _read(path: str) -> str:
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise InvalidInput(
            f"cannot read {path}: {exc.strerror}", "give a readable file, or - for stdin"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 (byte {exc.start})", "give a UTF-8 file") from None


COMMANDS = (list_group, export_command, import_command)
