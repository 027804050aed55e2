"""POST /ingest and its jobs, against the running server on loopback (a real store).

Uploads (markdown and a PDF made here) become jobs whose events come in order and
whose documents are searchable; paths are read only inside the server's roots (``..``,
absolute paths outside and symlinks that leave are refused, existing or not); URLs
naming loopback, private or link-local addresses are refused before a job exists, and
a redirect to loopback is refused by the fetcher's guard without reaching the target;
a tenant never sees another's jobs.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from kredenc.engine import Kredenc
from kredenc.ingest.loaders import base as loaders_base
from kredenc.ingest.loaders import pdf as pdf_loader
from kredenc.interfaces.auth import KeyRing
from kredenc.interfaces.server.run import ServerThread
from kredenc.interfaces.server.state import ServerConfig
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.openai_server import LoopbackServer, Reply
from kredenc.testing.pdfs import text_pdf

ATTENTION = (
    Path(__file__).resolve().parents[4]
    / "shared/data/documents/pdf/attention_is_all_you_need_1706.03762v7.pdf"
)
PAGES = [
    "Darjeeling is a black tea grown in the hills of West Bengal.",
    "Sencha is a Japanese green tea steamed right after picking.",
    "Rooibos is a red bush from South Africa, not a tea at all.",
]
JSON = "application/json"
NOTE = b"# Brewing\n\nGreen tea brews best at 80 degrees Celsius for two minutes.\n"


@dataclass
class Site:
    url: str
    kb: Kredenc
    root: Path
    outside: Path
    a: dict[str, str]  # tenant alice's headers
    b: dict[str, str]  # tenant bob's
    redirector: LoopbackServer
    target: LoopbackServer


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    base = tmp_path_factory.mktemp("ingest")
    root, outside = base / "root", base / "outside"
    (root / "notes").mkdir(parents=True)
    outside.mkdir()
    (root / "notes" / "brewing.md").write_bytes(NOTE)
    (outside / "secret.md").write_text("# Secret\n\nThe vault code is 4711.\n")
    (root / "leak.md").symlink_to(outside / "secret.md")
    (root / "walked").mkdir()
    (root / "walked" / "kept.md").write_text("# Kept\n\nOolong is half oxidised.\n")
    (root / "walked" / "escape.md").symlink_to(outside / "secret.md")
    with LoopbackServer() as target, LoopbackServer() as redirector:
        target.route("GET", "/admin", lambda _r: Reply.raw("<h1>admin</h1>", 200, "text/html"))
        redirector.route(
            "GET",
            "/go",
            lambda _r: Reply(
                302, b"", headers={"Location": f"http://127.0.0.1:{target.port}/admin"}
            ),
        )
        kb = Kredenc.open(
            base / "store",
            embedder=HashEmbedder(),
            durability="none",
            fetch_allow_hosts=[f"127.0.0.1:{redirector.port}"],
        )
        keys = KeyRing(kb.home)
        a, _ = keys.add("alice")
        b, _ = keys.add("bob")
        try:
            config = ServerConfig(roots=[root], mcp=False, web=False, rate_per_minute=0)
            with ServerThread(kb, config) as url:
                yield Site(
                    url,
                    kb,
                    root.resolve(),
                    outside.resolve(),
                    {"Authorization": f"Bearer {a}"},
                    {"Authorization": f"Bearer {b}"},
                    redirector,
                    target,
                )
        finally:
            kb.close()


def _client(site: Site, headers: dict[str, str]) -> httpx.Client:
    return httpx.Client(base_url=site.url, headers=headers, timeout=60)


def events(client: httpx.Client, job_id: str, **headers: str) -> list[tuple[int, str, Any]]:
    """Every event of the job's stream as (id, name, data), read until it ends."""
    out = []
    with client.stream("GET", f"/ingest/jobs/{job_id}/events", headers=headers) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        block: dict[str, str] = {}
        for line in stream.iter_lines():
            if not line:
                if block:
                    out.append((int(block["id"]), block["event"], json.loads(block["data"])))
                block = {}
                continue
            key, _, value = line.partition(": ")
            block[key] = value
    return out


def finished(client: httpx.Client, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job: dict[str, Any] = client.get(f"/ingest/jobs/{job_id}").json()
        if job["state"] in ("done", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


def texts(kb: Kredenc, namespace: str, query: str) -> list[str]:
    return [h.text for h in kb.scoped(namespace).search(query, k=20)]


def test_uploads_become_a_job_whose_events_come_in_order_and_are_searchable(site: Site) -> None:
    with _client(site, site.a) as client:
        pdf = text_pdf(PAGES)
        response = client.post(
            "/ingest",
            files=[
                ("files", ("tea-guide.pdf", pdf, "application/pdf")),
                ("files", ("brewing notes.md", NOTE, "text/markdown")),
            ],
        )
        assert response.status_code == 202, response.text
        job = response.json()["job"]
        assert job["state"] in ("queued", "running")
        assert job["sources"] == ["tea-guide.pdf", "brewing notes.md"]
        live = events(client, job["id"])
        names = [name for _, name, _ in live]
        assert [i for i, _, _ in live] == list(range(len(live)))
        assert names == ["progress", "progress", "progress", "file", "file", "done"]
        pages = [data for _, name, data in live if name == "progress"]
        assert pages == [{"source": "tea-guide.pdf", "page": n, "pages": 3} for n in (1, 2, 3)]
        files = [data for _, name, data in live if name == "file"]
        assert [(f["source"], f["status"]) for f in files] == [
            ("tea-guide.pdf", "filed"),
            ("brewing notes.md", "filed"),
        ]
        done = live[-1][2]
        assert done["state"] == "done" and done["error"] is None
        assert done["progress"]["tea-guide.pdf"] == {"page": 3, "pages": 3, "done": True}
        assert done["report"]["documents"] == 2
        assert client.get(f"/ingest/jobs/{job['id']}").json() == done
        # A client connecting late gets the same events, then the stream ends.
        assert events(client, job["id"]) == live
        assert events(client, job["id"], **{"Last-Event-ID": "3"}) == live[4:]
    # Filed under the names uploaded, searchable, and the saved files are gone.
    docs = {d.origin: d for d in site.kb.scoped("alice").list_documents()}
    assert docs["tea-guide.pdf"].title == "tea-guide"
    assert docs["brewing notes.md"].title == "Brewing"
    assert any("Sencha" in t for t in texts(site.kb, "alice", "Japanese green tea steamed"))
    hit = site.kb.scoped("alice").search("Sencha Japanese green tea", k=1)[0]
    assert hit.page == 2 and hit.origin == "tea-guide.pdf"
    assert list((site.kb.home / "uploads").iterdir()) == []


def test_an_upload_name_never_reaches_the_file_system(site: Site) -> None:
    with _client(site, site.a) as client:
        response = client.post(
            "/ingest", files=[("files", ("../../../etc/cron.d/evil.md", NOTE, "text/markdown"))]
        )
        assert response.status_code == 202
        job = finished(client, response.json()["job"]["id"])
    assert job["sources"] == ["evil.md"]
    assert job["report"]["files"][0]["source"] == "evil.md"
    assert not (site.kb.home.parent / "etc").exists()
    assert list((site.kb.home / "uploads").iterdir()) == []
    assert (site.kb.home / "uploads").stat().st_mode & 0o777 == 0o700  # as the store's


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ([("files", ("tool.exe", b"MZ", "application/octet-stream"))], "no loader reads"),
        ([("files", ("noext", b"text", "text/plain"))], "no loader reads"),
        ([("other", ("a.md", NOTE, "text/markdown"))], "no files uploaded"),
        (
            [("files", ("a.md", NOTE, "text/markdown")), ("files", ("a.md", NOTE, "text/plain"))],
            "two uploads are named 'a.md'",
        ),
    ],
)
def test_bad_uploads_are_refused_before_a_job(site: Site, files: list[Any], message: str) -> None:
    with _client(site, site.a) as client:
        before = client.get("/ingest/jobs").json()["items"]
        response = client.post("/ingest", files=files)
        assert response.status_code == 422
        assert message in response.json()["error"]["message"]
        assert client.get("/ingest/jobs").json()["items"] == before
    assert list((site.kb.home / "uploads").iterdir()) == []


def test_paths_inside_the_root_are_ingested_relative_or_absolute(site: Site) -> None:
    with _client(site, site.b) as client:
        for path in ("notes/brewing.md", str(site.root / "walked")):
            response = client.post("/ingest", json={"paths": [path], "drawer": "library"})
            assert response.status_code == 202, response.text
            job = finished(client, response.json()["job"]["id"])
            assert job["state"] == "done", job
        walked = job["report"]
    # The folder's symlink out of the root is skipped, never read.
    assert [f["source"] for f in walked["files"]] == [str(site.root / "walked" / "kept.md")]
    # (the wire form of a report: skipped and failed are [source, reason] pairs)
    assert [s[0] for s in walked["skipped"]] == [str(site.root / "walked" / "escape.md")]
    assert not any("4711" in t for t in texts(site.kb, "bob", "vault code"))
    docs = site.kb.scoped("bob").list_documents(drawer="library")
    assert {d.title for d in docs} == {"Brewing", "Kept"}


@pytest.mark.parametrize(
    "path",
    ["../outside/secret.md", "/etc/passwd", "leak.md", "notes/../../outside/secret.md",
     "/no/such/file.md", "../outside/missing.md"],
)  # fmt: skip
def test_paths_outside_the_root_are_refused_alike(site: Site, path: str) -> None:
    with _client(site, site.a) as client:
        response = client.post("/ingest", json={"paths": [path]})
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "path_not_allowed"
    assert error["message"] == f"path {path!r} is outside the folders this server ingests from"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"paths": ["notes/missing.md"]}, 422, "invalid_input"),
        ({"paths": ["http://127.0.0.1/x"]}, 422, "invalid_input"),
        ({"paths": ["notes/\x00.md"]}, 422, "invalid_input"),
        ({}, 422, "invalid_input"),
        ({"paths": "notes"}, 422, "invalid_request"),
        ({"path": ["notes"]}, 422, "invalid_request"),
        ({"paths": ["notes"], "drawer": " "}, 422, "invalid_input"),
    ],
)
def test_malformed_requests_are_one_clear_error(
    site: Site, body: dict[str, Any], status: int, code: str
) -> None:
    with _client(site, site.a) as client:
        response = client.post("/ingest", json=body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert set(response.json()["error"]) == {"code", "message", "hint"}


@pytest.mark.parametrize(
    "body", [rb'{"paths": ["notes/\ud800.md"]}', rb'{"urls": ["http://example.org/\ud800"]}']
)
def test_a_lone_surrogate_in_a_source_is_refused(site: Site, body: bytes) -> None:
    with _client(site, site.a) as client:
        response = client.post("/ingest", content=body, headers={"Content-Type": JSON})
    # Refused while parsed: the parser takes a lone surrogate for a broken escape, so
    # the body is malformed JSON (400, like any body that cannot be parsed).
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "bad_request"
    assert response.json()["error"]["message"].startswith("the body is not valid JSON: ")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:9/", "address 127.0.0.1 is loopback"),
        ("http://10.1.2.3/", "address 10.1.2.3 is private"),
        ("http://169.254.169.254/latest/meta-data/", "address 169.254.169.254 is link-local"),
        ("http://[::1]/", "address ::1 is loopback"),
        ("file:///etc/passwd", "only http and https URLs are fetched"),
    ],
)
def test_urls_to_private_addresses_are_refused_before_a_job(
    site: Site, url: str, reason: str
) -> None:
    with _client(site, site.a) as client:
        before = len(client.get("/ingest/jobs").json()["items"])
        response = client.post("/ingest", json={"urls": [url]})
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "fetch_refused"
        assert reason in response.json()["error"]["message"]
        assert len(client.get("/ingest/jobs").json()["items"]) == before


def test_a_redirect_to_loopback_is_refused_without_reaching_it(site: Site) -> None:
    url = f"http://127.0.0.1:{site.redirector.port}/go"
    with _client(site, site.a) as client:
        response = client.post("/ingest", json={"urls": [url]})
        assert response.status_code == 202
        job = finished(client, response.json()["job"]["id"])
    assert job["state"] == "done"
    (outcome,) = job["report"]["files"]
    assert outcome["status"] == "failed"
    assert f"redirected to http://127.0.0.1:{site.target.port}/admin" in outcome["error"]
    assert "loopback" in outcome["error"]
    assert site.target.requests == []
    assert [r.path for r in site.redirector.requests] == ["/go"]


def test_a_tenant_never_sees_another_tenants_jobs(site: Site) -> None:
    with _client(site, site.a) as alice, _client(site, site.b) as bob:
        job = alice.post("/ingest", json={"paths": ["notes"]}).json()["job"]
        finished(alice, job["id"])
        missing = bob.get("/ingest/jobs/job_0123").json()
        for path in (f"/ingest/jobs/{job['id']}", f"/ingest/jobs/{job['id']}/events"):
            response = bob.get(path)
            assert response.status_code == 404
            assert response.json()["error"]["code"] == missing["error"]["code"] == "not_found"
            assert job["id"] in response.json()["error"]["message"]
        assert job["id"] not in {j["id"] for j in bob.get("/ingest/jobs").json()["items"]}
        assert job["id"] in {j["id"] for j in alice.get("/ingest/jobs").json()["items"]}


def test_a_server_without_roots_refuses_paths_and_names_the_setting(tmp_path: Path) -> None:
    with (
        Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb,
        ServerThread(kb, ServerConfig(mcp=False, web=False)) as url,
    ):
        response = httpx.post(f"{url}/ingest", json={"paths": [str(tmp_path)]})
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "no_roots"
    assert "--root" in error["hint"] and "server_roots" in error["hint"]


@pytest.mark.skipif(not ATTENTION.is_file(), reason=f"the shared PDF is not here ({ATTENTION})")
def test_the_attention_paper_reports_every_page_and_is_searchable(site: Site) -> None:
    with _client(site, site.b) as client:
        response = client.post(
            "/ingest",
            files=[("files", ("attention.pdf", ATTENTION.read_bytes(), "application/pdf"))],
        )
        assert response.status_code == 202
        live = events(client, response.json()["job"]["id"])
    pages = [d["page"] for _, name, d in live if name == "progress"]
    assert pages == list(range(1, 16))
    assert live[-1][1] == "done"
    assert live[-1][2]["report"]["files"][0]["status"] == "filed"
    hits = site.kb.scoped("bob").search("multi-head attention h = 8 parallel heads", k=5)
    assert any(h.origin == "attention.pdf" and h.page == 5 for h in hits)


def test_stopping_the_server_stops_the_running_job_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go = threading.Event()  # the PDF waits after page 1: the job is surely running
    report = loaders_base.report_page  # what the PDF loader calls after each page

    def report_then_wait(source: str, page: int, pages: int) -> None:
        report(source, page, pages)
        if page == 1:
            go.wait(30)

    monkeypatch.setattr(pdf_loader, "report_page", report_then_wait)
    pdf = text_pdf([f"Page {n} of a long report." for n in range(50)])
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        server = ServerThread(kb, ServerConfig(mcp=False, web=False))
        with server as url:
            job = httpx.post(
                f"{url}/ingest", files=[("files", ("long.pdf", pdf, "application/pdf"))]
            ).json()["job"]
            with httpx.Client(base_url=url) as client:
                deadline = time.monotonic() + 30
                while not client.get(f"/ingest/jobs/{job['id']}").json()["progress"]:
                    assert time.monotonic() < deadline
                    time.sleep(0.02)
            threading.Timer(0.3, go.set).start()  # page 2 comes once stopping has begun
            started = time.monotonic()
        assert time.monotonic() - started < 15
        stopped = server.app.state.kredenc.jobs.get(kb.namespace, job["id"])
        assert stopped["state"] == "failed" and stopped["error"]["code"] == "cancelled"
        assert kb.list_documents() == []
        assert list((kb.home / "uploads").iterdir()) == []


def test_a_read_only_store_refuses_an_ingest_before_saving_anything(tmp_path: Path) -> None:
    Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none").close()
    with (
        Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), read_only=True) as kb,
        ServerThread(kb, ServerConfig(mcp=False, web=False)) as url,
    ):
        response = httpx.post(f"{url}/ingest", files=[("files", ("a.md", NOTE, "text/markdown"))])
        assert response.status_code == 403, response.text  # not a 503 to retry
        assert response.json()["error"]["code"] == "store_read_only"
        assert httpx.get(f"{url}/ingest/jobs").json()["items"] == []
    assert not (tmp_path / "s" / "uploads").exists()
