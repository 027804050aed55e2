"""The files of a hot-reloaded folder (agents, tools) with the stamp that says a file
changed: read with one ``os.scandir`` per ask, the cheapest listing there is (an ask
that everything else answers from the cache spends most of its time here otherwise)."""

from __future__ import annotations

import os
from pathlib import Path


def stamped_files(folder: Path, suffix: str) -> list[tuple[Path, tuple[int, int]]]:
    """The regular files directly in ``folder`` ending in ``suffix``, by name, each with
    ``(mtime_ns, size)``; a folder that cannot be read has none."""
    out: list[tuple[Path, tuple[int, int]]] = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if not entry.name.endswith(suffix):
                    continue
                try:
                    if not entry.is_file():
                        continue
                    st = entry.stat()
                except OSError:
                    continue
                out.append((Path(entry.path), (st.st_mtime_ns, st.st_size)))
    except OSError:
        return []
    out.sort(key=lambda item: item[0].name)
    return out
