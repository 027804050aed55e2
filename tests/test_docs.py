"""Docs cannot drift: every setting and its default, every CLI command, the --json rule
and the exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

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


_SETTING_ROW = re.compile(r"^\| (`[a-z_]+`(?:, `[a-z_]+`)*) \| `([^`]*)` \|", re.M)


def _doc_value(text: str) -> Any:
    """A default as a docs table writes it (JSON, or Python's spelling of it)."""
    for candidate in (text, text.replace("'", '"')):
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    return {"True": True, "False": False, "None": None}.get(text, text)


def test_every_default_in_a_settings_table_is_the_settings_own() -> None:
    """A row ``| `setting` | `default` | ...`` in any page says the default the code has
    (recall.md once said 3 items and memories and turns after both had changed)."""
    wrong = []
    for page in sorted(DOCS.glob("*.md")):
        for names, value in _SETTING_ROW.findall(page.read_text()):
            for name in re.findall(r"`([a-z_]+)`", names):
                field = Settings.model_fields.get(name)
                if field is None:
                    continue
                default = field.get_default(call_default_factory=True)
                if hasattr(default, "get_secret_value"):
                    default = default.get_secret_value()
                said = _doc_value(value)
                if isinstance(default, tuple):
                    default = list(default)
                same = said == default or str(said) == str(default)
                if isinstance(default, float) and isinstance(said, int | float):
                    same = float(said) == default
                if not same:
                    wrong.append(f"{page.name}: {name} documented {value}, is {default!r}")
    assert not wrong, wrong


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
