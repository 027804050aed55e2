"""What every ``kredenc`` command module shares: the context object, ``--json``, text checks.

``cli.py`` (the group and the entry point) and the ``cli_*`` command modules import
from here; nothing imports ``cli.py`` but the entry point, so the command modules and
the group that registers them form no cycle.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import click

from kredenc.errors import InvalidInput
from kredenc.interfaces.terminal import escaped_output, json_text

F = TypeVar("F", bound=Callable[..., Any])


class Context:
    """The group's options, handed to every command (``click`` context ``obj``)."""

    def __init__(self, store: str | None, namespace: str | None, as_json: bool) -> None:
        self.store = store
        self.namespace = namespace
        self.json = as_json

    def open(self, *, read_only: bool = False) -> Any:
        from kredenc.engine import Kredenc

        return Kredenc.open(self.store, self.namespace, read_only=read_only)

    def emit(self, data: Any, human: Callable[[], None]) -> None:
        if self.json:
            click.echo(json_text(data))
        else:
            with escaped_output():  # no control character reaches the terminal raw
                human()


def json_option(func: F) -> F:
    """``--json`` after the command name (the group takes it before)."""

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


def store_home(c: Context) -> Path:
    """The store directory the command names (``--store``, else ``KREDENC_HOME``)."""
    from kredenc.config import resolve_home

    return resolve_home(c.store)


def context() -> Context:
    """The running command's :class:`Context`, with ``--json`` from either place."""
    ctx = click.get_current_context()
    obj = ctx.find_object(Context)
    assert obj is not None
    if ctx.meta.get("kredenc.json"):
        obj.json = True
    return obj


def check_arg_text(text: str, what: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid UTF-8", f"pass the {what} as UTF-8") from None
    return text


def read_stdin_text() -> str:
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"standard input is not valid UTF-8 (byte {exc.start})", "pass UTF-8 text"
        ) from None


def memory_json(mem: Any) -> dict[str, Any]:
    data = asdict(mem)
    data["tags"] = list(mem.tags)
    return data


def short(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
