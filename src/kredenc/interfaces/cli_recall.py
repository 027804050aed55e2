"""``kredenc recall`` (what the reflex would inject) and ``kredenc proxy`` (serve it)."""

from __future__ import annotations

import logging
import sys

import click

from kredenc.errors import InvalidInput
from kredenc.interfaces.cli_common import (
    check_arg_text,
    context,
    corrected_line,
    is_remote,
    json_option,
    read_stdin_text,
    scope_ids,
    scope_options,
    settings_of,
    store_home,
)
from kredenc.interfaces.terminal import escape


@click.command("recall")
@click.argument("text")
@click.option("--session", "session_id", default="cli", show_default=True, help="Session id.")
@click.option("--items", type=click.IntRange(0, 100), help="Most memories (default: settings).")
@click.option("--item-chars", type=click.IntRange(1), help="Characters per memory line.")
@click.option("--total-chars", type=click.IntRange(1), help="Characters in all.")
@click.option("--tokens", "total_tokens", type=click.IntRange(1), help="Tokens in all (estimated).")
@click.option("--time-budget-ms", type=click.FloatRange(0, min_open=True), help="Time budget.")
@click.option("--mode", type=click.Choice(["hybrid", "lexical", "dense"]), help="Legs to run.")
@scope_options
@json_option
def recall_command(
    text: str,
    session_id: str,
    items: int | None,
    item_chars: int | None,
    total_chars: int | None,
    total_tokens: int | None,
    time_budget_ms: float | None,
    mode: str | None,
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
) -> None:
    """Show what the recall reflex would inject for TEXT (or - for standard input).

    A dry run on a read-only store: nothing is written, no access is counted. The
    embedding model and vectors are loaded first, so the timings are a warm process's.
    """
    from kredenc.recall import Budget, warm_up

    c = context()
    text = read_stdin_text() if text == "-" else check_arg_text(text, "text")
    scope = scope_ids(user_id=user_id, agent_id=agent_id, run_id=run_id)
    with c.open(read_only=True) as kb:
        remote = is_remote(kb)
        # Over a server: the budget of the local settings (the defaults without a store).
        base = Budget.from_settings(settings_of(c) if remote else kb.settings)
        budget = Budget(
            items=base.items if items is None else items,
            item_chars=item_chars or base.item_chars,
            total_chars=total_chars or base.total_chars,
            item_tokens=base.item_tokens,
            total_tokens=total_tokens or base.total_tokens,
        )
        if not remote:
            warm_up(kb.store)  # the server warmed up when it started
        result = kb.recall(
            [{"role": "user", "content": text}],
            session_id=session_id,
            budget=budget,
            dry_run=True,
            time_budget_ms=time_budget_ms,
            mode=mode,
            **scope,
        )
    data = {"query": text, "session": session_id, "budget": budget.to_dict(), **result.to_dict()}

    def human() -> None:
        if line := corrected_line(result.corrections):
            click.echo(escape(line), err=True)
        click.echo(result.block or "(nothing would be recalled)")
        for item in result.items:
            legs = " ".join(f"{n}#{v.rank}" for n, v in item.legs.items())
            cut = ", cut" if item.truncated else ""
            click.echo(f"  #{item.n} {item.id}  score {item.score:.4f}  ({legs}{cut})", err=True)
        timings = " ".join(f"{k} {v:.1f} ms" for k, v in result.timings_ms.items())
        click.echo(
            f"  terms: {' '.join(result.terms) or '-'}; {len(result.block)} chars; "
            f"{result.elapsed_ms:.1f} ms ({timings or 'no legs'})",
            err=True,
        )

    c.emit(data, human)
    if result.error:
        sys.exit(1)


@click.command("proxy")
@click.option("--upstream", required=True, metavar="URL", help="The upstream's base URL (…/v1).")
@click.option("--port", default=8766, show_default=True, type=click.IntRange(0, 65535))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--timeout",
    default=600.0,
    show_default=True,
    type=click.FloatRange(0, min_open=True),
    help="Seconds to wait for the upstream.",
)
@click.option("--dry-run", is_flag=True, default=None, help="Recall and log, inject nothing.")
@click.option("--no-filing", is_flag=True, help="Do not file turns.")
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer to this host name (repeat; adds to proxy_allowed_hosts).",
)
def proxy_command(
    upstream: str,
    port: int,
    host: str,
    timeout: float,
    dry_run: bool | None,
    no_filing: bool,
    allow_hosts: tuple[str, ...],
) -> None:
    """Serve an OpenAI-compatible proxy that adds recall and filing to chat completions.

    With API keys in the store (kredenc keys add) every request needs one and is served
    in the key's namespace; without keys it listens on loopback only.
    """
    from kredenc.interfaces.auth import KeyRing
    from kredenc.interfaces.guard import check_bind
    from kredenc.interfaces.proxy import ProxyConfig, listen, serve

    c = context()
    if not upstream.strip():
        raise InvalidInput("--upstream is empty", "pass the base URL, e.g. http://host:8000/v1")
    check_bind(host, KeyRing(store_home(c)))  # before the store and the model are loaded
    config = ProxyConfig(
        upstream,
        timeout_s=timeout,
        dry_run=dry_run,
        file_turns=not no_filing,
        allowed_hosts=allow_hosts,
    )
    # The startup line and the proxy's own messages are INFO: show them.
    logging.getLogger("kredenc").setLevel(logging.INFO)
    sock = listen(host, port)  # a busy port fails here, before the model loads
    with sock, c.open() as kb:
        serve(kb, config, host=host, port=port, sock=sock)


COMMANDS: tuple[click.Command, ...] = (recall_command, proxy_command)
