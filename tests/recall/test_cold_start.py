"""Cold start (issue 16): opening a store warms the query model in the background, so
the first recall of a fresh process gets its dense leg; the warm-up never blocks the
open and never raises into the host."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from kredenc.engine import Kredenc
from kredenc.recall import recall
from kredenc.recall.reflex import WARM_UP_THREAD
from kredenc.testing.embedders import HashEmbedder

SRC = Path(__file__).resolve().parents[2] / "src"

# Phase "file" fills a store with the real model; phase "recall" is a fresh process that
# opens it, lets the warm-up finish (if any was started) and recalls at once.
SCRIPT = textwrap.dedent(
    """
    import json, sys, threading, time
    from kredenc import Kredenc
    phase, home = sys.argv[1], sys.argv[2]
    if phase == "file":
        with Kredenc.open(home, "cold", durability="none") as kb:
            kb.remember("Zorblat the user's cat sleeps on the radiator.", kind="fact")
        sys.exit(0)
    opened = time.perf_counter()
    kb = Kredenc.open(home, "cold", read_only=True)
    open_s = time.perf_counter() - opened
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(
        t.name == sys.argv[3] for t in threading.enumerate()
    ):
        time.sleep(0.05)
    result = kb.recall(
        [{"role": "user", "content": "Where does my pet like to nap?"}],
        session_id="cold-1", time_budget_ms=100, mode="hybrid", session_start=time.time(),
    )
    print(json.dumps({
        "open_s": open_s, "warnings": result.warnings, "timings": result.timings_ms,
        "items": [i.text for i in result.items], "error": result.error,
    }))
    kb.close()
    """
)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, *args],
        capture_output=True, text=True, timeout=240, env=env, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_the_first_recall_of_a_fresh_process_gets_its_dense_leg(tmp_path: Path) -> None:
    try:
        from kredenc.providers.embed.minilm import default_model_path

        if not default_model_path().is_file():
            pytest.skip("the MiniLM model is not installed here")
    except ImportError as exc:
        pytest.skip(f"MiniLM needs onnxruntime: {exc}")
    home = str(tmp_path / "store")
    filed = _run("file", home)
    assert filed.returncode == 0, filed.stderr
    done = _run("recall", home, WARM_UP_THREAD)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["error"] is None
    assert not [w for w in out["warnings"] if "dense leg" in w], out
    assert "dense" in out["timings"], out
    # Only meaning links the question to the memory (no shared content word).
    assert out["items"] == ["Zorblat the user's cat sleeps on the radiator."], out
    assert out["open_s"] < 5.0  # the model loads after open returns, not inside it


class _SlowThenBroken(HashEmbedder):
    """A model whose first load takes a while and then fails."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.calls = 0
        self.lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self.calls > 0  # a local model on disk until its first use

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self.lock:
            self.calls += 1
            first = self.calls == 1
        if first:
            time.sleep(self.delay)
            raise RuntimeError("model file is corrupt")
        return super().embed(texts)


def test_a_failing_warm_up_neither_blocks_the_open_nor_raises(
    open_store: Callable[..., Kredenc], caplog: pytest.LogCaptureFixture, session: str
) -> None:
    embedder = _SlowThenBroken(delay=0.5)
    opened = time.perf_counter()
    with (
        caplog.at_level(logging.WARNING, logger="kredenc.recall"),
        open_store(embedder=embedder) as kb,
    ):
        assert time.perf_counter() - opened < 0.45  # open did not wait for the warm-up
        warming = [t for t in threading.enumerate() if t.name == WARM_UP_THREAD]
        assert warming
        for t in warming:
            t.join(5)
        assert any("recall warm-up failed" in r.message for r in caplog.records)
        kb.remember("The user keeps bees on the roof.", kind="fact")
        result = recall(kb.store, kb.namespace, [{"role": "user", "content": "bees"}],
                        session_id=session)  # fmt: skip
        assert result.error is None and [i.text for i in result.items] == [
            "The user keeps bees on the roof."
        ]


def test_the_warm_up_can_be_turned_off(open_store: Callable[..., Kredenc]) -> None:
    embedder = _SlowThenBroken(delay=0.0)
    before = {t.ident for t in threading.enumerate() if t.name == WARM_UP_THREAD}
    with open_store(embedder=embedder, recall_warm_at_open=False):
        time.sleep(0.05)
        now = {t.ident for t in threading.enumerate() if t.name == WARM_UP_THREAD}
        assert now <= before
        assert embedder.calls == 0


def test_a_cli_command_does_not_warm_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-shot command would only wait at exit for a model it never uses."""
    from kredenc.interfaces.cli_common import Context

    embedder = _SlowThenBroken(delay=0.0)
    monkeypatch.setattr("kredenc.engine.make_default_embedder", lambda _s: embedder)
    with Context(str(tmp_path / "store"), "cli", as_json=False).open() as kb:
        assert kb.settings.recall_warm_at_open is False
        time.sleep(0.05)
        assert embedder.calls == 0


@pytest.mark.parametrize("spelling", [True, False])
def test_the_warm_up_reads_the_term_set_a_correction_needs(
    open_store: Callable[..., Kredenc], session: str, spelling: bool
) -> None:
    """A first correction reads the index's terms (0.05 s at 100,000 cards), which would
    spend a first recall's budget before its lexical leg ran: the warm-up reads them."""
    from kredenc.recall.reflex import warm_up

    with open_store(recall_spelling=spelling, recall_warm_at_open=False) as kb:
        kestrel = kb.remember("The kestrel project ships its release on Friday.").id
        kb.remember("The falcon project ships its release on Monday.")
        vocabulary = kb.index._vocabulary
        assert vocabulary._terms is None
        warm_up(kb.store)
        if not spelling:
            assert vocabulary._terms is None  # nothing reads it then
            return
        terms = vocabulary._terms
        assert terms is not None and terms["kestrel"] == 1 and terms["project"] == 2
        asked = [{"role": "user", "content": "When does the kestral project ship?"}]
        result = recall(kb.store, kb.namespace, asked, session_id=session)
        assert result.items[0].id == kestrel  # "kestral" searched as "kestrel"
        assert vocabulary._terms is terms  # not read again
