"""Filing and changing memories: remember, score, forget, relate, delete a document (and
reading one back).

Every function takes the open :class:`~kredenc.storage.store.Store` and the namespace
``ns``; the :class:`~kredenc.engine.Kredenc` facade calls them with its own. Input is
checked before anything is written, and each call writes its records as one request
to the housekeeper (an all-or-nothing batch where there are several).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kredenc.checks import check_name, check_scope_id, check_text, check_utf8
from kredenc.errors import InvalidInput, NotFound, ReadOnlyRecord
from kredenc.fields import SCOPE_IDS, SCORES, validate_fields, validate_meta
from kredenc.memory.relations import check_relation, edge_payloads
from kredenc.records import Memory, new_id

if TYPE_CHECKING:
    from kredenc.storage.index.sqlite import IndexedRecord
    from kredenc.storage.store import Store

_OPTIONAL = ("read_only", "episode_id", "task_status", "valid_from", "valid_to")


def memory_payload(
    store: Store,
    ns: str,
    text: object,
    kind: str,
    drawer: str,
    tags: Sequence[str],
    meta: Mapping[str, Any] | None,
    fields: Mapping[str, Any],
    *,
    strict: bool,
) -> dict[str, Any]:
    """A validated ``put`` payload for a new memory in ``ns`` (not yet written)."""
    checked_text = check_text(text, store.settings.max_text_chars)
    check_name("drawer", drawer)
    rest = {k: v for k, v in fields.items() if k not in SCOPE_IDS}
    scope = {k: check_scope_id(k, fields.get(k)) for k in SCOPE_IDS}
    values = validate_fields({**rest, "kind": kind, "tags": tags}, strict=strict)
    payload: dict[str, Any] = {
        "op": "put",
        "ns": ns,
        "id": new_id("memory"),
        "type": "memory",
        "drawer": drawer,
        "kind": values["kind"],
        "ts": store.now(),
        "text": checked_text,
        "tags": values["tags"],
        "meta": validate_meta(meta),
        "scores": {k: values[k] for k in SCORES},
        "status": values["status"],
        "source": values["source"],
    }
    for key in _OPTIONAL:
        if values[key] not in (None, False):
            payload[key] = values[key]
    payload.update({k: v for k, v in scope.items() if v is not None})
    return payload


def remember(
    store: Store,
    ns: str,
    /,
    text: str,
    *,
    kind: str = "note",
    drawer: str = "memories",
    tags: Sequence[str] = (),
    meta: Mapping[str, Any] | None = None,
    **fields: Any,
) -> Memory:
    """File one memory; returns it once it is durable and searchable.

    ``fields`` are the memory's scores and state: importance, confidence,
    stability (in [0, 1]), status, source, read_only, episode_id, task_status,
    valid_from, valid_to; and ``user_id``, ``agent_id`` and ``run_id``, whose memory
    it is inside the namespace (search, recall, the context graph and listing filter
    on them; fixed once filed). Invalid values are rejected; nothing is written.
    """
    store.check_writable()
    payload = memory_payload(store, ns, text, kind, drawer, tags, meta, fields, strict=True)
    vectors = store.vectors_for([payload])
    (placed,) = store.write([payload], vectors=vectors)
    return Memory.from_payload(payload, placed.offset)


def remember_many(
    store: Store,
    ns: str,
    /,
    items: Sequence[Mapping[str, Any]],
    *,
    drawer: str = "memories",
    strict: bool = True,
) -> list[Memory]:
    """File many memories as one all-or-nothing batch (one fsync).

    Each item is a mapping with ``text`` and any of remember()'s keywords (``user_id``,
    ``agent_id`` and ``run_id`` included).
    ``strict=False`` clamps and coerces bad fields with a warning instead.
    """
    store.check_writable()
    payloads = []
    for item in items:
        rest = dict(item)
        text = rest.pop("text", None)
        payloads.append(
            memory_payload(
                store,
                ns,
                text,
                rest.pop("kind", "note"),
                rest.pop("drawer", drawer),
                rest.pop("tags", ()),
                rest.pop("meta", None),
                rest,
                strict=strict,
            )
        )
    if not payloads:
        return []
    vectors = store.vectors_for(payloads)
    placed = store.write(payloads, batch=True, vectors=vectors)
    return [Memory.from_payload(p, w.offset) for p, w in zip(payloads, placed, strict=True)]


def live_record(store: Store, ns: str, record_id: str) -> IndexedRecord:
    """The live record ``record_id`` of ``ns`` as the index holds it, or NotFound."""
    if not isinstance(record_id, str):
        raise InvalidInput("record id must be a string")
    check_utf8("record id", record_id)
    found = store.index.lookup(ns, record_id)
    if found is None or found.deleted:
        raise NotFound(
            f"no record {record_id!r} in namespace {ns!r}",
            "it was never filed in this namespace, or was forgotten: check the id and"
            " the namespace ('kredenc list memories' or 'list documents' lists its ids)",
        )
    return found


def get(store: Store, ns: str, /, record_id: str) -> Memory:
    """A live record (any type) read back from the log, with its state now."""
    found = live_record(store, ns, record_id)
    return Memory.from_payload(store.haystack.read(found.offset), found.offset, found.state)


def score(
    store: Store, ns: str, /, record_id: str, *, reason: str | None = None, **fields: Any
) -> Memory:
    """Change a memory's scores or state; only the fields given change."""
    store.check_writable()
    if not fields:
        raise InvalidInput("nothing to change", "give at least one field, e.g. importance")
    fixed = ("kind", "tags", "read_only", "source", *SCOPE_IDS)
    if any(key in fields for key in fixed):
        raise InvalidInput(
            "kind, tags, source, read_only, user_id, agent_id and run_id cannot be changed"
            " by score",
            "forget the memory and remember it again with the new value",
        )
    values = validate_fields(fields, strict=True, partial=True)
    found = live_record(store, ns, record_id)
    if found.state["read_only"]:
        raise ReadOnlyRecord(f"memory {record_id} is read-only", "it cannot be changed")
    if "task_status" in values and found.state["kind"] != "task":
        raise InvalidInput("task_status is only for memories of kind 'task'")
    payload: dict[str, Any] = {"op": "score", "ns": ns, "id": record_id}
    payload.update(values)
    payload["ts"] = store.now()
    if reason:
        payload["reason"] = reason
    store.write([payload])
    return get(store, ns, record_id)


def forget(store: Store, ns: str, /, record_id: str) -> None:
    """Hide a record everywhere at once (a tombstone in the log).

    Edges touching it go with it; memories ``derived_from`` it are marked
    ``disputed`` (with the reason) in the same batch, so nothing is silently
    orphaned. A document goes with every chunk of it (its text is in them), as
    :func:`delete_document`; a chunk goes alone.
    """
    store.check_writable()
    found = live_record(store, ns, record_id)
    if found.state["read_only"]:
        raise ReadOnlyRecord(f"memory {record_id} is read-only", "it cannot be forgotten")
    if found.state["type"] == "document":
        delete_document(store, ns, record_id)
        return
    payloads = _tombstones(store, ns, [record_id])
    store.write(payloads, batch=len(payloads) > 1)


def delete_document(store: Store, ns: str, /, doc_id: str) -> int:
    """Forget a filed document and every chunk of it as one batch; how many records.

    The whole document gone from search, listing, recall and export at once, as a
    re-ingest removes the version it replaces (``ingest.pipeline``), with the memories
    ``derived_from`` any of them marked ``disputed``; :func:`forget` of a document id
    does this too. A record that is not a document is ``NotFound`` (as a missing one).
    """
    store.check_writable()
    found = live_record(store, ns, doc_id)
    if found.state["type"] != "document":
        raise NotFound(
            f"no document {doc_id!r} in namespace {ns!r}",
            "give the id of a document (list them with 'kredenc list documents')",
        )
    ids = [*store.index.parts_of(ns, doc_id), doc_id]
    payloads = _tombstones(store, ns, ids)
    store.write(payloads, batch=len(payloads) > 1)
    return len(ids)


def _tombstones(store: Store, ns: str, ids: Sequence[str]) -> list[dict[str, Any]]:
    """Tombstones of ``ids``, and the memories derived from any of them disputed."""
    ts = store.now()
    seen = set(ids)  # a derived memory is disputed once, and never one being forgotten
    payloads: list[dict[str, Any]] = [
        {"op": "tombstone", "ns": ns, "id": rid, "ts": ts} for rid in ids
    ]
    for rid in ids:
        for derived in store.index.sources_of(ns, rid, "derived_from"):
            if derived in seen:
                continue
            seen.add(derived)
            payloads.append(
                {
                    "op": "score",
                    "ns": ns,
                    "id": derived,
                    "status": "disputed",
                    "reason": f"derived from {rid}, which was forgotten",
                    "ts": ts,
                }
            )
    return payloads


def relate(
    store: Store,
    ns: str,
    /,
    src: str,
    dst: str,
    rel: str,
    *,
    weight: float = 1.0,
    remove: bool = False,
) -> None:
    """Add (or with ``remove`` delete) a typed edge between two records."""
    store.check_writable()
    weight = check_relation(rel, weight)
    if src == dst:
        raise InvalidInput(
            "a record cannot be related to itself", "relate it to another record's id"
        )
    for rid in (src, dst):
        live_record(store, ns, rid)
    payloads = edge_payloads(ns, src, dst, rel, weight, store.now(), remove=remove)
    store.write(payloads, batch=len(payloads) > 1)
