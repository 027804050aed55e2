"""A package installed for a test only: a ``*.dist-info`` folder with entry points and
its modules, written into a folder that goes on ``sys.path``. No pip, no network.

With pytest::

    site = write_distribution(
        tmp_path,
        "kredenc-tiny",
        {"kredenc.embedders": {"tiny": "kredenc_tiny:TinyEmbedder"}},
        {"kredenc_tiny": SOURCE},
    )
    monkeypatch.syspath_prepend(site)
    kredenc.plugins.refresh()
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def write_distribution(
    site: Path,
    name: str,
    entry_points: Mapping[str, Mapping[str, str]],
    modules: Mapping[str, str] | None = None,
    version: str = "1.0",
) -> Path:
    """Write distribution ``name`` into ``site``: its metadata, its ``entry_points``
    (group to name to ``module:attr``) and its ``modules`` (module name to source).
    Returns ``site``, the folder to put on ``sys.path``."""
    site.mkdir(parents=True, exist_ok=True)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    lines: list[str] = []
    for group, points in entry_points.items():
        lines.append(f"[{group}]")
        lines.extend(f"{ep} = {value}" for ep, value in points.items())
        lines.append("")
    (info / "entry_points.txt").write_text("\n".join(lines), encoding="utf-8")
    for module, source in (modules or {}).items():
        (site / f"{module}.py").write_text(source, encoding="utf-8")
    return site


__all__ = ["write_distribution"]
