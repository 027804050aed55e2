"""GET /export and POST /import against running servers: an export holds the caller's
namespace only and imports into a fresh store as it was; every import lands in the
caller's namespace whatever its lines name; a bad line is 422 naming its line and
nothing is written; mem0's JSON and skip_existing work as in the CLI."""

from __future__ import annotations

import json
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

NDJSON = {"Content-Type": "application/x-ndjson"}
CONFIG = ServerConfig(mcp=False, web=False, rate_per_minute=0)


@dataclass
class Site:
    kb: Kredenc
    a: httpx.Client
    b: httpx.Client


def _serve(home: Path) -> Iterator[Site]:
    with Kredenc.open(home, embedder=HashEmbedder(), durability="none") as kb:
        keys = KeyRing(kb.home)
        a, _ = keys.add("alice")
        b, _ = keys.add("bob")
        with (
            ServerThread(kb, CONFIG) as url,
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {a}"}) as ca,
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {b}"}) as cb,
        ):
            yield Site(kb, ca, cb)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    base = tmp_path_factory.mktemp("export")
    (base / "darjeeling.md").write_text("# Darjeeling\n\nA black tea from the hills.\n")
    for site in _serve(base / "store"):
        alice = site.kb.scoped("alice")
        tea = alice.remember("Alice drinks sencha every morning.", kind="preference", tags=["tea"])
        milk = alice.remember("Alice never takes milk.", kind="fact", importance=0.9)
        alice.relate(tea.id, milk.id, "related_to")
        alice.ingest(base / "darjeeling.md")
        site.kb.scoped("bob").remember("CANARY-BOB: Bob's vault code is 4711.")
        yield site


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Site]:
    yield from _serve(tmp_path / "fresh")


def _lines(response: httpx.Response) -> list[dict[str, object]]:
    return [json.loads(line) for line in response.text.splitlines()]


def test_an_export_holds_the_callers_namespace_only(source: Site) -> None:
    response = source.a.get("/export")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-ndjson")
    header, *records = _lines(response)
    assert header["format"] == "kredenc-export" and header["namespaces"] == ["alice"]
    assert {r["ns"] for r in records} == {"alice"}
    assert "CANARY-BOB" not in response.text
    types = sorted(str(r.get("type", r["op"])) for r in records)
    assert types.count("memory") == 2 and types.count("document") == 1
    assert "edge" in types
    assert "CANARY-BOB" in source.b.get("/export").text


def test_a_tenant_with_nothing_filed_exports_the_header_and_learns_no_namespace(
    fresh: Site,
) -> None:
    """A day-one audit: a tenant whose namespace held nothing got a 404 whose hint listed
    the store's namespaces. It gets the header alone, naming only its own."""
    fresh.kb.scoped("bob").remember("CANARY-BOB: Bob's vault code is 4711.")
    response = fresh.a.get("/export")
    assert response.status_code == 200
    assert _lines(response) == [_lines(response)[0]]
    assert _lines(response)[0]["namespaces"] == ["alice"]
    assert "bob" not in response.text


def test_export_then_import_into_a_fresh_store_round_trips(source: Site, fresh: Site) -> None:
    exported = source.a.get("/export").content
    response = fresh.a.post("/import", content=exported, headers=NDJSON)
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["namespaces"] == ["alice"] and report["skipped"] == 0
    assert report["records"] == len(_lines(source.a.get("/export"))) - 1 - report["edges"]
    before, after = _lines(source.a.get("/export"))[1:], _lines(fresh.a.get("/export"))[1:]
    assert after == before
    memories = {m.text: m for m in fresh.kb.scoped("alice").list_memories()}
    assert memories["Alice never takes milk."].importance == 0.9
    hits = fresh.kb.scoped("alice").search("black tea hills", k=3)
    assert any("Darjeeling" in h.title for h in hits)
    # The same export again: every id is taken, refused whole unless skip_existing.
    refused = fresh.a.post("/import", content=exported, headers=NDJSON)
    assert refused.status_code == 422
    assert "already exist" in refused.json()["error"]["message"]
    skipped = fresh.a.post(
        "/import", content=exported, headers=NDJSON, params={"skip_existing": "true"}
    ).json()
    assert skipped["records"] == 0 and skipped["skipped"] == report["records"]


def test_an_import_lands_in_the_callers_namespace_whatever_it_names(
    source: Site, fresh: Site
) -> None:
    exported = source.a.get("/export").content  # every line names "alice"
    assert fresh.b.post("/import", content=exported, headers=NDJSON).status_code == 200
    assert len(fresh.kb.scoped("bob").list_memories()) == 2
    assert fresh.kb.scoped("alice").list_memories() == []
    header, *_ = _lines(fresh.b.get("/export"))
    assert header["namespaces"] == ["bob"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "body is empty"),
        (b'{"format":"kredenc-export","version":1}\n{"op":"put"', "body line 2 is not JSON"),
        (b'{"format":"nope"}\n', "body line 1 is not a kredenc export header"),
        (b"\xff\xfe", "the body is not UTF-8"),
    ],
)
def test_a_bad_import_is_422_naming_the_line_and_writes_nothing(
    fresh: Site, body: bytes, message: str
) -> None:
    response = fresh.a.post("/import", content=body, headers=NDJSON)
    assert response.status_code == 422
    assert message in response.json()["error"]["message"]
    assert fresh.kb.scoped("alice").list_memories() == []


def test_a_bad_line_after_good_ones_writes_nothing(source: Site, fresh: Site) -> None:
    lines = source.a.get("/export").text.splitlines()
    broken = "\n".join([*lines, '{"op":"put","ns":"x","id":"m1","type":"spaceship"}']) + "\n"
    response = fresh.a.post("/import", content=broken.encode(), headers=NDJSON)
    assert response.status_code == 422
    assert f"body line {len(lines) + 1}:" in response.json()["error"]["message"]
    assert fresh.kb.scoped("alice").list_memories() == []
    assert fresh.kb.scoped("alice").list_documents() == []


def test_mem0_json_is_imported_as_memories(fresh: Site) -> None:
    data = {"results": [{"id": "m0-1", "memory": "Likes oolong", "user_id": "u1"}]}
    response = fresh.a.post("/import", params={"format": "mem0"}, json=data)
    assert response.status_code == 200, response.text
    assert response.json()["records"] == 1
    (memory,) = fresh.kb.scoped("alice").list_memories()
    assert (memory.id, memory.text, memory.user_id) == ("m0-1", "Likes oolong", "u1")
    bad = fresh.a.post("/import", params={"format": "mem0"}, content=b"{nope")
    assert bad.status_code == 422 and "not JSON" in bad.json()["error"]["message"]
    unknown = fresh.a.post("/import", params={"format": "csv"}, content=b"x")
    assert unknown.status_code == 422
