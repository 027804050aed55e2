"""Store files are private: created 0600, folders 0700, whatever the umask allows.

The store runs in a child process with umask 022 (the common default, which would
leave new files world-readable); every path under the store is then stat'ed.
"""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import os, sys
os.umask(0o022)
from kredenc.engine import Kredenc
from kredenc.testing.embedders import HashEmbedder
home = sys.argv[1]
with Kredenc.open(home, embedder=HashEmbedder(), durability="none", ann_threshold=5) as kb:
    ids = [kb.remember(f"private note {i} about the garden").id for i in range(12)]
    kb.search("garden", k=3)
    kb.store.opcache_tier().put("search", "k", "[]")  # the answer loop's cache file
    kb.forget(ids[0])
with Kredenc.open(home, embedder=HashEmbedder(), durability="none", ann_threshold=5) as kb:
    kb.rebuild()
    kb.search("garden", k=3)
    kb.compact(purge=True)
    kb.search("garden", k=3)
    kb.store.opcache_tier().put("llm", "k", "{}")
with Kredenc.open(home, embedder=HashEmbedder(), read_only=True, ann_threshold=5) as kb:
    kb.search("garden", k=3)
"""


def test_every_store_path_is_private_under_umask_022(tmp_path: Path) -> None:
    home = tmp_path / "store"
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(home)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    paths = [home, *sorted(home.rglob("*"))]
    names = {p.relative_to(home).as_posix() for p in paths[1:]}
    # The files this test means to cover are there (so the check below means something).
    for expected in (
        "store.json", "haystack.log", "lock", "index.db", "embeddings.db", "ann", "opcache.db"
    ):  # fmt: skip
        assert expected in names, sorted(names)
    assert any(n.startswith("ann/") and n.endswith(".usearch") for n in names), sorted(names)
    loose = []
    for path in paths:
        mode = path.lstat().st_mode
        if stat.S_IMODE(mode) & 0o077:
            loose.append(f"{path.relative_to(home.parent)} {stat.S_IMODE(mode):o}")
        if stat.S_ISDIR(mode):
            assert stat.S_IMODE(mode) == 0o700, path
    assert loose == []
