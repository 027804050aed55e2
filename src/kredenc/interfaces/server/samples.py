"""The sample data ``kredenc serve`` files on the first start of an empty store.

So that the page has something to search and ask the moment it opens: the demo's
memories (``kredenc.data/sample_memories.jsonl``), a folder of Markdown notes
(``kredenc.data/sample_notes/``) and, when the caller has it, a PDF (``make run``
passes the Attention paper from ``../shared/data``; it never lives in the repository).

Filing is idempotent: ``<store>/samples.json`` records each part once it is filed, so
a restart files nothing twice, and a start interrupted half-way finishes the rest
next time. A store that already holds data and has no such file is left alone.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from kredenc.engine import Kredenc
from kredenc.errors import KredencError
from kredenc.interfaces.demo import sample_memories

log = logging.getLogger("kredenc.server")

MARKER = "samples.json"
#: Where the sample memories go (the page's memory list shows them with the rest).
DRAWER = "memories"
SAMPLE_TAG = "sample"

Say = Callable[[str], None]


def _read_marker(home: Path) -> dict[str, Any] | None:
    try:
        found = json.loads((home / MARKER).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _write_marker(home: Path, done: dict[str, Any]) -> None:
    tmp = home / f".{MARKER}.tmp"
    tmp.write_text(json.dumps(done, indent=1) + "\n", "utf-8")
    os.replace(tmp, home / MARKER)


def parts_to_file(kb: Kredenc, pdf: Path | None) -> list[str]:
    """What is still to file: ``memories``, ``notes``, ``pdf`` (empty when done, or
    when the store holds other data and no samples were ever filed)."""
    done = _read_marker(kb.home)
    if done is None and kb.stats()["log_records"]:  # the whole store, every namespace
        return []
    done = done or {}
    wanted = ["memories", "notes"] + (["pdf"] if pdf is not None else [])
    return [p for p in wanted if not done.get(p)]


def file_samples(
    kb: Kredenc,
    pdf: Path | None,
    say: Say,
    stop: threading.Event | None = None,
) -> list[str]:
    """File what :func:`parts_to_file` names, saying what happens; the parts filed.
    ``stop`` set between parts ends it early (the rest is filed on the next start)."""
    parts = parts_to_file(kb, pdf)
    if not parts:
        return []
    done = _read_marker(kb.home) or {}
    t0 = time.perf_counter()
    say(f"filing sample data… ({', '.join(_label(p, pdf) for p in parts)})")
    filed: list[str] = []
    for part in parts:
        if stop is not None and stop.is_set():
            break
        if part == "memories":
            items = sample_memories()
            for item in items:
                tags = [*item.get("tags", []), SAMPLE_TAG]
                kb.remember(item["text"], kind=item["kind"], tags=tags, drawer=DRAWER)
            done["memories"] = len(items)
        elif part == "notes":
            with resources.as_file(resources.files("kredenc.data") / "sample_notes") as notes:
                report = kb.ingest([notes])
            done["notes"] = report.documents + report.unchanged
        else:
            assert pdf is not None
            report = kb.ingest([pdf])
            if report.failed:
                say(f"sample PDF not filed: {report.failed[0][1]}")
                continue
            done["pdf"] = str(pdf)
        filed.append(part)
        _write_marker(kb.home, done)
    if filed:
        say(f"sample data filed in {time.perf_counter() - t0:.1f} s")
    return filed


def _label(part: str, pdf: Path | None) -> str:
    if part == "memories":
        return f"{len(sample_memories())} memories"
    if part == "notes":
        return "a folder of Markdown notes"
    return pdf.name if pdf is not None else "a PDF"


class SampleFiler:
    """:func:`file_samples` on a thread beside the server: the URL is printed and
    requests are answered while the samples go in."""

    def __init__(self, kb: Kredenc, pdf: Path | None, say: Say) -> None:
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(kb, pdf, say), name="kredenc-samples", daemon=True
        )

    def _run(self, kb: Kredenc, pdf: Path | None, say: Say) -> None:
        try:
            file_samples(kb, pdf, say, self.stop)
        except (KredencError, OSError) as exc:  # the server goes on without the samples
            self.error = exc
            say(f"sample data not filed: {exc}")
        except Exception as exc:  # a bug: logged with its traceback, the server goes on
            self.error = exc
            log.exception("sample data not filed")

    def start(self) -> SampleFiler:
        self._thread.start()
        return self

    def finish(self, say: Say, timeout_s: float = 120.0) -> None:
        """Stop after the part in progress and wait for it (the store closes next)."""
        self.stop.set()
        if self._thread.is_alive():
            say("waiting for the sample filing to finish its current part…")
            self._thread.join(timeout_s)
