"""Export a store as JSON lines and import it again (docs/export.md).

An export is a header line, then per namespace (sorted) every live record as a
``put`` line in filing order (its log payload with its state now: scores, status,
validity) and every edge as an ``edge`` line. Vectors are not exported: they are
derived, and an import embeds with the importing store's model. Forgotten records
are not exported (forgetting is kept); access counts are not either.

An import checks every line before it writes anything, then files the records
through the housekeeper in all-or-nothing batches. ``from_mem0`` turns mem0's
``get_all`` export into the same lines.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kredenc.checks import check_name, check_scope_id
from kredenc.errors import InvalidInput
from kredenc.fields import SCOPE_IDS, SCORES, parse_time, validate_meta, validate_tags
from kredenc.storage.index.reads import RecordQuery

if TYPE_CHECKING:
    from kredenc.storage.store import Store

FORMAT = "kredenc-export"
VERSION = 1
BATCH = 500  # records per all-or-nothing batch on import

# Log bookkeeping a put carries that an import assigns anew.
_LOG_KEYS = ("seq", "txn")
_STATE_TOP = ("status", "valid_from", "valid_to", "episode_id", "task_status")
_TYPES = ("document", "chunk", "memory", "turn")
_SEARCHABLE = ("chunk", "memory", "turn")  # the types with a vector


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def export_lines(store: Store, namespaces: Sequence[str] | None = None) -> Iterator[str]:
    """The export of ``namespaces`` (every namespace with a live record when None),
    one JSON text per line (without the newline), the header first. A namespace named
    that holds no live record gives the header alone (a server's tenant with nothing
    filed yet; telling it which namespaces exist would show it the other tenants')."""
    index = store.index
    chosen = sorted(set(namespaces)) if namespaces else index.namespaces()
    yield _line(
        {
            "format": FORMAT,
            "version": VERSION,
            "embedding_model": store.meta.model_id,
            "dim": store.meta.dim,
            "namespaces": chosen,
        }
    )
    for ns in chosen:
        for rid, offset in index.list_records(ns, RecordQuery()):
            found = index.lookup(ns, rid)
            if found is None or found.deleted:  # forgotten meanwhile
                continue
            yield _line(_current(store.haystack.read(offset), found.state))
        for src, dst, rel, weight in index.edges_of(ns):
            yield _line(
                {"op": "edge", "ns": ns, "src": src, "dst": dst, "rel": rel, "weight": weight}
            )


def _current(payload: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """A put payload with the record's state now (scores and status changed since)."""
    out = {k: v for k, v in payload.items() if k not in _LOG_KEYS}
    out["op"] = "put"
    if out.get("type") == "memory" or "scores" in out:
        out["scores"] = {k: float(state[k]) for k in SCORES}
    for key in _STATE_TOP:
        value = state.get(key)
        if value is None:
            out.pop(key, None)
        elif key != "status" or out.get("type") == "memory" or "status" in out:
            out[key] = value
    return out


@dataclass
class ImportReport:
    """What an import filed and skipped."""

    records: int = 0
    edges: int = 0
    skipped: int = 0
    held_edges: int = 0  # edges the store already held as they were (not filed again)
    batches: int = 0
    namespaces: list[str] = field(default_factory=list)
    embedding_model: str | None = None


def parse_lines(
    lines: Iterable[str], *, name: str = "input", namespace: str | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the records of an export, every line checked (nothing is
    written): a bad line raises ``InvalidInput`` naming it. With ``namespace``, every
    record and edge is taken into that namespace whatever its line names (a server's
    tenant imports into its own namespace only)."""
    header: dict[str, Any] | None = None
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, raw in enumerate(lines, 1):
        text = raw.strip()
        if not text:
            continue
        where = f"{name} line {number}"
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInput(
                f"{where} is not JSON ({exc.msg})", "each line must be one JSON object"
            ) from None
        if not isinstance(obj, dict):
            raise InvalidInput(f"{where} is not a JSON object", "each line must be one object")
        if header is None:
            if obj.get("format") != FORMAT:
                raise InvalidInput(
                    f"{where} is not a kredenc export header",
                    "the first line must name the format (kredenc export; for mem0's JSON "
                    "use --from mem0)",
                )
            if not isinstance(obj.get("version"), int) or obj["version"] > VERSION:
                raise InvalidInput(
                    f"{where}: export format version {obj.get('version')!r} is not supported",
                    f"this kredenc reads version {VERSION} and older; upgrade kredenc",
                )
            header = obj
            continue
        if namespace is not None:
            obj["ns"] = namespace
        items.append(_checked(obj, where, seen))
    if header is None:
        raise InvalidInput(f"{name} is empty", "give a file written by 'kredenc export'")
    return header, items


def _checked(obj: dict[str, Any], where: str, seen: set[str]) -> dict[str, Any]:
    op = obj.get("op")
    try:
        check_name("namespace", obj.get("ns"))
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc.message}", "every line names its namespace") from None
    if op == "edge":
        for key in ("src", "dst", "rel"):
            if not isinstance(obj.get(key), str) or not obj[key]:
                raise InvalidInput(f"{where}: an edge needs a string {key!r}")
        if isinstance(obj.get("weight", 1.0), bool) or not isinstance(
            obj.get("weight", 1.0), int | float
        ):
            raise InvalidInput(f"{where}: an edge's weight must be a number")
        return obj
    if op != "put":
        raise InvalidInput(f"{where}: op {op!r} is neither 'put' nor 'edge'")
    rid = obj.get("id")
    if not isinstance(rid, str) or not rid or len(rid) > 200:
        raise InvalidInput(f"{where}: a record needs a string id of at most 200 characters")
    if rid in seen:
        raise InvalidInput(f"{where}: id {rid!r} appears twice", "each record once")
    seen.add(rid)
    if obj.get("type") not in _TYPES:
        raise InvalidInput(f"{where}: type {obj.get('type')!r} is not one of {', '.join(_TYPES)}")
    try:
        check_name("drawer", obj.get("drawer"))
        if not isinstance(obj.get("text", ""), str):
            raise InvalidInput("text must be a string")
        if not isinstance(obj.get("ts", 0.0), int | float):
            raise InvalidInput("ts must be Unix seconds")
        validate_tags(obj.get("tags") or [])
        validate_meta(obj.get("meta"))
        for key in SCOPE_IDS:
            check_scope_id(key, obj.get(key))
        for key, value in (obj.get("scores") or {}).items():
            if key not in SCORES or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise InvalidInput(f"score {key}={value!r} is not a known score in [0, 1]")
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc.message}", exc.hint) from None
    return obj


def import_items(
    store: Store,
    items: Sequence[dict[str, Any]],
    *,
    skip_existing: bool = False,
    batch_size: int = BATCH,
) -> ImportReport:
    """File checked export items (``parse_lines``) into ``store`` in all-or-nothing
    batches; ids kept. An id already in the store (in any namespace, forgotten ones
    included) is refused before anything is written, or skipped with
    ``skip_existing`` (with the edges that touch only skipped or absent records kept,
    but not those the store already holds with the same weight: ``held_edges``)."""
    store.check_writable()
    puts = [o for o in items if o["op"] == "put"]
    taken = store.index.taken_ids([o["id"] for o in puts])
    if taken and not skip_existing:
        first = sorted(taken)[0]
        raise InvalidInput(
            f"{len(taken)} record id(s) already exist in the store (e.g. {first!r})",
            "import into a new store, or leave those records out (the CLI's"
            " --skip-existing; REST ?skip_existing=true; skip_existing=True in Python)",
        )
    report = ImportReport()
    held = _held_edges(store, items) if taken else set()
    payloads: list[dict[str, Any]] = []
    for obj in items:
        if obj["op"] == "put" and obj["id"] in taken:
            report.skipped += 1
            continue
        if obj["op"] == "edge" and _edge_key(obj) in held:
            report.held_edges += 1
            continue
        payloads.append({k: v for k, v in obj.items() if k not in _LOG_KEYS})
    report.namespaces = sorted({p["ns"] for p in payloads})
    for start in range(0, len(payloads), max(1, batch_size)):
        batch = payloads[start : start + max(1, batch_size)]
        searchable = [p for p in batch if p["op"] == "put" and p["type"] in _SEARCHABLE]
        vectors = store.vectors_for(searchable) if searchable else None
        store.write(batch, batch=len(batch) > 1, vectors=vectors)
        report.batches += 1
    report.records = sum(1 for p in payloads if p["op"] == "put")
    report.edges = len(payloads) - report.records
    return report


def _edge_key(obj: dict[str, Any]) -> tuple[str, str, str, str, float]:
    return (obj["ns"], obj["src"], obj["dst"], obj["rel"], float(obj.get("weight", 1.0)))


def _held_edges(
    store: Store, items: Sequence[dict[str, Any]]
) -> set[tuple[str, str, str, str, float]]:
    """The edges of the items' namespaces that the store holds (an import that skips
    existing records files again only the edges that would change something)."""
    spaces = {o["ns"] for o in items if o["op"] == "edge"}
    return {
        (ns, src, dst, rel, float(weight))
        for ns in spaces
        for src, dst, rel, weight in store.index.edges_of(ns)
    }


def from_mem0(data: Any, ns: str, *, now: float) -> list[dict[str, Any]]:
    """Export items for mem0's ``get_all`` JSON: a list of memories, or an object
    with ``results`` (mem0 v1.1+). Each becomes a ``fact`` memory keeping mem0's id;
    ``user_id``, ``agent_id`` and ``run_id`` become its own fields (filterable as
    kredenc's are), ``app_id``, ``hash``, ``updated_at`` and ``metadata`` go to
    ``meta``, ``categories`` to tags, ``created_at`` to its time."""
    rows = data.get("results", data.get("memories")) if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise InvalidInput(
            "mem0 JSON must be a list of memories or an object with 'results'",
            "give the JSON that mem0's get_all returns",
        )
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, row in enumerate(rows, 1):
        where = f"mem0 memory {number}"
        if not isinstance(row, dict) or not isinstance(row.get("memory"), str):
            raise InvalidInput(f"{where} has no 'memory' text", "each item needs 'memory'")
        rid = str(row.get("id") or uuid.uuid4())
        meta: dict[str, Any] = dict(row.get("metadata") or {})
        for key in ("app_id", "hash", "updated_at"):
            if row.get(key) is not None:
                meta[key] = row[key]
        try:
            scope = {k: check_scope_id(f"{where} {k}", _id_text(row.get(k))) for k in SCOPE_IDS}
            ts = parse_time(row.get("created_at"), f"{where} created_at")
            tags = validate_tags([str(c) for c in row.get("categories") or []])
            meta = validate_meta(meta)
        except InvalidInput as exc:
            raise InvalidInput(exc.message, exc.hint) from None
        item = {
            "op": "put",
            "ns": ns,
            "id": rid,
            "type": "memory",
            "drawer": "memories",
            "kind": "fact",
            "ts": now if ts is None else ts,
            "text": row["memory"],
            "tags": tags,
            "meta": meta,
            "scores": {k: 0.5 for k in SCORES},
            "status": "unvalidated",
            "source": "user",
        }
        item.update({k: v for k, v in scope.items() if v is not None})
        items.append(_checked(item, where, seen))
    return items


def _id_text(value: Any) -> Any:
    """mem0's ids as text: a number (an integer user id) reads as its digits."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value
