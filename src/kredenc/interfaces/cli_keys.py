"""``kredenc keys add | list | revoke``: the API keys network clients use.

Registered on the ``cli`` group through ``cli.COMMAND_MODULES``. The key model is
:mod:`kredenc.interfaces.auth`; these commands never open the store's log or load a
model, so they work while a proxy holds the store.
"""

from __future__ import annotations

import time
from typing import Any

import click

from kredenc.interfaces.auth import KeyRing
from kredenc.interfaces.cli_common import context, json_option, store_home


def _ring() -> KeyRing:
    return KeyRing(store_home(context()))


def _when(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


@click.group("keys")
def keys() -> None:
    """API keys: each lets a network client use ONE namespace (kredenc proxy)."""


@keys.command("add")
@click.option("--namespace", "namespace", required=True, metavar="NAME", help="Its namespace.")
@click.option("--name", default=None, help="A name to list and revoke it by (default: NAME).")
@json_option
def add(namespace: str, name: str | None) -> None:
    """Make a key for NAMESPACE and print it (once: only its digest is stored)."""
    c = context()
    secret, key = _ring().add(namespace, name)
    data: dict[str, Any] = {"key": secret, **key.public()}

    def human() -> None:
        click.echo(secret)
        click.echo(
            f"key {key.name!r} for namespace {key.namespace!r}: shown once, store it now;"
            f" clients send it as 'Authorization: Bearer <key>' (the OpenAI SDK's api_key)",
            err=True,
        )

    c.emit(data, human)


@keys.command("list")
@json_option
def list_keys() -> None:
    """List the keys: name, namespace, first characters, made, revoked."""
    c = context()
    rows = [k.public() for k in _ring().entries()]

    def human() -> None:
        if not rows:
            click.echo("no keys (make one with 'kredenc keys add --namespace NAME')")
            return
        for r in rows:
            state = f"revoked {_when(r['revoked'])}" if r["revoked"] else "active"
            click.echo(
                f"{r['name']}\t{r['namespace']}\t{r['prefix']}…\t{_when(r['created'])}\t{state}"
            )

    c.emit(rows, human)


@keys.command("revoke")
@click.argument("ref", metavar="NAME|PREFIX")
@json_option
def revoke(ref: str) -> None:
    """Revoke a key by its name or its first characters (a running proxy refuses it
    from its next request on)."""
    c = context()
    key = _ring().revoke(ref)
    c.emit(key.public(), lambda: click.echo(f"revoked {key.name!r} ({key.prefix}…)"))


COMMANDS = (keys,)
