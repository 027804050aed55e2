"""Docs cannot drift: every setting and every CLI command is documented."""

from __future__ import annotations

from pathlib import Path

import click

from kredenc.config import Settings
from kredenc.interfaces.cli import cli

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _commands(group: click.Group, prefix: str = "") -> list[str]:
    out = []
    for name, cmd in group.commands.items():
        full = f"{prefix}{name}"
        if isinstance(cmd, click.Group):
            out.extend(_commands(cmd, full + " "))
        else:
            out.append(full)
    return out


def test_every_setting_is_documented() -> None:
    text = (DOCS / "configuration.md").read_text()
    missing = [name for name in Settings.model_fields if f"`{name}`" not in text]
    assert not missing, f"settings missing from docs/configuration.md: {missing}"


def test_every_cli_command_is_documented() -> None:
    text = (DOCS / "cli.md").read_text()
    missing = [c for c in _commands(cli) if f"`kredenc {c}" not in text]
    assert not missing, f"commands missing from docs/cli.md: {missing}"
