"""Markdown loader: a section per heading block, with the heading path kept.

- Front matter (YAML between ``---`` lines at the top) goes into the document's meta,
  read by a small parser that understands ``key: value`` lines, inline lists
  (``tags: [a, b]``) and block lists (``- a`` lines under a key); anything nested is
  skipped. ``title`` in the front matter wins over the first H1, which wins over the
  file name.
- Headings (ATX ``#`` and one-line setext ``===``/``---``) start sections; a heading
  inside a fenced code block is code, not a heading. A section's text starts with its
  heading line; a heading with nothing under it adds only to its children's path.
- Relative links to local files become ``links`` (resolved to the target's source)
  and are replaced in the text by their label, so that URL-encoded paths do not end up
  in chunks; images become their alt text; web links are left as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from kredenc.ingest.document import LoadedDocument, Section
from kredenc.ingest.loaders.base import Loader, read_text_file, resolve_source

#: Maps a relative link target (URL-decoded, without ``#fragment``) to the source of
#: the document it points to, or None when it points to nothing we know.
LinkResolver = Callable[[str], str | None]

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# [label](target "title") and ![alt](target); the target may hold one level of
# balanced parentheses ("Page (draft) 1a2b....md").
_LINK = re.compile(
    r"(!?)\[([^\]\n]*)\]\(\s*<?((?:[^()\s<>]|\([^()\s]*\))+)>?(?:\s+\"[^\"\n]*\")?\s*\)"
)
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_BLANK_LINES = re.compile(r"\n{3,}")


@dataclass
class ParsedMarkdown:
    sections: list[Section]
    links: list[str] = field(default_factory=list)
    front_matter: dict[str, Any] = field(default_factory=dict)
    h1: str | None = None


class MarkdownLoader(Loader):
    """Reads a markdown file into one document with a section per heading block."""

    name: ClassVar[str] = "markdown"
    suffixes: ClassVar[tuple[str, ...]] = (".md", ".markdown", ".mdown", ".mkd")

    def load(self, source: str) -> list[LoadedDocument]:
        path = Path(source)
        parsed = parse_markdown(read_text_file(path), file_link_resolver(path.parent))
        meta = dict(parsed.front_matter)
        title = str(meta.pop("title", "") or parsed.h1 or path.stem)
        doc = LoadedDocument(
            resolve_source(source), title, self.name, parsed.sections, parsed.links, meta
        )
        return [doc]


def file_link_resolver(base_dir: Path) -> LinkResolver:
    """Resolve link targets to existing files next to (or below) ``base_dir``."""

    def resolve(target: str) -> str | None:
        path = (base_dir / target).resolve()
        return str(path) if path.is_file() else None

    return resolve


def parse_markdown(text: str, resolve_link: LinkResolver | None = None) -> ParsedMarkdown:
    """Split markdown into heading sections; collect front matter and local links."""
    front_matter, body = split_front_matter(text)
    links: list[str] = []
    parser = _SectionParser()
    fence: str | None = None
    for line in body.split("\n"):
        opening = _FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            parser.add(line)
            continue
        if opening:
            fence = opening.group(1)
            parser.add(line)
            continue
        atx = _ATX.match(line)
        if atx:
            heading = _rewrite_links(atx.group(2) or "", resolve_link, links)
            parser.heading(len(atx.group(1)), heading.strip(), line)
            continue
        setext = _SETEXT.match(line)
        if setext and parser.can_underline():
            parser.underline(1 if setext.group(1)[0] == "=" else 2, line)
            continue
        parser.add(_rewrite_links(line, resolve_link, links))
    return ParsedMarkdown(parser.finish(), list(dict.fromkeys(links)), front_matter, parser.h1)


class _SectionParser:
    """Collects lines into sections as headings open and close them."""

    def __init__(self) -> None:
        self.sections: list[Section] = []
        self.path: list[tuple[int, str]] = []
        self.lines: list[str] = []
        self.has_body = False
        self.h1: str | None = None

    def add(self, line: str) -> None:
        self.lines.append(line)
        self.has_body = self.has_body or bool(line.strip())

    def heading(self, level: int, text: str, line: str) -> None:
        self._flush()
        while self.path and self.path[-1][0] >= level:
            self.path.pop()
        self.path.append((level, text))
        if level == 1 and self.h1 is None and text:
            self.h1 = text
        self.lines = [line]

    def can_underline(self) -> bool:
        """A setext underline needs a one-line paragraph right above it."""
        body = self.lines[1:] if self.path else self.lines
        if not body or not body[-1].strip():
            return False
        return len(body) == 1 or not body[-2].strip()

    def underline(self, level: int, underline: str) -> None:
        title = self.lines.pop()
        self.has_body = any(line.strip() for line in (self.lines[1:] if self.path else self.lines))
        self.heading(level, title.strip(), f"{title}\n{underline}")

    def finish(self) -> list[Section]:
        self._flush()
        return self.sections

    def _flush(self) -> None:
        if self.has_body:
            text = _BLANK_LINES.sub("\n\n", "\n".join(self.lines)).strip()
            self.sections.append(Section(text, heading_path=tuple(t for _, t in self.path)))
        self.lines = []
        self.has_body = False


def _rewrite_links(line: str, resolve_link: LinkResolver | None, links: list[str]) -> str:
    """Replace local links by their label (recording their targets) and images by alt."""
    if "](" not in line:
        return line
    # Leave links inside inline code alone: rewrite only the parts between code spans.
    parts: list[str] = []
    last = 0
    for code in _INLINE_CODE.finditer(line):
        parts.append(_LINK.sub(lambda m: _link(m, resolve_link, links), line[last : code.start()]))
        parts.append(code.group(0))
        last = code.end()
    parts.append(_LINK.sub(lambda m: _link(m, resolve_link, links), line[last:]))
    return "".join(parts)


def _link(match: re.Match[str], resolve_link: LinkResolver | None, links: list[str]) -> str:
    image, label, target = match.group(1), match.group(2), match.group(3)
    if image:
        return label
    if _SCHEME.match(target) or target.startswith("//"):
        return match.group(0)  # a web or mail link: keep it as written
    if target.startswith("#"):
        return label
    if resolve_link is not None:
        path = unquote(urlsplit(target).path)
        source = resolve_link(path) if path else None
        if source is not None:
            links.append(source)
    return label


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """The front matter of ``text`` (``{}`` if none) and the text after it."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return {}, text
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            return parse_front_matter(lines[1:end]), "\n".join(lines[end + 1 :])
    return {}, text  # no closing line: a thematic break, not front matter


def parse_front_matter(lines: list[str]) -> dict[str, Any]:
    """A small YAML subset: ``key: value``, ``key: [a, b]`` and ``- item`` lists."""
    meta: dict[str, Any] = {}
    key: str | None = None
    for raw in lines:
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        item = re.match(r"^\s*-\s+(.*)$", line)
        if item and key is not None and isinstance(meta.get(key), list):
            meta[key].append(_scalar(item.group(1)))
            continue
        pair = re.match(r"^([A-Za-z0-9_][\w .-]*?)\s*:(?:\s+(.*))?$", line)
        if pair is None or line[0].isspace():
            continue  # nested structure: not for this parser
        key, value = pair.group(1), (pair.group(2) or "").strip()
        if not value:
            meta[key] = []  # a block list may follow; an empty one is dropped below
        elif value.startswith("[") and value.endswith("]"):
            meta[key] = [_scalar(v) for v in _split_inline_list(value[1:-1])]
        else:
            meta[key] = _scalar(value)
    return {k: v for k, v in meta.items() if v != []}


def _split_inline_list(body: str) -> list[str]:
    return [part.strip() for part in body.split(",") if part.strip()]


def _scalar(value: str) -> Any:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    value = re.sub(r"\s+#.*$", "", value)  # trailing comment
    lowered = value.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    if lowered in ("null", "~"):
        return None
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


__all__ = [
    "LinkResolver",
    "MarkdownLoader",
    "ParsedMarkdown",
    "file_link_resolver",
    "parse_front_matter",
    "parse_markdown",
    "split_front_matter",
]
