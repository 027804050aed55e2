"""``kredenc mcp``: the MCP tools over stdio, for an MCP client that starts kredenc itself
(Claude Desktop, an IDE, an agent framework).

The client owns the process: standard input and output carry the protocol and nothing
else (logging goes to standard error), and the store is the one ``--store`` /
``--namespace`` name, opened for writing for the life of the process. Ingest by path
reads only inside the ``server_roots`` setting's folders, as over HTTP.
"""

from __future__ import annotations

import click

from kredenc.interfaces.cli_common import context, store_home


@click.command("mcp")
def mcp_command() -> None:
    """Serve kredenc's MCP tools over standard input and output.

    For an MCP client's configuration, e.g. {"command": "kredenc", "args": ["mcp",
    "--store", "/path/to/store"]}. Ingest by path reads only inside the server_roots
    setting's folders.
    """
    from pathlib import Path

    from kredenc.interfaces.server.mcp_tools import ToolHost, build_server, limits_of
    from kredenc.recall.reflex import warm_in_background
    from kredenc.storage import layout

    c = context()
    new = not c.url and not layout.is_store(store_home(c))
    with c.open() as kb:
        if new:  # the client's log shows it: a mistyped --store is a blank memory
            click.echo(f"kredenc mcp: created a new, empty store at {kb.home}", err=True)
        # A long-lived process: the first recall should find the query model loaded.
        warm_in_background(kb.store, gate=kb.store.gate)
        roots = tuple(Path(r).expanduser().resolve() for r in kb.settings.server_roots)
        host = ToolHost(view=lambda _ctx: kb, limits=limits_of(kb.settings), roots=roots)
        build_server(host).run("stdio")


COMMANDS: tuple[click.Command, ...] = (mcp_command,)
