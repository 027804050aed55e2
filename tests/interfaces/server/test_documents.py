"""GET/DELETE /documents against the running server: paging and filters, one document
with its chunks in order, delete removes the document and every chunk from search, and
tenant B never sees, reads or deletes A's documents (404 like a missing id)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")

from kredenc.engine import Kredenc
from kredenc.interfaces.auth import KeyRing
from kredenc.interfaces.server.run import ServerThread
from kredenc.interfaces.server.state import ServerConfig
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.pdfs import text_pdf


@dataclass
class Site:
    url: str
    kb: Kredenc
    files: Path
    a: httpx.Client
    b: httpx.Client


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    base = tmp_path_factory.mktemp("documents")
    files = base / "files"
    files.mkdir()
    for name in ("assam", "keemun", "oolong"):
        (files / f"{name}.md").write_text(f"# {name.title()}\n\n{name.title()} is a tea.\n")
    (files / "guide.pdf").write_bytes(
        text_pdf(["Matcha is stone ground.", "Gyokuro is shaded.", "Bancha is late."])
    )
    with Kredenc.open(base / "store", embedder=HashEmbedder(), durability="none") as kb:
        keys = KeyRing(kb.home)
        a, _ = keys.add("alice")
        b, _ = keys.add("bob")
        kb.scoped("alice").ingest(files)
        kb.scoped("bob").ingest(files / "assam.md", drawer="bobs")
        config = ServerConfig(mcp=False, web=False, rate_per_minute=0)
        with (
            ServerThread(kb, config) as url,
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {a}"}) as ca,
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {b}"}) as cb,
        ):
            yield Site(url, kb, files.resolve(), ca, cb)


def test_documents_are_listed_page_by_page(site: Site) -> None:
    first = site.a.get("/documents", params={"limit": 3}).json()
    assert [d["title"] for d in first["items"]] == ["Assam", "guide", "Keemun"]
    assert (first["limit"], first["offset"], first["next_offset"]) == (3, 0, 3)
    rest = site.a.get("/documents", params={"limit": 3, "offset": 3}).json()
    assert [d["title"] for d in rest["items"]] == ["Oolong"]
    assert rest["next_offset"] is None
    entry = first["items"][1]
    assert entry["origin"] == str(site.files / "guide.pdf")
    assert (entry["loader"], entry["drawer"], entry["chunks"], entry["version"]) == (
        "pdf", "documents", 3, 1,  # one chunk a page
    )  # fmt: skip


@pytest.mark.parametrize(
    ("params", "titles"),
    [
        ({"loader": "pdf"}, ["guide"]),
        ({"loader": ["pdf", "markdown"]}, ["Assam", "guide", "Keemun", "Oolong"]),
        ({"source": "*/oolong.md"}, ["Oolong"]),
        ({"drawer": "elsewhere"}, []),
    ],
)
def test_documents_are_filtered(site: Site, params: dict[str, object], titles: list[str]) -> None:
    found = site.a.get("/documents", params=params).json()["items"]  # type: ignore[arg-type]
    assert [d["title"] for d in found] == titles


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 10_000}, {"offset": -1}])
def test_bad_paging_is_422(site: Site, params: dict[str, int]) -> None:
    response = site.a.get("/documents", params=params)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"


def test_a_document_is_read_with_its_chunks_in_order(site: Site) -> None:
    (guide,) = site.a.get("/documents", params={"loader": "pdf"}).json()["items"]
    detail = site.a.get(f"/documents/{guide['id']}").json()
    assert detail["document"] == guide
    chunks = detail["chunks"]
    assert len(chunks) == guide["chunks"]
    assert all(c["type"] == "chunk" for c in chunks)
    firsts = [c["text"].split()[0] for c in chunks]
    assert firsts == ["Matcha", "Gyokuro", "Bancha"]  # the pages' order


def test_a_memory_id_is_not_a_document(site: Site) -> None:
    memory = site.kb.scoped("alice").remember("Alice takes her tea with milk.")
    for method in ("GET", "DELETE"):
        response = site.a.request(method, f"/documents/{memory.id}")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    site.kb.scoped("alice").get(memory.id)  # still there


def test_delete_removes_the_document_and_its_chunks_from_search(site: Site) -> None:
    alice = site.kb.scoped("alice")
    (doc,) = site.a.get("/documents", params={"source": "*/keemun.md"}).json()["items"]
    chunk_ids = [c["id"] for c in site.a.get(f"/documents/{doc['id']}").json()["chunks"]]
    assert any(h.id in chunk_ids for h in alice.search("Keemun is a tea", k=10))
    response = site.a.delete(f"/documents/{doc['id']}")
    assert response.status_code == 204 and response.content == b""
    assert not any(h.id in chunk_ids for h in alice.search("Keemun is a tea", k=10))
    assert site.a.get(f"/documents/{doc['id']}").status_code == 404
    assert site.a.delete(f"/documents/{doc['id']}").status_code == 404
    titles = [d["title"] for d in site.a.get("/documents").json()["items"]]
    assert "Keemun" not in titles and "Oolong" in titles
    # Ingesting the file again files it afresh (it is no longer "unchanged").
    assert alice.ingest(site.files / "keemun.md").documents == 1


def test_a_tenant_never_sees_another_tenants_documents(site: Site) -> None:
    mine = site.b.get("/documents").json()["items"]
    assert [(d["title"], d["drawer"]) for d in mine] == [("Assam", "bobs")]
    theirs = site.a.get("/documents").json()["items"]
    missing = site.b.get("/documents/d0000000000000000000").json()["error"]
    for doc in theirs:
        for method in ("GET", "DELETE"):
            response = site.b.request(method, f"/documents/{doc['id']}")
            assert response.status_code == 404
            error = response.json()["error"]
            assert error["code"] == missing["code"]
            assert error["message"] == missing["message"].replace("d0000000000000000000", doc["id"])
    assert site.a.get("/documents").json()["items"] == theirs  # nothing deleted
