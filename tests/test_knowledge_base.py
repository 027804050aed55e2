"""The knowledge base through the facade: versioned ingestion, edges, filters, graph."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.embed.base import Vectors
from kredenc.testing.embedders import HashEmbedder

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "ingest"


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[Kredenc]:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as store:
        yield store


class RecordingEmbedder(HashEmbedder):
    """Keeps every text it embeds; fails (as a provider does) on any text with "poison"."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        if any("poison" in t for t in texts):
            raise ProviderError("the embedding service refused a text")
        self.texts += texts
        return super().embed(texts)


def _sections(*bodies: str) -> str:
    """A Markdown page of one heading per body, each long enough to be its own chunk."""
    pad = " The survey logged weather, visitors and repairs on every round." * 10
    return "".join(f"## Part {i}\n\n{body}{pad}\n\n" for i, body in enumerate(bodies, 1))


def _edges(kb: Kredenc, rel: str) -> list[tuple[str, str]]:
    rows = kb.index.reader().execute("SELECT src, dst FROM edges WHERE rel=?", (rel,))
    return [(str(a), str(b)) for a, b in rows]


def test_reingest_unchanged_does_nothing_changed_replaces(kb: Kredenc, tmp_path: Path) -> None:
    doc = tmp_path / "notes.md"
    doc.write_text("# Notes\n\nThe kestrel nests on the old water tower.\n")
    first = kb.ingest(doc)
    assert (first.documents, first.unchanged, first.replaced) == (1, 0, 0)
    log_end = kb.haystack.end
    again = kb.ingest(doc)
    assert (again.documents, again.unchanged) == (0, 1)
    assert kb.haystack.end == log_end  # nothing written
    old_hits = kb.search("kestrel tower", mode="lexical")
    assert old_hits and all(h.type == "chunk" for h in old_hits)
    doc.write_text("# Notes\n\nThe heron fishes below the new bridge.\n")
    changed = kb.ingest(doc)
    assert (changed.documents, changed.replaced) == (1, 1)
    assert kb.search("kestrel tower", mode="lexical") == []  # old chunks tombstoned
    new = kb.search("heron bridge", mode="lexical")
    assert new and new[0].origin == str(doc.resolve()) and new[0].title == "Notes"
    assert kb.index.document(kb.namespace, str(doc.resolve()))[2] == 2  # version 2


def test_a_changed_document_re_embeds_only_its_changed_chunks(tmp_path: Path) -> None:
    embedder = RecordingEmbedder()
    doc = tmp_path / "survey.md"
    doc.write_text(_sections("Kestrels nest on the tower.", "Herons fish.", "Owls roost."))
    with Kredenc.open(tmp_path / "s", embedder=embedder, durability="none") as kb:
        first = kb.ingest(doc)
        assert first.chunks == 3 and len(embedder.texts) == 3
        embedder.texts.clear()
        doc.write_text(_sections("Kestrels nest on the tower.", "Herons left.", "Owls roost."))
        again = kb.ingest(doc)
        assert (again.documents, again.replaced, again.chunks) == (1, 1, 3)
        assert len(embedder.texts) == 1 and "Herons left." in embedder.texts[0]
        assert kb.search("herons left", mode="lexical")[0].text.count("Herons left.") == 1
        assert kb.search("fish", mode="lexical") == []  # the old chunk is gone


def test_a_document_that_fails_midway_leaves_nothing_behind(tmp_path: Path) -> None:
    """One batch per document: a failure while filing one (here its embedding) leaves no
    record of it, the other documents are filed, and the next run files it whole."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text(_sections("Kestrels nest on the tower."))
    bad = docs / "bad.md"
    bad.write_text(_sections("Herons fish below the bridge.", "A poison pill for the embedder."))
    with Kredenc.open(tmp_path / "s", embedder=RecordingEmbedder(), durability="none") as kb:
        seq_before = kb.haystack.last_seq
        report = kb.ingest(docs)
        assert report.documents == 1 and [s for s, _ in report.failed] == [str(bad)]
        assert "embedding service refused" in report.failed[0][1]
        assert kb.index.document(kb.namespace, str(bad.resolve())) is None
        assert kb.search("herons bridge", mode="lexical") == []  # not even its first chunk
        puts = [r.payload for r in kb.haystack.iter_from() if r.payload["seq"] > seq_before]
        assert {p.get("origin") for p in puts if p.get("origin")} == {
            str((docs / "good.md").resolve())
        }
        bad.write_text(_sections("Herons fish below the bridge.", "A fixed second part."))
        fixed = kb.ingest(docs)
        assert (fixed.documents, fixed.unchanged, fixed.chunks) == (1, 1, 2)
        assert kb.search("herons bridge", mode="lexical")


def test_structure_edges_and_links(kb: Kredenc, tmp_path: Path) -> None:
    folder = tmp_path / "md"
    shutil.copytree(FIXTURES / "markdown", folder)
    report = kb.ingest(folder)
    assert report.documents == 2 and not report.failed
    assert report.links >= 1  # changelog.md <-> release-guide.md
    part_of = _edges(kb, "part_of")
    assert len(part_of) == report.chunks
    assert len(_edges(kb, "links_to")) == report.links
    docs = {d for _, d in part_of}
    assert {s for s, _ in _edges(kb, "links_to")} <= docs


def test_one_bad_file_never_stops_the_rest(kb: Kredenc, tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_text("Pogácsa likes the sunny windowsill.")
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.4 this is not really a pdf")
    report = kb.ingest([bad, good])
    assert report.documents == 1
    assert len(report.failed) == 1 and "bad.pdf" in report.failed[0][1]
    assert kb.search("windowsill", mode="lexical")


def test_filters_apply_inside_every_leg(kb: Kredenc, tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\nalpha budget review for the river project\n")
    (tmp_path / "b.txt").write_text("beta budget review for the river project\n")
    kb.ingest([tmp_path / "a.md", tmp_path / "b.txt"])
    kb.remember("gamma budget review memory")
    for mode in ("lexical", "dense", "hybrid"):
        md = kb.search("budget review", mode=mode, loaders=["markdown"])
        assert md and {h.origin for h in md} == {str((tmp_path / "a.md").resolve())}
        txt = kb.search("budget review", mode=mode, source="*/b.txt")
        assert txt and all(h.origin.endswith("b.txt") for h in txt)
        assert kb.search("budget review", mode=mode, types=["memory"])[0].type == "memory"
        assert kb.search("budget review", mode=mode, pages=(2, 9)) == []  # no paged chunks


def test_since_and_until_keep_what_was_filed_then(kb: Kredenc, tmp_path: Path) -> None:
    old = kb.remember("budget review of the river project")
    cut = time.time()
    time.sleep(0.01)
    (tmp_path / "b.txt").write_text("beta budget review for the river project\n")
    kb.ingest(tmp_path / "b.txt")
    for mode in ("lexical", "dense", "hybrid"):
        before = kb.search("budget review", mode=mode, until=cut)
        assert [h.id for h in before] == [old.id]
        after = kb.search("budget review", mode=mode, since=cut)
        assert after and all(h.type == "chunk" for h in after)
        iso = datetime.fromtimestamp(cut, UTC).isoformat()
        assert [h.id for h in kb.search("budget review", mode=mode, since=iso)] == [
            h.id for h in after
        ]
    with pytest.raises(InvalidInput, match="since must be earlier than until"):
        kb.search("budget", since=cut, until=cut)
    with pytest.raises(InvalidInput, match="is not a page range"):
        kb.search("budget", pages=(5, 2))


def test_graph_expansion_adds_neighbours(kb: Kredenc) -> None:
    a = kb.remember("The kestrel project uses SQLite for storage")
    b = kb.remember("Invoices are rounded to whole cents")
    kb.relate(a.id, b.id, "depends_on")
    plain = kb.search("kestrel sqlite", k=5, mode="lexical")
    assert [h.id for h in plain] == [a.id]
    expanded = kb.search("kestrel sqlite", k=5, mode="lexical", hops=1)
    assert [h.id for h in expanded] == [a.id, b.id]
    assert expanded[1].graph == f"depends_on of {a.id}"
    assert expanded[1].score < expanded[0].score


def test_as_of_answers_what_was_held_true_then(kb: Kredenc) -> None:
    t0 = time.time()
    old = kb.remember("The office is in Szeged", valid_to=t0 + 100)
    new = kb.remember("The office is in Budapest", valid_from=t0 + 100)
    then = {h.id for h in kb.search("office", mode="lexical", as_of=t0 + 50)}
    later = {h.id for h in kb.search("office", mode="lexical", as_of=t0 + 150)}
    assert old.id in then and new.id not in then
    assert new.id in later and old.id not in later
    before_filing = kb.search("office", mode="lexical", as_of=t0 - 3600)
    assert before_filing == []  # not yet recorded


def test_recall_counts_access_in_batched_records(kb: Kredenc) -> None:
    m = kb.remember("The backup runs at 02:00 every night")
    kb.context_graph("backup night", hops=0)
    kb.context_graph("backup night", hops=0)
    puts_before = kb.haystack.last_seq
    kb.flush_access()
    kb.remember("flush barrier")  # the housekeeper writes in order
    rows = dict(kb.index.reader().execute("SELECT id, count FROM access").fetchall())
    assert rows[m.id] == 2
    ops = [r.payload["op"] for r in kb.haystack.iter_from() if r.payload["seq"] > puts_before]
    assert ops.count("access") == 1  # two recalls, one access record


def test_per_document_keeps_each_documents_best_chunk(kb: Kredenc) -> None:
    kb.add_passages(
        [
            {"text": "kestrel river survey part one", "doc_id": "report"},
            {"text": "kestrel river survey part two", "doc_id": "report"},
            {"text": "kestrel nests near the river bend", "doc_id": "field-notes"},
            {"text": "kestrel river", "meta": {"alone": True}},
        ]
    )
    chunks = kb.search("kestrel river", k=10, mode="lexical")
    assert len(chunks) == 4
    docs = kb.search("kestrel river", k=10, mode="lexical", per_document=True)
    assert len(docs) == 3  # one chunk of "report", one of "field-notes", the loose one
    assert docs[0].id == chunks[0].id  # the best chunk stays first
    assert len(kb.search("kestrel river", k=10, per_document=True)) == 3
