"""Notion export loader: a "Markdown & CSV" export folder becomes linked documents.

An export looks like this (every name ends in the page's 32-hex id)::

    Acme Wiki 8f3b…e8f9.md              a page
    Acme Wiki 8f3b…e8f9/                its sub-pages
        Onboarding 1a2b…f809.md
        Projects 6f70…a1b2.csv          a database (the exported view)
        Projects 6f70…a1b2_all.csv      the same database, every row
        Projects 6f70…a1b2/             a page per database row
            Search Revamp 7081…c3d4.md

- Every page becomes a document titled by its H1 (else its file name without the id);
  its relative links (URL-encoded, relative to the page's folder) to other pages or
  databases of the export become ``links``, the source of the target.
- A database becomes a small document of its own (its columns and the titles of its
  rows) that links to one document per row. A row is *one document per row*, not one
  table document: a question about one project should find that project's row whole,
  with its column names, not a 1,000-character window of a table. A row that has a
  page in the export is that page (with the row's columns added to its meta); a row
  without one becomes a document of ``Column: value`` lines whose source is
  ``<csv source>#row=<n>``. Of the two CSV files of a database, ``_all`` is read.
- A file of the export that is a symlink leading out of it is skipped and reported,
  as in any folder walked (see :mod:`kredenc.ingest.sources`).
"""

from __future__ import annotations

import csv
import io
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from kredenc.errors import IngestError
from kredenc.ingest.document import LoadedDocument, Section
from kredenc.ingest.loaders.base import Loader, admit, is_url, read_text_file
from kredenc.ingest.loaders.markdown import parse_markdown

logger = logging.getLogger(__name__)

_HEX_NAME = re.compile(r"^(?P<title>.*?)\s+(?P<id>[0-9a-f]{32})(?P<all>_all)?$")
_TITLE_COLUMNS = ("name", "title")


def split_notion_name(stem: str) -> tuple[str, str | None]:
    """``("Page Title", "1a2b…")`` for ``"Page Title 1a2b…"``; ``(stem, None)`` otherwise."""
    match = _HEX_NAME.match(stem)
    if match is None:
        return stem, None
    return match.group("title").strip(), match.group("id")


def is_notion_export(path: Path) -> bool:
    """Whether ``path`` is a folder holding Notion-exported pages or databases."""
    if not path.is_dir():
        return False
    try:
        children = list(path.iterdir())
    except OSError:
        return False
    return any(
        _HEX_NAME.match(child.stem if child.is_file() else child.name)
        and (child.is_dir() or child.suffix.lower() in (".md", ".csv"))
        for child in children
    )


class NotionLoader(Loader):
    """Reads a Notion export folder into one document per page, database and row."""

    name: ClassVar[str] = "notion"
    suffixes: ClassVar[tuple[str, ...]] = ()
    priority: ClassVar[int] = 10  # a Notion export is also a folder of markdown files

    def can_load(self, source: str) -> bool:
        return not is_url(source) and is_notion_export(Path(source))

    def load(self, source: str) -> list[LoadedDocument]:
        root = Path(source).expanduser().resolve()
        if not root.is_dir():
            raise IngestError(
                f"{source}: not a folder", "pass the folder a Notion export was unzipped into"
            )
        export = _Export(root)
        docs = [page for path in export.pages if (page := self._page(export, path)) is not None]
        for database in export.databases.values():
            try:
                docs.extend(self._database(database, docs))
            except IngestError as exc:
                logger.warning("Notion export: database skipped: %s", exc)
        if not docs:
            raise IngestError(
                f"{root}: no pages or databases in this Notion export",
                "export from Notion with the 'Markdown & CSV' format and unzip it",
            )
        return docs

    def _page(self, export: _Export, path: Path) -> LoadedDocument | None:
        try:
            text = read_text_file(path)
        except IngestError as exc:
            logger.warning("Notion export: page skipped: %s", exc)
            return None
        parsed = parse_markdown(text, export.resolver(path.parent))
        name, notion_id = split_notion_name(path.stem)
        meta: dict[str, object] = {**parsed.front_matter, "kind": "page"}
        if notion_id:
            meta["notion_id"] = notion_id
        parent = path.parent.with_name(path.parent.name + ".md")
        if parent in export.sources:
            meta["parent"] = export.sources[parent]
        links = [link for link in parsed.links if link != str(path)]
        return LoadedDocument(str(path), parsed.h1 or name, self.name, parsed.sections, links, meta)

    def _database(self, db: _Database, pages: list[LoadedDocument]) -> list[LoadedDocument]:
        header, rows = _read_csv(db.path)
        title_column = next((h for h in header if h.strip().lower() in _TITLE_COLUMNS), header[0])
        row_pages: dict[str, list[LoadedDocument]] = {}
        for doc in pages:
            if Path(doc.source).parent == db.folder:
                row_pages.setdefault(doc.title, []).append(doc)
        docs: list[LoadedDocument] = []
        row_titles: list[str] = []
        links: list[str] = []
        for number, row in enumerate(rows, start=1):
            props = {k: v.strip() for k, v in row.items() if k and v and v.strip()}
            title = props.get(title_column) or f"{db.title} row {number}"
            row_titles.append(title)
            same_title = row_pages.get(title)
            if same_title:  # rows may share a title: each takes one page
                page = same_title.pop(0)
                page.meta.update(database=db.title, properties=props)
                links.append(page.source)
                continue
            text = "\n".join([f"# {title}", "", *(f"{k}: {v}" for k, v in props.items())])
            row_doc = LoadedDocument(
                f"{db.source}#row={number}",
                title,
                self.name,
                [Section(text, heading_path=(title,))],
                meta={"kind": "row", "database": db.title, "properties": props},
            )
            docs.append(row_doc)
            links.append(row_doc.source)
        summary = "\n".join(
            [
                f"# {db.title}",
                "",
                f"Notion database with {len(rows)} rows; columns: {', '.join(header)}.",
                "",
                *(f"- {t}" for t in row_titles),
            ]
        )
        meta: dict[str, object] = {"kind": "database", "columns": header}
        if db.notion_id:
            meta["notion_id"] = db.notion_id
        section = Section(summary, heading_path=(db.title,))
        return [LoadedDocument(db.source, db.title, self.name, [section], links, meta), *docs]


@dataclass
class _Database:
    path: Path  # the CSV file read (the ``_all`` one where there are two)
    title: str
    notion_id: str | None

    @property
    def source(self) -> str:
        return str(self.path)

    @property
    def folder(self) -> Path:
        """The folder holding the row pages: the CSV's name without ``_all``."""
        return self.path.with_name(self.path.stem.removesuffix("_all"))


class _Export:
    """The files of one export and the source each page or database is known by."""

    def __init__(self, root: Path) -> None:
        files = sorted(
            (
                p.resolve()
                for p in root.rglob("*")
                if p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(root).parts)
                and admit(root, p)  # a symlink out of the export is not read
            ),
            key=str,  # "Page <id>.md" before the "Page <id>/" folder of its sub-pages
        )
        self.pages = [p for p in files if p.suffix.lower() == ".md"]
        self.databases: dict[Path, _Database] = {}
        self.sources: dict[Path, str] = {p: str(p) for p in self.pages}
        for csv_path in (p for p in files if p.suffix.lower() == ".csv"):
            title, notion_id = split_notion_name(csv_path.stem)
            key = csv_path.with_name(csv_path.stem.removesuffix("_all"))
            known = self.databases.get(key)
            if known is None or csv_path.stem.endswith("_all"):
                self.databases[key] = _Database(csv_path, title, notion_id)
        for key, db in self.databases.items():
            for variant in (key.with_name(key.name + ".csv"), key.with_name(key.name + "_all.csv")):
                self.sources[variant] = db.source

    def resolver(self, folder: Path) -> _Resolver:
        return _Resolver(folder, self.sources)


@dataclass
class _Resolver:
    folder: Path
    sources: dict[Path, str]

    def __call__(self, target: str) -> str | None:
        return self.sources.get((self.folder / target).resolve())


def _read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    text = read_text_file(path)
    reader = csv.DictReader(io.StringIO(text))
    try:
        rows = list(reader)
    except csv.Error as exc:
        raise IngestError(
            f"{path}: bad CSV at line {reader.line_num}: {exc}", "export the database again"
        ) from exc
    header = [h for h in (reader.fieldnames or []) if h]
    if not header:
        raise IngestError(f"{path}: empty CSV (no header row)", "export the database again")
    return header, rows


__all__ = ["NotionLoader", "is_notion_export", "split_notion_name"]
