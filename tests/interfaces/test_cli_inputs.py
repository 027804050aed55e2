"""Hostile and careless input at the command line (issue 13, findings 3, 8 and 9).

In-process through ``main()`` with the test embedder (no model loads), as in
test_cli_memory.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kredenc.interfaces.cli import main
from kredenc.testing.embedders import HashEmbedder

CANARY = "canary-7d3c"


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    monkeypatch.setattr("kredenc.engine.make_default_embedder", lambda _s: HashEmbedder())
    for key in ("KREDENC_HOME", "KREDENC_NAMESPACE", "KREDENC_EMBED_PROVIDER"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("KREDENC_DURABILITY", "none")
    home = tmp_path / "store"

    def _run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = 0
        try:
            main(["--store", str(home), *args])
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return _run


def _fold(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text(f"root:x:0:0 {CANARY}\n", encoding="utf-8")
    (outside / "shadow").write_text(f"root:{CANARY}:19000\n", encoding="utf-8")
    fold = tmp_path / "fold"
    (fold / "sub").mkdir(parents=True)
    (fold / "notes.md").write_text("# Notes\n\nThe kestrel nests.\n", encoding="utf-8")
    (fold / "passwd.txt").symlink_to(outside / "passwd")
    (fold / "sub" / "shadow.md").symlink_to(outside / "shadow")
    return fold


def test_ingest_reports_symlinks_out_of_the_folder(run: Any, tmp_path: Path) -> None:
    fold = _fold(tmp_path)
    code, out, _ = run("ingest", str(fold))
    assert code == 0
    assert "1 documents filed" in out and "2 skipped" in out
    assert f"  skipped: {fold / 'passwd.txt'}: symlink leaves the folder" in out
    assert f"  skipped: {fold / 'sub' / 'shadow.md'}: symlink leaves the folder" in out
    code, out, _ = run("search", CANARY, "--mode", "lexical", "--json")
    assert json.loads(out)["hits"] == []
    code, out, _ = run("ingest", str(fold), "--follow-symlinks", "--json")
    data = json.loads(out)
    assert (code, data["documents"], data["skipped"]) == (0, 2, [])  # passwd.txt, sub/shadow.md
    code, out, _ = run("search", CANARY, "--mode", "lexical", "--json")
    assert len(json.loads(out)["hits"]) == 2


def test_ingest_json_lists_skipped_files(run: Any, tmp_path: Path) -> None:
    fold = _fold(tmp_path)
    code, out, err = run("ingest", str(fold), "--json")
    assert code == 0, err
    skipped = json.loads(out)["skipped"]
    assert skipped == [
        {"source": str(fold / "passwd.txt"), "reason": "symlink leaves the folder"},
        {"source": str(fold / "sub" / "shadow.md"), "reason": "symlink leaves the folder"},
    ]
