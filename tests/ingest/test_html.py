"""HTML loader: realistic pages from files and from a loopback server."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kredenc.config import load_settings
from kredenc.errors import FetchRefused, IngestError
from kredenc.ingest.loaders.html import HtmlLoader, parse_html

PAGES = Path(__file__).parent.parent / "fixtures" / "ingest" / "html"
BLOG = PAGES / "blog_post.html"
DOCS = PAGES / "docs_page.html"
NEWS = PAGES / "news_divs.html"  # windows-1250, declared in a <meta http-equiv>


def _load(path: Path) -> tuple[str, list[tuple[tuple[str, ...], str]]]:
    [doc] = HtmlLoader().load(str(path))
    return doc.title, [(s.heading_path, s.text) for s in doc.sections]


# --- files --------------------------------------------------------------------------


def test_blog_post_keeps_the_article_and_drops_the_page_around_it() -> None:
    [doc] = HtmlLoader().load(str(BLOG))
    assert doc.title == "Why we moved our job queue to SQLite | Fieldnotes"
    assert doc.loader == "html"
    assert doc.source == str(BLOG.resolve())
    assert doc.meta == {"lang": "en"}
    text = doc.text
    for kept in (
        "It was fast, it was simple, and it lost work every time the box restarted",
        "By Ana Horvat · 12 March 2024",
        "Jobs per second, one week before and after the migration.",
    ):
        assert kept in text
    for dropped in (
        "We use cookies",  # cookie banner
        "Accept all",
        "Archive",  # site navigation
        "Search the blog",  # search form
        "Related posts",  # sidebar
        "Subscribe to our newsletter",
        "Share this post",  # article footer
        "Tagged:",
        "3 comments",  # comments section, outside the article
        "All rights reserved",  # site footer
        "gtag",  # scripts
        "font-family",  # styles
        "schema.org",  # JSON-LD
    ):
        assert dropped not in text, dropped


def test_blog_post_headings_become_sections() -> None:
    _, sections = _load(BLOG)
    title = "Why we moved our job queue to SQLite"
    assert [path for path, _ in sections] == [
        (title,),
        (title, "The problem with an in-memory queue"),
        (title, "The design"),
        (title, "The design", "Claiming a job"),
        (title, "The design", "Retries and backoff"),
        (title, "Results"),
    ]
    claiming = sections[3][1]
    assert claiming.startswith(
        "UPDATE jobs SET state = 'running', claimed_at = unixepoch()\n"
        "WHERE id = (SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1)\n"
        "RETURNING id, payload;\n\nWAL mode lets readers continue"
    )
    assert sections[4][1] == (
        "- A failed job gets run_after set to now plus an exponential delay.\n"
        "- After eight attempts the job moves to the dead state and pages someone.\n"
        "- Every state change is one statement, so there is nothing to reconcile."
    )
    # whitespace from the page's own line breaks is collapsed inside a paragraph
    assert sections[1][1].startswith(
        "Redis persistence was configured with append-only files and appendfsync everysec, "
        "which means"
    )


def test_blog_post_links_from_a_local_file() -> None:
    [doc] = HtmlLoader().load(str(BLOG))
    # site-relative links lead nowhere on disk; absolute web links are kept
    assert doc.links == ["https://www.sqlite.org/lang_returning.html"]


def test_docs_page_without_main_or_article_uses_role_main() -> None:
    title, sections = _load(DOCS)
    assert title == "Configuration — tallow 2.3 documentation"
    assert [path for path, _ in sections] == [
        ("Configuration",),
        ("Configuration", "The settings file"),
        ("Configuration", "The settings file", "Server options"),
        ("Configuration", "The settings file", "Storage options"),
        ("Configuration", "Environment variables"),
    ]
    texts = dict(sections)
    assert texts[("Configuration", "The settings file")].endswith(
        "[server]\nport = 8080\nworkers = 4"
    )
    assert (
        "The TCP port to listen on. Defaults to 8080."
        in texts[("Configuration", "The settings file", "Server options")]
    )
    assert texts[("Configuration", "The settings file", "Storage options")].endswith(
        "Option | Default\ndata_dir | ./data\ncache_mb | 256"
    )
    whole = "\n".join(texts.values())
    for dropped in ("¶", "Quick search", "Table of Contents", "Navigation", "Created using"):
        assert dropped not in whole


def test_docs_page_links_to_other_local_pages_as_paths() -> None:
    [doc] = HtmlLoader().load(str(DOCS))
    assert doc.links == [str((PAGES / "deployment.html").resolve())]
    [back] = HtmlLoader().load(str(PAGES / "deployment.html"))
    assert back.links == [str(DOCS.resolve())]


def test_div_soup_falls_back_to_the_densest_block_and_reads_the_declared_encoding() -> None:
    title, sections = _load(NEWS)
    assert title == "Nová lávka přes Vltavu otevřena - Zprávy z Prahy"
    [(path, text)] = sections
    assert path == ()
    paragraphs = text.split("\n\n")
    assert paragraphs[0] == "Nová lávka přes Vltavu otevřena"
    assert paragraphs[1].startswith("Praha otevřela novou lávku pro pěší a cyklisty")
    # <br><br> separates paragraphs
    assert paragraphs[2].startswith("První chodci přešli lávku v sobotu ráno")
    assert paragraphs[3].startswith("Lávka je dlouhá 260 metrů")
    assert len(paragraphs) == 5
    for dropped in ("Nejčtenější", "Reklama", "Copyright", "Počasí", "Tramvaje"):
        assert dropped not in text


def test_title_falls_back_to_the_first_heading_then_the_file_name(tmp_path: Path) -> None:
    page = tmp_path / "notes.htm"
    page.write_text("<h1>Meeting notes</h1><p>We agreed to ship on Friday.</p>", "utf-8")
    [doc] = HtmlLoader().load(str(page))
    assert doc.title == "Meeting notes"
    page.write_text("<p>We agreed to ship on Friday.</p>", "utf-8")
    [doc] = HtmlLoader().load(str(page))
    assert doc.title == "notes"
    assert doc.text == "We agreed to ship on Friday."


def test_a_page_without_text_is_an_ingest_error(tmp_path: Path) -> None:
    page = tmp_path / "app.html"
    page.write_text(
        "<html><head><title>App</title></head><body><div id=root></div>"
        "<script>render()</script></body></html>",
        "utf-8",
    )
    with pytest.raises(IngestError, match=r"app\.html: no readable text in the page"):
        HtmlLoader().load(str(page))


def test_a_missing_file_is_an_ingest_error(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match=r"gone\.html: cannot read file"):
        HtmlLoader().load(str(tmp_path / "gone.html"))


def test_can_load_html_files_and_web_urls() -> None:
    loader = HtmlLoader()
    assert loader.can_load("page.html")
    assert loader.can_load("PAGE.HTM")
    assert loader.can_load("https://example.org/post")
    assert loader.can_load("http://example.org/")
    assert not loader.can_load("notes.md")
    assert not loader.can_load("ftp://example.org/page.txt")


def test_parse_html_from_text() -> None:
    doc = parse_html(
        "<main><h2>A</h2><p>one<br>two</p><h2>B</h2><ul><li><p>x</p></li></ul></main>",
        source="inline",
    )
    assert [(s.heading_path, s.text) for s in doc.sections] == [
        (("A",), "one\ntwo"),
        (("B",), "- x"),
    ]


# --- URLs ---------------------------------------------------------------------------


class _Site:
    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.port = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def site() -> Iterator[_Site]:
    site = _Site()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            status, headers, body = site.routes.get(self.path, (404, {}, b"not here"))
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    site.port = httpd.server_port
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield site
    finally:
        httpd.shutdown()
        httpd.server_close()


HTML_UTF8 = {"Content-Type": "text/html; charset=utf-8"}


def test_a_url_is_fetched_and_its_links_resolved_against_the_final_url(site: _Site) -> None:
    site.routes["/p/123"] = (301, {"Location": "/2024/03/job-queue/"}, b"")
    site.routes["/2024/03/job-queue/"] = (200, HTML_UTF8, BLOG.read_bytes())
    url = f"{site.base}/p/123"
    [doc] = HtmlLoader(allow_private=True).load(url)
    assert doc.source == url
    assert doc.title == "Why we moved our job queue to SQLite | Fieldnotes"
    assert doc.meta == {
        "lang": "en",
        "url": url,
        "final_url": f"{site.base}/2024/03/job-queue/",
    }
    assert doc.links == [
        f"{site.base}/2023/11/wal-mode-explained/",
        "https://www.sqlite.org/lang_returning.html",
    ]
    assert len(doc.sections) == 6


def test_the_servers_charset_wins_over_guessing(site: _Site) -> None:
    page = "<title>Zprávy</title><p>Příliš žluťoučký kůň úpěl ďábelské ódy.</p>"
    site.routes["/cz"] = (200, {"Content-Type": "text/html; charset=iso-8859-2"},
                          page.encode("iso-8859-2"))  # fmt: skip
    [doc] = HtmlLoader(allow_private=True).load(f"{site.base}/cz")
    assert doc.title == "Zprávy"
    assert doc.text == "Příliš žluťoučký kůň úpěl ďábelské ódy."


def test_a_url_that_is_not_html_is_refused(site: _Site) -> None:
    site.routes["/report.pdf"] = (200, {"Content-Type": "application/pdf"}, b"%PDF-1.7")
    with pytest.raises(
        IngestError, match=r"report\.pdf: not an HTML page \(content type application/pdf\)"
    ):
        HtmlLoader(allow_private=True).load(f"{site.base}/report.pdf")


def test_a_loopback_url_is_refused_by_default(site: _Site) -> None:
    site.routes["/"] = (200, HTML_UTF8, BLOG.read_bytes())
    with pytest.raises(FetchRefused, match="loopback"):
        HtmlLoader().load(f"{site.base}/")


def test_allow_hosts_lets_exactly_one_private_host_through(site: _Site) -> None:
    site.routes["/"] = (200, HTML_UTF8, DOCS.read_bytes())
    [doc] = HtmlLoader(allow_hosts=[f"127.0.0.1:{site.port}"]).load(f"{site.base}/")
    assert doc.sections[0].heading_path == ("Configuration",)
    assert doc.links == [f"{site.base}/deployment.html"]


def test_the_loader_takes_its_limits_from_the_settings(site: _Site, tmp_path: Path) -> None:
    site.routes["/"] = (200, HTML_UTF8, BLOG.read_bytes())
    settings = load_settings(
        tmp_path, fetch_allow_private=True, fetch_max_bytes=1000, fetch_timeout_s=3.0
    )
    loader = HtmlLoader.from_settings(settings)
    assert (loader.allow_private, loader.max_bytes, loader.timeout_s) == (True, 1000, 3.0)
    with pytest.raises(FetchRefused, match="larger than the limit of 1000 bytes"):
        loader.load(f"{site.base}/")


def test_a_url_of_another_scheme_is_refused() -> None:
    with pytest.raises(FetchRefused, match="only http and https"):
        HtmlLoader().load("ftp://example.org/page.html")


def test_a_logo_heading_is_not_the_title(tmp_path: Path) -> None:
    page = tmp_path / "post.html"
    page.write_text(
        "<header><h1>ACME Blog</h1><nav><a href='/'>Home</a></nav></header>"
        "<article><h2>Shipping on Fridays</h2><p>We stopped being afraid of it.</p></article>",
        "utf-8",
    )
    [doc] = HtmlLoader().load(str(page))
    assert doc.title == "Shipping on Fridays"
    assert "ACME" not in doc.text


def test_the_fetch_allow_hosts_setting_the_hint_names_lets_one_host_through(
    site: _Site, tmp_path: Path
) -> None:
    site.routes["/"] = (200, HTML_UTF8, DOCS.read_bytes())
    with pytest.raises(FetchRefused) as refused:
        HtmlLoader.from_settings(load_settings(tmp_path)).load(f"{site.base}/")
    assert "fetch_allow_hosts" in refused.value.hint
    settings = load_settings(tmp_path, fetch_allow_hosts=[f"127.0.0.1:{site.port}"])
    [doc] = HtmlLoader.from_settings(settings).load(f"{site.base}/")
    assert doc.sections[0].heading_path == ("Configuration",)


def test_a_password_in_the_url_is_neither_filed_nor_shown(site: _Site) -> None:
    site.routes["/"] = (200, HTML_UTF8, DOCS.read_bytes())
    site.routes["/pdf"] = (200, {"Content-Type": "application/pdf"}, b"%PDF-1.7")
    base = f"http://alice:hunter2@127.0.0.1:{site.port}"
    [doc] = HtmlLoader(allow_private=True).load(f"{base}/")
    assert doc.source == f"http://***@127.0.0.1:{site.port}/"
    assert "hunter2" not in repr(doc.meta) + repr(doc.links)
    with pytest.raises(IngestError) as failed:
        HtmlLoader(allow_private=True).load(f"{base}/pdf")
    assert "hunter2" not in str(failed.value) and "***@" in str(failed.value)
    with pytest.raises(FetchRefused) as refused:
        HtmlLoader().load(f"{base}/")
    assert "hunter2" not in str(refused.value) and "alice" not in str(refused.value)
