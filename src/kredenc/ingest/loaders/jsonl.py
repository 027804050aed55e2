"""JSON and JSON Lines loader: one document per record.

A record is a JSON object with its text in ``text``, ``content`` or ``body`` (the
first present). Its title is ``title``, else ``id``, else ``<file stem> #<n>``; its
other scalar fields (strings, numbers, booleans, null) go into meta. A ``.jsonl``
(``.ndjson``) file holds a record per line (blank lines are skipped); a ``.json`` file
holds one record, a list of records, or an object with the list under ``records``,
``data``, ``items`` or ``documents``.

A record's source is ``<file>#L<line>`` in a JSON Lines file and ``<file>#<index>``
(from 0) in a JSON list, so re-ingesting a file that grew at the end keeps the
sources of the records it had. A line that is not JSON, a record that is not an
object or has no text raises :class:`~kredenc.errors.IngestError` naming the line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from kredenc.errors import IngestError
from kredenc.ingest.document import LoadedDocument, Section
from kredenc.ingest.loaders.base import Loader, read_text_file, resolve_source

TEXT_FIELDS = ("text", "content", "body")
_LIST_FIELDS = ("records", "data", "items", "documents")
_HINT = 'each record needs a JSON object with a "text" (or "content" or "body") string'


class JsonLoader(Loader):
    """Reads JSON Lines or JSON files of records into one document per record."""

    name: ClassVar[str] = "jsonl"
    suffixes: ClassVar[tuple[str, ...]] = (".jsonl", ".ndjson", ".json")

    def load(self, source: str) -> list[LoadedDocument]:
        path = Path(source)
        text = read_text_file(path)
        base = resolve_source(source)
        if path.suffix.lower() == ".json":
            records = _json_records(text, path)
            return [
                self._document(record, f"{base}#{i}", f"{path}: record {i}", path.stem, i)
                for i, record in enumerate(records)
            ]
        docs: list[LoadedDocument] = []
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            where = f"{path}: line {number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise IngestError(f"{where}: not valid JSON ({exc.msg})", _HINT) from exc
            docs.append(self._document(record, f"{base}#L{number}", where, path.stem, number))
        return docs

    def _document(
        self, record: Any, source: str, where: str, stem: str, number: int
    ) -> LoadedDocument:
        if not isinstance(record, dict):
            raise IngestError(f"{where}: a record must be a JSON object", _HINT)
        field = next((f for f in TEXT_FIELDS if f in record), None)
        if field is None or not isinstance(record[field], str):
            raise IngestError(f"{where}: no text field (one of {', '.join(TEXT_FIELDS)})", _HINT)
        meta = {
            k: v
            for k, v in record.items()
            if k != field and (v is None or isinstance(v, str | int | float | bool))
        }
        title = record.get("title") or record.get("id")
        title = str(title) if isinstance(title, str | int) else f"{stem} #{number}"
        meta.pop("title", None)
        text = record[field].strip()
        sections = [Section(text)] if text else []
        return LoadedDocument(source, title, self.name, sections, meta=meta)


def _json_records(text: str, path: Path) -> list[Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise IngestError(
            f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg})", _HINT
        ) from exc
    if isinstance(data, dict):
        for key in _LIST_FIELDS:
            if isinstance(data.get(key), list):
                return list(data[key])
        return [data]
    if isinstance(data, list):
        return data
    raise IngestError(f"{path}: expected a JSON object or a list of objects", _HINT)


__all__ = ["TEXT_FIELDS", "JsonLoader"]
