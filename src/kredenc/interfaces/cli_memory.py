"""``kredenc remember | score | history | relate | graph | jobs run``: memories and their
lifecycle.

``cli.py`` registers :data:`COMMANDS` on the ``kredenc`` group.
``remember`` here is the full command, with the memory's scores and state as flags.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

import click

from kredenc.fields import where_pairs
from kredenc.interfaces.cli_common import (
    check_arg_text,
    check_query,
    context,
    json_option,
    memory_json,
    read_stdin_text,
    scope_ids,
    scope_options,
    scope_text,
    short,
)
from kredenc.memory.history import HistoryEntry
from kredenc.memory.scheduler import JOBS
from kredenc.wire import to_wire


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


@click.command()
@click.argument("text")
@click.option("--kind", default="note", show_default=True, help="Memory kind.")
@click.option("--drawer", default="memories", show_default=True)
@click.option("--tags", default="", help="Comma-separated tags.")
@click.option("--importance", type=float, help="Importance in [0, 1] (default 0.5).")
@click.option("--confidence", type=float, help="Confidence in [0, 1] (default 0.5).")
@click.option("--stability", type=float, help="Stability in [0, 1] (default 0.5).")
@click.option("--status", help="unvalidated, validated, disputed or deprecated.")
@click.option("--source", help="user, agent, ingest or reflection (default user).")
@click.option("--episode", "episode_id", metavar="ID", help="Episode the memory belongs to.")
@click.option("--task-status", help="For tasks: pending, active, done or cancelled.")
@click.option("--valid-from", metavar="TIME", help="ISO 8601 time or Unix seconds.")
@click.option("--valid-to", metavar="TIME", help="ISO 8601 time or Unix seconds.")
@click.option("--read-only", is_flag=True, help="Refuse later changes and forgetting.")
@click.option("--user-id", metavar="ID", help="Whose memory it is (inside the namespace).")
@click.option("--agent-id", metavar="ID", help="The agent that files it.")
@click.option("--run-id", metavar="ID", help="The run (conversation, job) it comes from.")
@click.option(
    "--meta",
    "metas",
    multiple=True,
    metavar="KEY=VALUE",
    help="A meta field (a JSON scalar, else text; repeat), as search --where reads it.",
)
@json_option
def remember(
    text: str,
    kind: str,
    drawer: str,
    tags: str,
    read_only: bool,
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
    metas: tuple[str, ...],
    **fields: Any,
) -> None:
    """File a memory (TEXT, or - to read it from standard input)."""
    c = context()
    text = read_stdin_text() if text == "-" else check_arg_text(text, "text")
    tag_list = [t.strip() for t in tags.split(",") if t.strip()]
    values = _drop_none(fields)
    if read_only:
        values["read_only"] = True
    meta = where_pairs(metas, "--meta") or None
    scope = scope_ids(user_id=user_id, agent_id=agent_id, run_id=run_id)
    with c.open() as kb:
        mem = kb.remember(
            text, kind=kind, drawer=drawer, tags=tag_list, meta=meta, **values, **scope
        )

    def human() -> None:
        whose = f", {scope_text(mem)}" if scope_text(mem) else ""
        click.echo(f"{mem.id}  (seq {mem.seq}, offset {mem.offset}{whose})")

    c.emit(memory_json(mem), human)


@click.command()
@click.argument("record_id")
@click.option("--importance", type=float, help="Importance in [0, 1].")
@click.option("--confidence", type=float, help="Confidence in [0, 1].")
@click.option("--stability", type=float, help="Stability in [0, 1].")
@click.option("--status", help="unvalidated, validated, disputed or deprecated.")
@click.option("--task-status", help="For tasks: pending, active, done or cancelled.")
@click.option("--valid-from", metavar="TIME", help="ISO 8601 time or Unix seconds.")
@click.option("--valid-to", metavar="TIME", help="ISO 8601 time or Unix seconds.")
@click.option("--episode", "episode_id", metavar="ID", help="Move it to an episode.")
@click.option("--reason", help="Why (kept in the log record).")
@json_option
def score(record_id: str, reason: str | None, **fields: Any) -> None:
    """Change a memory's scores or state; only the fields given change."""
    c = context()
    values = _drop_none(fields)
    with c.open(create=False) as kb:
        mem = kb.score(record_id, reason=reason, **values)
    data = memory_json(mem)

    def human() -> None:
        shown = ", ".join(f"{k} {data[k]}" for k in values)
        click.echo(f"{mem.id}: {shown}")

    c.emit(data, human)


@click.command()
@click.argument("record_id")
@click.option("--limit", type=click.IntRange(1, 9_999), default=100, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@json_option
def history(record_id: str, limit: int, offset: int) -> None:
    """Every change to a memory, oldest first: created, score and status edits (old ->
    new, with the reason), relations added and removed, forgotten."""
    c = context()
    with c.open(read_only=True) as kb:  # a read command never changes the store
        entries = kb.memory_history(record_id, limit=limit, offset=offset)
    data = {"id": record_id, "items": to_wire(entries), "limit": limit, "offset": offset}
    c.emit(data, lambda: click.echo("\n".join(history_line(e) for e in entries)))


def history_line(e: HistoryEntry) -> str:
    """One history entry as a line: seq, time (UTC), what changed, why, by whom."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e.at)) if e.at else "-"
    if e.change == "created":
        what = f"created [{e.kind or '?'}] {short(e.text)}" if e.text else "created (text erased)"
    elif e.change == "changed":
        what = ", ".join(f"{f.field} {_value(f.old)} -> {_value(f.new)}" for f in e.fields)
    elif e.change in ("related", "unrelated"):
        arrow = f"-[{e.rel}]-> {e.other}" if e.outgoing else f"<-[{e.rel}]- {e.other}"
        what = f"{e.change} {arrow}"
    else:
        what = e.change
    why = f"  ({e.reason})" if e.reason else ""
    by = f"  by {e.by}" if e.by else ""
    return f"{e.seq:>6}  {when}  {what}{why}{by}"


def _value(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, float) else str(value)


@click.command()
@click.argument("src", metavar="FROM")
@click.argument("dst", metavar="TO")
@click.argument("rel", metavar="TYPE")
@click.option("--weight", type=float, default=1.0, show_default=True, help="Weight in [0, 1].")
@click.option("--remove", is_flag=True, help="Delete the relation instead.")
@json_option
def relate(src: str, dst: str, rel: str, weight: float, remove: bool) -> None:
    """Relate two records: TYPE is supports, contradicts, depends_on, derived_from,
    related_to, precedes or follows."""
    c = context()
    with c.open(create=False) as kb:
        kb.relate(src, dst, rel, weight=weight, remove=remove)
    data = {"src": src, "dst": dst, "rel": rel, "weight": weight, "removed": remove}
    arrow = f"-[{rel}]->" if remove else f"-[{rel} {weight:g}]->"
    c.emit(data, lambda: click.echo(f"{'removed' if remove else 'related'} {src} {arrow} {dst}"))


@click.command()
@click.argument("query")
@click.option("--hops", default=2, show_default=True, type=click.IntRange(0, 3))
@click.option("-k", "--k", "k", default=10, show_default=True, type=click.IntRange(1, 1000))
@click.option("--neighbors-max", default=40, show_default=True, type=click.IntRange(0, None))
@click.option(
    "--budget", default=2000, show_default=True, type=click.IntRange(0, None), metavar="CHARS"
)
@scope_options
@json_option
def graph(
    query: str,
    hops: int,
    k: int,
    neighbors_max: int,
    budget: int,
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
) -> None:
    """The context graph of QUERY: ranked records and the typed edges between them."""
    c = context()
    query = check_query(query)
    scope = scope_ids(user_id=user_id, agent_id=agent_id, run_id=run_id)
    with c.open(read_only=True) as kb:  # a read command never changes the store
        found = kb.context_graph(query, hops=hops, k=k, neighbors_max=neighbors_max, **scope)
    prompt = found.to_prompt_text(budget)
    data = {
        "query": query,
        "nodes": [asdict(n) for n in found.nodes],
        "edges": [asdict(e) for e in found.edges],
        "prompt": prompt,
    }

    def human() -> None:
        if not found.nodes:
            click.echo("no records")
        for n in found.nodes:
            via = f"  via {n.via}" if n.via else ""
            whose = f"  ({scope_text(n)})" if scope_text(n) else ""
            click.echo(f"{n.score:.3f}  {n.id}  [{n.kind or n.type}] {short(n.text)}{via}{whose}")
        for e in found.edges:
            click.echo(f"  {e.src} -[{e.rel}]-> {e.dst}")
        if prompt:  # what an agent's prompt would get, within --budget characters
            click.echo(f"\nprompt text ({len(prompt)} of {budget} characters):")
            click.echo(prompt)

    c.emit(data, human)


@click.group(name="jobs")
def jobs_group() -> None:
    """Lifecycle jobs: decay, episodes, contradictions, reflect."""


@jobs_group.command(name="run")
@click.argument("names", nargs=-1, type=click.Choice(list(JOBS)), metavar="[JOB]...")
@json_option
def jobs_run(names: tuple[str, ...]) -> None:
    """Run lifecycle jobs now (all of them when none is named)."""
    c = context()
    with c.open(create=False) as kb:
        reports = kb.run_jobs(names)
    data = {"jobs": [r.to_json() for r in reports]}
    c.emit(data, lambda: click.echo("\n".join(r.summary() for r in reports)))


COMMANDS: tuple[click.Command, ...] = (remember, score, history, relate, graph, jobs_group)
