"""Docs cannot drift: every setting, every CLI command, the --json rule and the exit codes."""

from __future__ import annotations

import re
from pathlib import Path

import click

from kredenc.config import Settings
from kredenc.interfaces.cli import cli

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _leaves(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    out: list[tuple[str, click.Command]] = []
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            out.extend(_leaves(cmd, f"{prefix}{name} "))
        else:
            out.append((f"{prefix}{name}", cmd))
    return out


def _options(cmd: click.Command) -> set[str]:
    return {opt for param in cmd.params for opt in getattr(param, "opts", [])}


def test_every_setting_is_documented() -> None:
    text = (DOCS / "configuration.md").read_text()
    missing = [name for name in Settings.model_fields if f"`{name}`" not in text]
    assert not missing, f"settings missing from docs/configuration.md: {missing}"


def test_every_cli_command_is_documented() -> None:
    text = (DOCS / "cli.md").read_text()
    missing = [c for c, _ in _leaves(cli) if f"`kredenc {c}" not in text]
    assert not missing, f"commands missing from docs/cli.md: {missing}"


def test_json_option_is_documented_as_it_is() -> None:
    # docs/cli.md says every command takes --json except the ones it names.
    text = (DOCS / "cli.md").read_text()
    without = sorted(c for c, cmd in _leaves(cli) if "--json" not in _options(cmd))
    assert without == ["mcp", "proxy"]
    assert "Every command except `proxy` and `mcp` takes `--json`" in text


def test_exit_codes_are_documented() -> None:
    text = (DOCS / "cli.md").read_text()
    for code in ("0", "1", "2", "130"):
        assert f"| {code} |" in text, code


def _slug(heading: str) -> str:
    # GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens.
    kept = "".join(ch for ch in heading.strip().lower() if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


def test_relative_links_resolve() -> None:
    # The map and the pages link each other; a moved page or renamed heading breaks them.
    pages = [DOCS.parent / "README.md", *sorted(DOCS.glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and linked.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", linked.read_text(), flags=re.MULTILINE)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{page.name}: {target}")
    assert not broken, broken
