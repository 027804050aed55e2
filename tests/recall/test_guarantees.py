"""The reflex's guarantees: read-only, never breaks a turn, a time budget, dry run,
and a startup line."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kredenc.config import Settings
from kredenc.engine import Kredenc
from kredenc.errors import ProviderError
from kredenc.providers.embed.base import Vectors
from kredenc.recall import announce, recall
from kredenc.testing.embedders import HashEmbedder

OpenStore = Callable[..., Kredenc]
RECALL_LOG = "kredenc.recall"


class FaultyEmbedder(HashEmbedder):
    """HashEmbedder (same model id, so it opens the same stores) that can be told to
    fail or to be slow."""

    def __init__(self) -> None:
        super().__init__()
        self.error: Exception | None = None
        self.delay = 0.0
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self.error is not None:
            raise self.error
        if self.delay:
            self.release.wait(self.delay)
        return super().embed(texts)


@pytest.fixture
def faulty(open_store: OpenStore) -> Iterator[tuple[Kredenc, FaultyEmbedder]]:
    embedder = FaultyEmbedder()
    kb = open_store(embedder=embedder)
    kb.remember("The user likes jasmine tea in the morning.", kind="preference")
    try:
        yield kb, embedder
    finally:
        embedder.release.set()  # let a slow embedding finish before the store closes
        time.sleep(0.05)
        with contextlib.suppress(sqlite3.Error):
            kb.close()


def ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == RECALL_LOG and r.levelno == logging.WARNING
    ]


# -- read-only ---------------------------------------------------------------------------


def test_recall_never_writes_access_counts_go_to_the_housekeepers_batch(
    open_store: OpenStore, store_dir: Path, session: str
) -> None:
    with open_store(access_batch=1000) as kb:
        tea = kb.remember("The user likes jasmine tea in the morning.", kind="preference")
        log_file = store_dir / "haystack.log"
        size, seq = log_file.stat().st_size, kb.haystack.last_seq
        for _ in range(3):
            assert recall(kb.store, kb.namespace, ask("jasmine tea?"), session_id=session).injected
        assert log_file.stat().st_size == size  # recall wrote nothing
        assert kb.haystack.last_seq == seq
        kb.flush_access()  # the batch is the housekeeper's to write
        deadline = time.monotonic() + 10
        while kb.haystack.last_seq == seq and time.monotonic() < deadline:
            time.sleep(0.01)
        records = list(kb.haystack.iter_from())
    assert len(records) == seq + 1
    assert records[-1].payload["op"] == "access"
    assert records[-1].payload["counts"] == {tea.id: 3}


def test_recall_works_on_a_read_only_store(open_store: OpenStore, session: str) -> None:
    with open_store() as kb:
        kb.remember("The user likes jasmine tea in the morning.", kind="preference")
    with open_store(read_only=True) as ro:
        result = recall(ro.store, ro.namespace, ask("jasmine tea?"), session_id=session)
    assert result.injected and result.error is None


# -- never breaks a turn ---------------------------------------------------------------


def assert_unchanged(
    result: Any, messages: list[dict[str, Any]], caplog: pytest.LogCaptureFixture, cause: str
) -> None:
    assert result.messages == messages
    assert not result.injected
    assert result.error is not None and cause in result.error
    assert any(cause in w for w in warnings_of(caplog)), warnings_of(caplog)


def test_closed_store(
    open_store: OpenStore, session: str, caplog: pytest.LogCaptureFixture
) -> None:
    kb = open_store()
    kb.remember("The user likes jasmine tea in the morning.", kind="preference")
    kb.close()
    messages = ask("jasmine tea?")
    result = recall(kb.store, kb.namespace, messages, session_id=session)
    assert_unchanged(result, messages, caplog, "closed")


def test_corrupt_index(
    faulty: tuple[Kredenc, FaultyEmbedder],
    store_dir: Path,
    session: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    kb, _ = faulty
    assert recall(kb.store, kb.namespace, ask("jasmine tea?"), session_id=session).injected
    for path in store_dir.glob("index.db*"):
        with open(path, "r+b") as f:
            f.write(os.urandom(min(8192, path.stat().st_size)))
    messages = ask("jasmine tea again?")
    result = recall(kb.store, kb.namespace, messages, session_id=session)
    assert_unchanged(result, messages, caplog, "DatabaseError")


def test_embedder_that_raises(
    faulty: tuple[Kredenc, FaultyEmbedder], session: str, caplog: pytest.LogCaptureFixture
) -> None:
    kb, embedder = faulty
    embedder.error = RuntimeError("the model file is gone")
    messages = ask("jasmine tea?")
    result = recall(kb.store, kb.namespace, messages, session_id=session)
    assert_unchanged(result, messages, caplog, "RuntimeError: the model file is gone")


def test_provider_error_falls_back_to_words(
    faulty: tuple[Kredenc, FaultyEmbedder], session: str, caplog: pytest.LogCaptureFixture
) -> None:
    kb, embedder = faulty
    embedder.error = ProviderError("model not installed", "pip install it")
    result = recall(kb.store, kb.namespace, ask("jasmine tea?"), session_id=session)
    assert result.injected
    assert set(result.items[0].legs) == {"lexical"}
    assert any("dense leg failed (model not installed" in w for w in warnings_of(caplog))
    # With nothing to find by words, the messages stay as they were.
    messages = ask("favourite hot beverage")
    nothing = recall(kb.store, kb.namespace, messages, session_id=session)
    assert nothing.messages == messages and not nothing.injected


def test_bad_input_is_a_warning_not_an_exception(
    kb: Kredenc, caplog: pytest.LogCaptureFixture
) -> None:
    assert recall(kb.store, kb.namespace, None, session_id="s").messages is None  # type: ignore[arg-type]
    messages = ask("tea")
    for bad in ("", None, 7):
        result = recall(kb.store, kb.namespace, messages, session_id=bad)  # type: ignore[arg-type]
        assert result.messages == messages and result.error
    result = recall(kb.store, kb.namespace, messages, session_id="s", budget={"items": -1})
    assert result.messages == messages and "budget items" in (result.error or "")
    assert len(warnings_of(caplog)) == 5


# -- the time budget ---------------------------------------------------------------------


def test_slow_embedder_returns_what_is_ready_within_the_budget(
    faulty: tuple[Kredenc, FaultyEmbedder], session: str, caplog: pytest.LogCaptureFixture
) -> None:
    kb, embedder = faulty
    recall(kb.store, kb.namespace, ask("warm the reader up"), session_id=session)
    embedder.delay = 5.0
    started = time.perf_counter()
    result = recall(
        kb.store, kb.namespace, ask("jasmine tea, please"), session_id=session, time_budget_ms=50
    )
    elapsed = time.perf_counter() - started
    assert elapsed < 1.0  # 50 ms plus scheduling slack on a busy machine; never 5 s
    assert result.injected
    assert set(result.items[0].legs) == {"lexical"}  # what was ready
    assert "dense" not in result.timings_ms
    assert any("not ready within the 50 ms time budget" in w for w in warnings_of(caplog))


def test_slow_embedder_and_no_words_leaves_the_messages_alone(
    faulty: tuple[Kredenc, FaultyEmbedder], session: str, caplog: pytest.LogCaptureFixture
) -> None:
    kb, embedder = faulty
    embedder.delay = 5.0
    messages = ask("favourite hot beverage")
    started = time.perf_counter()
    result = recall(kb.store, kb.namespace, messages, session_id=session, time_budget_ms=30)
    assert time.perf_counter() - started < 1.0
    assert result.messages == messages and not result.injected
    assert any("not ready within the 30 ms" in w for w in warnings_of(caplog))


def test_overrunning_embeddings_are_bounded(
    faulty: tuple[Kredenc, FaultyEmbedder], session: str, caplog: pytest.LogCaptureFixture
) -> None:
    kb, embedder = faulty
    embedder.delay = 5.0
    for i in range(5):
        recall(
            kb.store,
            kb.namespace,
            ask(f"jasmine tea number {i}"),
            session_id=session,
            time_budget_ms=150,  # a worker starts each (a queued one would be cancelled)
        )
    assert any("overran their deadlines and are still running" in w for w in warnings_of(caplog))


def test_an_abandoned_dense_leg_never_reads_the_store(
    faulty: tuple[Kredenc, FaultyEmbedder], session: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb, embedder = faulty
    searches: list[int] = []
    dense = kb.index.dense

    def counting(*args: Any, **kwargs: Any) -> Any:
        searches.append(1)
        return dense(*args, **kwargs)

    monkeypatch.setattr(kb.index, "dense", counting)
    embedder.delay = 5.0
    result = recall(
        kb.store, kb.namespace, ask("jasmine tea, abandoned"), session_id=session, time_budget_ms=20
    )
    assert result.timed_out
    embedder.release.set()  # the embedding finishes on its worker after the call ...
    time.sleep(0.3)
    assert searches == []  # ... and stops there: the store may be closed by now


# -- dry run -----------------------------------------------------------------------------


def test_dry_run_searches_times_logs_and_changes_nothing(
    open_store: OpenStore, store_dir: Path, session: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=RECALL_LOG)
    with open_store() as kb:
        tea = kb.remember("The user likes jasmine tea in the morning.", kind="preference")
        size = (store_dir / "haystack.log").stat().st_size
        messages = ask("jasmine tea?")
        result = recall(kb.store, kb.namespace, messages, session_id=session, dry_run=True)
        assert result.dry_run and not result.injected
        assert result.messages == messages
        assert [i.id for i in result.items] == [tea.id]
        assert "jasmine tea" in result.block
        assert result.elapsed_ms > 0 and "lexical" in result.timings_ms
        kb.flush_access()
        time.sleep(0.05)
        assert (store_dir / "haystack.log").stat().st_size == size  # not even access counts
    lines = [r.getMessage() for r in caplog.records if "dry run" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].startswith("recall dry run: would inject 1 memories (")
    assert tea.id in lines[0]


@pytest.mark.skipif(
    "recall_dry_run" not in Settings.model_fields, reason="recall settings not declared yet"
)
def test_dry_run_from_the_settings(open_store: OpenStore, session: str) -> None:
    with open_store(recall_dry_run=True) as kb:
        kb.remember("The user likes jasmine tea in the morning.", kind="preference")
        result = recall(kb.store, kb.namespace, ask("jasmine tea?"), session_id=session)
    assert result.dry_run and not result.injected and result.items


# -- the startup line --------------------------------------------------------------------


def test_startup_line_once_per_store(
    kb: Kredenc, session: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=RECALL_LOG)
    kb.remember("The user likes jasmine tea in the morning.", kind="preference")
    recall(kb.store, kb.namespace, ask("jasmine tea?"), session_id=session)
    recall(kb.store, kb.namespace, ask("jasmine tea?"), session_id=session)
    online = [r for r in caplog.records if "recall reflex online" in r.getMessage()]
    assert len(online) == 1
    assert online[0].levelno == logging.INFO
    assert online[0].getMessage() == (
        f"recall reflex online: store={kb.home} (namespace default, 1 memories and turns), "
        "budget=8 items × 600/1800 chars, time_budget=50 ms, mode=hybrid, "
        "model=test-hash-384, dry_run=false"
    )


def test_startup_line_names_an_unreadable_store(
    faulty: tuple[Kredenc, FaultyEmbedder], store_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kb, _ = faulty
    for path in store_dir.glob("index.db*"):
        with open(path, "r+b") as f:
            f.write(os.urandom(min(8192, path.stat().st_size)))
    line = announce(kb.store, kb.namespace, dry_run=True, time_budget_ms=20)
    assert "(unreadable: " in line
    assert "dry_run=true" in line and "time_budget=20 ms" in line
    assert any(
        r.levelno == logging.WARNING and "reflex online" in r.getMessage() for r in caplog.records
    )


def test_a_slow_lexical_leg_is_stopped_at_the_budget(
    kb: Kredenc, session: str, caplog: pytest.LogCaptureFixture
) -> None:
    kb.remember_many([{"text": f"Orchard note number {i} about apples"} for i in range(3000)])
    messages = ask("orchard apples note")
    result = recall(
        kb.store, kb.namespace, messages, session_id=session, time_budget_ms=0.01, mode="lexical"
    )
    assert result.messages == messages and result.timed_out and result.error is None
    assert any("lexical leg stopped at the 0.01 ms time budget" in w for w in warnings_of(caplog))
    # The reader connection is left as it was: the next recall is not interrupted.
    assert recall(kb.store, kb.namespace, messages, session_id=session, mode="lexical").injected
