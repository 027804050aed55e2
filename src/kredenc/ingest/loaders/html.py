"""HTML loader: the main content of a page, a section per heading block.

Parsing is selectolax's lexbor engine (an HTML5-conformant parser in C, no
dependencies); extraction is ours, in three steps:

1. **Drop what is not content**: scripts, styles, forms, navigation, asides,
   dialogs, hidden elements, ARIA landmarks for navigation, banners and page footers,
   and elements whose class or id names boilerplate (cookie and consent banners,
   share and social bars, related posts, comments, sidebars, newsletters, adverts).
   A site ``<header>``/``<footer>`` goes; inside the content, a ``<header>`` that holds
   a heading stays (it holds the title and byline) and a ``<footer>`` goes.
2. **Find the content root**: the page's only ``<article>``, else ``<main>`` or
   ``role="main"``, else the densest text block: each paragraph-like element adds
   the length of its text outside links to its parent and half of it to its
   grandparent, and the best-scored container wins (the readability heuristic,
   reduced to what our pages need).
3. **Walk the root in document order**: headings (h1–h6) open a new section whose
   ``heading_path`` is the chain of headings above it; paragraphs, list items
   (``- item``), table rows (cells joined by ``" | "``) and preformatted blocks
   (whitespace kept) become the section's text.

The title is the page's ``<title>``, else ``og:title``, else the content's first heading.
``links`` holds the targets of the content's links: absolute http(s) URLs (resolved
against the page's URL and ``<base href>``) and, for local files, the other local
files they point at, as resolved paths.

URLs are fetched through :func:`kredenc.ingest.fetch.fetch`, with its address, size
and time limits; a URL that answers with something other than HTML is refused.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser, LexborNode

from kredenc.errors import IngestError
from kredenc.ingest.document import LoadedDocument, Section
from kredenc.ingest.fetch import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_REDIRECTS,
    DEFAULT_TIMEOUT_S,
    fetch,
)
from kredenc.ingest.loaders.base import Loader, is_url, resolve_source
from kredenc.ingest.redact import redact_url

if TYPE_CHECKING:
    from kredenc.config import Settings

logger = logging.getLogger(__name__)

HTML_MEDIA_TYPES = frozenset({"text/html", "application/xhtml+xml"})

_DROP_TAGS = (
    "script, style, noscript, template, svg, math, canvas, iframe, object, embed, "
    "video, audio, map, form, button, input, select, textarea, nav, aside, dialog, menu"
)
_DROP_ROLES = (
    '[role="navigation"], [role="banner"], [role="contentinfo"], [role="complementary"], '
    '[role="search"], [role="dialog"], [role="alertdialog"], [role="menu"], [role="menubar"], '
    '[aria-hidden="true"], [hidden]'
)
# Class or id words that name boilerplate; matched as whole words of the attribute
# (split at spaces, "-" and "_"), so "post-footer" matches and "footnote" does not.
_BOILERPLATE = re.compile(
    r"(?:^|[\s_-])(?:cookies?|consent|gdpr|cmp|newsletter|subscribe|share|sharing|social|"
    r"related|comments?|sidebar|breadcrumbs?|advert|ads?|advertisement|promo|popup|modal|"
    r"navbar|menu|footer|masthead|skip-link|headerlink|toc)(?:$|[\s_-])",
    re.IGNORECASE,
)
_CONTENT_ROOTS = 'article, main, [role="main"]'
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
# Elements that end a run of inline text (a paragraph break before and after).
_BLOCKS = frozenset(
    {
        "address", "article", "blockquote", "body", "caption", "center", "dd", "details",
        "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "header", "hr",
        "html", "legend", "li", "main", "ol", "p", "section", "summary", "table", "tbody",
        "td", "tfoot", "th", "thead", "tr", "ul",
    }
)  # fmt: skip
# Elements whose text counts toward the density of their container.
_PARAGRAPHS = frozenset({"p", "pre", "blockquote", "li", "td", "dd", "div", "section"})
_SPACES = re.compile(r"[ \t\r\n\f\v\u00a0\u200b]+")
_HEADING_MARKS = " \t\n¶#§🔗"
# Stands for <br> in a run of inline text (the parser turns NUL in the page into U+FFFD).
_BR = "\x00"
_BLANK_LINES = re.compile(r"\n{3,}")


@dataclass
class _Block:
    text: str
    kind: str  # "li" blocks are joined by one newline, the rest by a blank line


@dataclass
class _Sections:
    """Collects blocks under the current heading path and cuts sections."""

    sections: list[Section] = field(default_factory=list)
    path: list[tuple[int, str]] = field(default_factory=list)
    blocks: list[_Block] = field(default_factory=list)
    inline: list[str] = field(default_factory=list)

    def heading(self, level: int, text: str) -> None:
        self.flush()
        self._cut()
        while self.path and self.path[-1][0] >= level:
            self.path.pop()
        self.path.append((level, text))

    def add(self, text: str, kind: str = "p") -> None:
        if text:
            self.blocks.append(_Block(text, kind))

    def flush(self, kind: str = "p") -> None:
        """End the current run of inline text as a block (``<br>`` becomes a newline)."""
        lines = [_clean(line) for line in "".join(self.inline).split(_BR)]
        # one <br> breaks the line, two or more (an empty line between) the paragraph
        self.add(_BLANK_LINES.sub("\n\n", "\n".join(lines)).strip("\n"), kind)
        self.inline.clear()

    def finish(self) -> list[Section]:
        self.flush()
        self._cut()
        return self.sections

    def _cut(self) -> None:
        if not self.blocks:
            return
        parts = [self.blocks[0].text]
        for before, block in zip(self.blocks, self.blocks[1:], strict=False):
            parts.append("\n" if before.kind == block.kind == "li" else "\n\n")
            parts.append(block.text)
        heading_path = tuple(text for _, text in self.path)
        self.sections.append(Section(text="".join(parts), heading_path=heading_path))
        self.blocks.clear()


class HtmlLoader(Loader):
    """Reads ``.html``/``.htm`` files and http(s) URLs that answer with HTML."""

    name: ClassVar[str] = "html"
    suffixes: ClassVar[tuple[str, ...]] = (".html", ".htm", ".xhtml")

    def __init__(
        self,
        *,
        allow_private: bool = False,
        allow_hosts: Collection[str] = (),
        max_bytes: int = DEFAULT_MAX_BYTES,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_redirects: int = DEFAULT_MAX_REDIRECTS,
    ) -> None:
        self.allow_private = allow_private
        self.allow_hosts = tuple(allow_hosts)
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.max_redirects = max_redirects

    @classmethod
    def from_settings(cls, settings: Settings) -> HtmlLoader:
        """A loader with the ``fetch_*`` limits of ``settings``."""
        return cls(
            allow_private=settings.fetch_allow_private,
            allow_hosts=settings.fetch_allow_hosts,
            max_bytes=settings.fetch_max_bytes,
            timeout_s=settings.fetch_timeout_s,
        )

    def can_load(self, source: str) -> bool:
        return is_web_url(source) or super().can_load(source)

    def load(self, source: str) -> list[LoadedDocument]:
        if is_url(source):
            return [self._load_url(source)]
        path = Path(resolve_source(source))
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise IngestError(
                f"{path}: cannot read file: {exc.strerror or exc}",
                "check that the file exists and is readable",
            ) from exc
        return [parse_html(data, source=str(path), base=path.as_uri())]

    def _load_url(self, url: str) -> LoadedDocument:
        fetched = fetch(
            url,
            allow_private=self.allow_private,
            allow_hosts=self.allow_hosts,
            max_bytes=self.max_bytes,
            timeout_s=self.timeout_s,
            max_redirects=self.max_redirects,
        )
        url = redact_url(url)  # the source filed and shown never holds a password
        if fetched.media_type and fetched.media_type not in HTML_MEDIA_TYPES:
            raise IngestError(
                f"{url}: not an HTML page (content type {fetched.media_type})",
                "download the file and ingest it locally, so its own loader reads it",
            )
        doc = parse_html(fetched.body, source=url, base=fetched.final_url, charset=fetched.charset)
        doc.meta.update({"url": url, "final_url": fetched.final_url})
        return doc


def is_web_url(source: str) -> bool:
    """Whether ``source`` is an http(s) URL."""
    return source[:8].lower().startswith(("http://", "https://"))


def parse_html(
    html: bytes | str,
    *,
    source: str,
    base: str | None = None,
    charset: str | None = None,
) -> LoadedDocument:
    """Extract the main content of one HTML page into a document.

    ``base`` is the URL links are resolved against (the page's URL, or a ``file:``
    URL for a local file); ``charset`` the encoding the server declared, which wins
    over the page's own ``<meta charset>``.
    """
    tree = _parse(html, charset)
    title = _title(tree)
    lang = tree.root.attributes.get("lang") if tree.root is not None else None
    base_tag = tree.css_first("base[href]")
    if base_tag is not None and base is not None:
        base = urljoin(base, base_tag.attributes.get("href") or "")
    body = tree.body
    if body is None:
        raise IngestError(f"{source}: no <body> in the page", "check that this is an HTML page")
    _drop_boilerplate(body)
    root = _content_root(body)
    sections = _extract(root)
    if not sections:
        raise IngestError(
            f"{source}: no readable text in the page",
            "the page may build its text with JavaScript; save it from a browser and "
            "ingest the saved file",
        )
    if not title:
        title = next((s.heading_path[0] for s in sections if s.heading_path), "")
    meta: dict[str, object] = {"lang": lang} if lang else {}
    return LoadedDocument(
        source=source,
        title=title or _fallback_title(source),
        loader=HtmlLoader.name,
        sections=sections,
        links=_links(root, source, base),
        meta=meta,
    )


def _parse(html: bytes | str, charset: str | None) -> LexborHTMLParser:
    if isinstance(html, bytes) and charset:
        try:
            html = html.decode(charset, errors="replace")
        except LookupError:
            logger.warning("unknown charset %r; detecting the encoding instead", charset)
    # For bytes, lexbor detects the encoding the way browsers do (BOM, then <meta>).
    return LexborHTMLParser(html, encoding=True)


def _clean(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def _title(tree: LexborHTMLParser) -> str:
    # (a page without either takes its first content heading, after extraction: a
    # page-wide first <h1> is as likely the site's logo)
    for selector, attribute in (("head title", None), ('meta[property="og:title"]', "content")):
        node = tree.css_first(selector)
        if node is None:
            continue
        value = node.text() if attribute is None else node.attributes.get(attribute) or ""
        if _clean(value):
            return _clean(value).strip(_HEADING_MARKS)
    return ""


def _fallback_title(source: str) -> str:
    if is_web_url(source):
        parts = urlsplit(source)
        return unquote(parts.path.rstrip("/").rsplit("/", 1)[-1]) or parts.netloc
    return Path(source).stem


def _drop_boilerplate(body: LexborNode) -> None:
    _decompose(body.css(f"{_DROP_TAGS}, {_DROP_ROLES}"))
    half = len(_clean(body.text())) / 2
    _decompose(
        node
        for node in body.css("[class], [id]")
        if _BOILERPLATE.search(f"{node.attributes.get('class')} {node.attributes.get('id')}")
        # never the content itself, nor a wrapper around it (e.g. "content-sidebar-wrap")
        and not node.css_matches(_CONTENT_ROOTS)
        and node.css_first(_CONTENT_ROOTS) is None
        and len(_clean(node.text())) <= half
    )
    _decompose(
        node
        for node in body.css("header, footer")
        if node.tag == "footer"
        or not _inside_content(node)
        or node.css_first("h1, h2, h3, h4, h5, h6") is None
    )


def _decompose(nodes: Iterable[LexborNode]) -> None:
    """Remove ``nodes`` from the tree, each once: never a node already gone with an
    ancestor (lexbor frees a removed subtree, so touching its nodes is unsafe)."""
    chosen = list(nodes)
    ids = {node.mem_id for node in chosen}
    for node in [n for n in chosen if not _has_ancestor_in(n, ids)]:
        node.decompose()


def _has_ancestor_in(node: LexborNode, ids: set[int]) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.mem_id in ids:
            return True
        parent = parent.parent
    return False


def _inside_content(node: LexborNode) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.tag in ("article", "main") or parent.attributes.get("role") == "main":
            return True
        parent = parent.parent
    return False


def _content_root(body: LexborNode) -> LexborNode:
    articles = [a for a in body.css("article") if _clean(a.text())]
    if len(articles) == 1:
        return articles[0]
    for node in body.css('main, [role="main"]'):
        if _clean(node.text()):
            return node
    return _densest(body)


def _densest(body: LexborNode) -> LexborNode:
    """The container that holds the most paragraph text outside links."""
    scores: dict[int, float] = {}
    nodes: dict[int, LexborNode] = {}
    for node in body.traverse():
        if node.tag not in _PARAGRAPHS:
            continue
        own = _own_text_length(node)
        if own < 25:
            continue
        for share, holder in ((1.0, node.parent), (0.5, _grandparent(node))):
            if holder is None:
                continue
            scores[holder.mem_id] = scores.get(holder.mem_id, 0.0) + share * own
            nodes[holder.mem_id] = holder
    if not scores:
        return body
    best = max(scores, key=lambda key: scores[key])
    return nodes[best]


def _grandparent(node: LexborNode) -> LexborNode | None:
    parent = node.parent
    return parent.parent if parent is not None else None


def _own_text_length(node: LexborNode) -> int:
    """Length of the text in ``node`` outside links and outside nested paragraph blocks."""
    length = 0
    for child in node.iter(include_text=True):
        if child.is_text_node:
            length += len(_clean(child.text_content or ""))
        elif child.tag != "a" and child.tag not in _PARAGRAPHS:
            length += len(_clean(child.text()))
    return length


def _extract(root: LexborNode) -> list[Section]:
    out = _Sections()
    _walk(root, out)
    return out.finish()


def _walk(node: LexborNode, out: _Sections) -> None:
    for child in node.iter(include_text=True):
        if child.is_text_node:
            out.inline.append(child.text_content or "")
            continue
        tag = child.tag or ""
        if tag == "br":
            out.inline.append(_BR)
        elif tag in _HEADINGS:
            text = _clean(child.text()).strip(_HEADING_MARKS)
            if text:
                out.heading(int(tag[1]), text)
        elif tag == "pre":
            out.flush()
            out.add(child.text().strip("\n"), "pre")
        elif tag == "tr":
            out.flush()
            cells = (_clean(cell.text()) for cell in child.css("th, td"))
            out.add(" | ".join(cell for cell in cells if cell), "li")
        elif tag == "li":
            out.flush()
            first = len(out.blocks)
            _walk(child, out)
            out.flush("li")
            if first < len(out.blocks):  # a heading inside the item may have cut
                out.blocks[first].text = "- " + out.blocks[first].text
                for block in out.blocks[first:]:
                    block.kind = "li"
        elif tag in _BLOCKS:
            out.flush()
            _walk(child, out)
            out.flush()
        else:
            _walk(child, out)  # inline: its text joins the current run


def _links(root: LexborNode, source: str, base: str | None) -> list[str]:
    found: list[str] = []
    for anchor in root.css("a[href]"):
        target = _link_target(anchor.attributes.get("href") or "", source, base)
        if target and target != source and target not in found:
            found.append(target)
    return found


def _link_target(href: str, source: str, base: str | None) -> str | None:
    href = href.strip()
    if not href or href.startswith("#"):
        return None
    absolute = urldefrag(urljoin(base or "", href)).url
    scheme = urlsplit(absolute).scheme.lower()
    if scheme in ("http", "https"):
        return absolute
    if scheme == "file" and not is_url(source):
        path = Path(unquote(urlsplit(absolute).path))
        return str(path.resolve()) if path.is_file() else None
    return None


__all__ = ["HTML_MEDIA_TYPES", "HtmlLoader", "is_web_url", "parse_html"]
