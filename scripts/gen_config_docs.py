"""Regenerate the settings table of docs/configuration.md from kredenc.config.Settings
(the hand-written sections after it stay)."""

from __future__ import annotations

from pathlib import Path

from kredenc.config import Settings

HEADER = """# Configuration

One `Settings` object (`kredenc.config`) holds every setting. Sources, lowest to
highest precedence:

1. the defaults below;
2. `kredenc.toml` in the store directory (keys as below but `home`, e.g. `durability = "batch"`);
3. environment variables `KREDENC_<KEY>` (e.g. `KREDENC_LEG_K=100`);
4. explicit arguments (`Kredenc.open(path, leg_k=100)`, CLI options).

The store directory itself comes from `--store DIR` (or `Kredenc.open(path)`), else
`KREDENC_HOME`, else `./.kredenc`. `kredenc.toml` is read from inside it, so it cannot
move it: a `home` key there is refused with exit 2. No other module reads the
environment. Secrets (`*_api_key`) never print or serialise.

| key | default | meaning |
|---|---|---|
"""


def main() -> None:
    rows = []
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        if hasattr(default, "get_secret_value"):
            default = ""
        rows.append(f"| `{name}` | `{default}` | {field.description} |")
    out = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
    # The hand-written sections after the table ("## ...") are kept as they are.
    old = out.read_text() if out.exists() else ""
    cut = old.find("\n## ")
    tail = old[cut:] if cut >= 0 else ""
    out.write_text(HEADER + "\n".join(rows) + "\n" + tail)


if __name__ == "__main__":
    main()
