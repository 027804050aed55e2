"""Shared fixtures for the command-line tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from kredenc.interfaces.cli import main
from kredenc.testing.embedders import HashEmbedder


class CliRun:
    """``kredenc --store HOME ARGS…`` in-process through ``main()``: (exit code, stdout,
    stderr). The store is opened with the test embedder (swapped in at the provider
    seam), so no model loads. :meth:`bare` runs the arguments without ``--store``."""

    def __init__(self, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.home = home
        self._capsys = capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        return self.bare("--store", str(self.home), *args)

    def bare(self, *args: str) -> tuple[int, str, str]:
        self._capsys.readouterr()
        code = 0
        try:
            main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = self._capsys.readouterr()
        return code, out, err


@pytest.fixture
def run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> CliRun:
    monkeypatch.setattr("kredenc.engine.make_default_embedder", lambda _s: HashEmbedder())
    for key in ("KREDENC_HOME", "KREDENC_NAMESPACE", "KREDENC_EMBED_PROVIDER"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("KREDENC_DURABILITY", "none")
    return CliRun(tmp_path / "store", capsys)
