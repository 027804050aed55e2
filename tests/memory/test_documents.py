"""A document as a whole: read it with its chunks, delete it with its chunks
(``Kredenc.read_document``, ``Kredenc.delete_document``, and ``forget`` of a
document)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import NotFound

DOC = "# Teas\n\nSencha is steamed.\n\n## Black\n\nAssam is malty and strong.\n"


def _doc(kb: Kredenc, tmp_path: Path) -> str:
    path = tmp_path / "teas.md"
    path.write_text(DOC)
    report = kb.ingest(path, chunk_size=40, chunk_overlap=0)
    return report.doc_ids[str(path.resolve())]


def test_a_document_is_read_with_its_chunks_in_order(kb: Kredenc, tmp_path: Path) -> None:
    doc_id = _doc(kb, tmp_path)
    entry, chunks = kb.read_document(doc_id)
    assert (entry.id, entry.title, entry.chunks) == (doc_id, "Teas", len(chunks))
    assert len(chunks) >= 2
    assert "Sencha" in chunks[0].text and "Assam" in chunks[-1].text
    assert all(c.type == "chunk" for c in chunks)


def test_delete_document_forgets_the_document_and_every_chunk(kb: Kredenc, tmp_path: Path) -> None:
    doc_id = _doc(kb, tmp_path)
    _, chunks = kb.read_document(doc_id)
    derived = kb.remember("Assam suits breakfast.")
    kb.relate(derived.id, chunks[-1].id, "derived_from")
    keep = kb.remember("Sencha is Japanese.")
    assert any(h.id == chunks[-1].id for h in kb.search("Assam malty strong", k=10))
    assert kb.delete_document(doc_id) == len(chunks) + 1
    assert kb.list_documents() == []
    assert not any(h.id in {c.id for c in chunks} for h in kb.search("Assam malty", k=10))
    for rid in (doc_id, *(c.id for c in chunks)):
        with pytest.raises(NotFound):
            kb.get(rid)
    assert kb.get(derived.id).status == "disputed"
    assert kb.get(keep.id).status != "disputed"
    with pytest.raises(NotFound):
        kb.delete_document(doc_id)


def test_forget_on_a_document_forgets_its_chunks_too(kb: Kredenc, tmp_path: Path) -> None:
    """``forget DOC`` hides a record everywhere: for a document that is its text, held
    by its chunks, so nothing of it stays searchable, readable or recallable. Forgetting
    one chunk forgets that chunk only."""
    doc_id = _doc(kb, tmp_path)
    _, chunks = kb.read_document(doc_id)
    kb.forget(chunks[0].id)
    assert kb.read_document(doc_id)[1] == chunks[1:]
    kb.forget(doc_id)
    assert kb.list_documents() == []
    for rid in (doc_id, *(c.id for c in chunks)):
        with pytest.raises(NotFound):
            kb.get(rid)
    assert not kb.search("Assam malty strong", k=10)
    out = io.StringIO()
    kb.export(out)
    assert "Assam" not in out.getvalue() and "Sencha" not in out.getvalue()


def test_only_a_document_of_this_namespace_is_a_document(kb: Kredenc, tmp_path: Path) -> None:
    doc_id = _doc(kb, tmp_path)
    memory = kb.remember("Not a document.")
    for rid in (memory.id, "missing"):
        with pytest.raises(NotFound, match=r"no (document|record)"):
            kb.read_document(rid)
        with pytest.raises(NotFound, match=r"no (document|record)"):
            kb.delete_document(rid)
    other = kb.scoped("other")
    with pytest.raises(NotFound):
        other.delete_document(doc_id)
    with pytest.raises(NotFound):
        other.read_document(doc_id)
    assert kb.read_document(doc_id)[0].id == doc_id
