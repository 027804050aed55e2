"""The ingest queue on its own (a real store, no HTTP): closing stops the running job at
a page boundary and cancels the waiting ones; finished jobs are bounded per tenant; one
tenant cannot fill the queue."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.ingest.loaders import base as loaders_base
from kredenc.ingest.loaders import pdf as pdf_loader
from kredenc.interfaces.server.jobs import IngestJobs, Refused
from kredenc.testing.pdfs import text_pdf


@pytest.fixture
def paused(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """PDF reading stops after page 1 until the returned event is set (the job is then
    surely running when the test acts)."""
    go = threading.Event()
    report = loaders_base.report_page  # what the PDF loader calls after each page

    def report_then_wait(source: str, page: int, pages: int) -> None:
        report(source, page, pages)
        if page == 1:
            go.wait(30)

    monkeypatch.setattr(pdf_loader, "report_page", report_then_wait)
    return go


@pytest.fixture
def kb(open_store: Callable[..., Kredenc]) -> Iterator[Kredenc]:
    with open_store() as store:
        yield store


def _wait(jobs: IngestJobs, ns: str, job_id: str, test: Callable[[dict[str, Any]], bool]) -> None:
    deadline = time.monotonic() + 30
    while not test(jobs.get(ns, job_id)):
        assert time.monotonic() < deadline, jobs.get(ns, job_id)
        time.sleep(0.01)


def _long_pdf(tmp_path: Path, pages: int = 400) -> Path:
    path = tmp_path / "long.pdf"
    path.write_bytes(text_pdf([f"Page {n} of a long report on tea." for n in range(pages)]))
    return path


def test_closing_stops_the_running_job_and_cancels_the_waiting(
    kb: Kredenc, tmp_path: Path, paused: threading.Event
) -> None:
    jobs = IngestJobs()
    long = _long_pdf(tmp_path)
    upload = tmp_path / "saved.md"
    upload.write_text("# Waiting\n\nNever read.\n")
    running = jobs.submit(kb, sources=["long.pdf"], inputs=[str(long)])
    waiting = jobs.submit(kb, sources=["w.md"], inputs=[str(upload)], cleanup=[upload])
    _wait(jobs, kb.namespace, running["id"], lambda j: bool(j["progress"]))
    started = time.monotonic()
    threading.Timer(0.2, paused.set).start()  # page 2 comes once closing has begun
    jobs.close()
    assert time.monotonic() - started < 10
    stopped = jobs.get(kb.namespace, running["id"])
    cancelled = jobs.get(kb.namespace, waiting["id"])
    for job in (stopped, cancelled):
        assert job["state"] == "failed"
        assert job["error"]["code"] == "cancelled"
        assert job["finished_at"] is not None
    assert stopped["progress"][str(long.resolve())]["page"] == 1
    assert not upload.exists()  # a cancelled upload is removed too
    assert kb.list_documents() == []  # the long PDF was never half-filed
    events, finished = jobs.events(kb.namespace, running["id"], 0)
    assert finished and events[-1].name == "failed"
    with pytest.raises(Exception, match="the server is stopping"):
        jobs.submit(kb, sources=["x"], inputs=[str(upload)])


def test_a_tenant_may_have_only_so_many_jobs_waiting(
    kb: Kredenc, tmp_path: Path, paused: threading.Event
) -> None:
    jobs = IngestJobs(max_waiting=2)
    long = _long_pdf(tmp_path)
    try:
        jobs.submit(kb, sources=["a"], inputs=[str(long)])
        jobs.submit(kb, sources=["b"], inputs=[str(long)])
        with pytest.raises(Refused) as refused:
            jobs.submit(kb, sources=["c"], inputs=[str(long)])
        assert refused.value.status == 429
        assert refused.value.code == "too_many_jobs"
        other = kb.scoped("other")  # another tenant still gets in
        assert jobs.submit(other, sources=["d"], inputs=[str(long)])["state"] == "queued"
    finally:
        paused.set()
        jobs.close()


def test_only_the_last_finished_jobs_are_kept(kb: Kredenc, tmp_path: Path) -> None:
    jobs = IngestJobs(max_finished=2)
    note = tmp_path / "n.md"
    note.write_text("# Note\n\nTea.\n")
    try:
        ids = [jobs.submit(kb, sources=["n"], inputs=[str(note)])["id"] for _ in range(4)]
        _wait(jobs, kb.namespace, ids[-1], lambda j: j["state"] == "done")
        assert [j["id"] for j in jobs.listing(kb.namespace)] == [ids[3], ids[2]]
        assert jobs.listing("someone-else") == []
    finally:
        jobs.close()


def test_uploads_left_by_a_crash_are_removed_when_the_queue_starts(tmp_path: Path) -> None:
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    (uploads / "0a1b.pdf").write_bytes(b"left behind")
    IngestJobs(uploads).close()
    assert list(uploads.iterdir()) == []
    IngestJobs(tmp_path / "none").close()  # no folder yet: nothing to do
