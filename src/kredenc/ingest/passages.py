"""Filing plain passages: the light path for text that needs no loader or chunker.

Evaluation corpora, pre-split text and conversation turns (``memory.turns``) are
filed here as ``chunk`` or ``turn`` records in one all-or-nothing batch: no document
record, no edges.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kredenc.checks import check_name, check_scope_id, check_text
from kredenc.errors import InvalidInput
from kredenc.fields import SCOPE_IDS, validate_meta, validate_tags
from kredenc.records import is_new_id, new_id

if TYPE_CHECKING:
    from kredenc.storage.store import Store


def add_passages(
    store: Store,
    ns: str,
    /,
    items: Sequence[Mapping[str, Any]],
    *,
    drawer: str = "passages",
    record_type: str = "chunk",
    ids: Sequence[str] | None = None,
) -> list[str]:
    """File plain passages (``text``, optional ``title``, ``meta``, ``tags``) as one batch.

    The light path for corpora that need no loader or chunker (evaluation sets,
    pre-split text): no document record, no edges. Items may also carry ``context``
    (words the card is found by), ``embed_context``, ``doc_id``, ``ts`` and the scope
    ids ``user_id``, ``agent_id`` and ``run_id``. Returns the new ids: ``ids`` when
    given (one per item, made with :func:`~kredenc.records.new_id` by a caller that
    hands them out before the filing runs), else new ones.
    """
    payloads = passage_payloads(store, ns, items, drawer=drawer, record_type=record_type, ids=ids)
    if not payloads:
        return []
    write_payloads(store, payloads)
    return [p["id"] for p in payloads]


def write_payloads(store: Store, payloads: list[dict[str, Any]]) -> None:
    """Write prepared ``put`` payloads (:func:`passage_payloads`, of one or of several
    filings) as one all-or-nothing batch, embedding their texts in one call."""
    store.write(payloads, batch=True, vectors=store.vectors_for(payloads))


def passage_payloads(
    store: Store,
    ns: str,
    /,
    items: Sequence[Mapping[str, Any]],
    *,
    drawer: str = "passages",
    record_type: str = "chunk",
    ids: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The checked log payloads :func:`add_passages` writes, not yet written (a caller
    that groups several filings into one write hands them to :func:`write_payloads`).
    Bad input is :class:`~kredenc.errors.InvalidInput` here, before anything is written."""
    if record_type not in ("chunk", "turn"):
        raise InvalidInput("record_type must be 'chunk' or 'turn'")
    store.check_writable()
    check_name("drawer", drawer)
    if ids is not None and (
        len(ids) != len(items) or not all(is_new_id(i, record_type) for i in ids)
    ):
        raise InvalidInput(
            f"ids must be one new {record_type} id per item (records.new_id)",
            "leave ids out to have them made",
        )
    ts = store.now()
    limit = store.settings.max_text_chars
    payloads: list[dict[str, Any]] = []
    for n, item in enumerate(items):
        payload: dict[str, Any] = {
            "op": "put",
            "ns": ns,
            "id": ids[n] if ids is not None else new_id(record_type),
            "type": record_type,
            "drawer": drawer,
            "ts": float(item.get("ts", ts)),
            "text": check_text(item.get("text"), limit),
            "source": "ingest",
        }
        if item.get("title"):
            payload["title"] = str(item["title"])
        if item.get("meta"):
            payload["meta"] = validate_meta(item["meta"])
        if item.get("tags"):
            payload["tags"] = validate_tags(item["tags"])
        for key in ("context", "embed_context", "doc_id"):
            if item.get(key):
                payload[key] = str(item[key])
        for key in SCOPE_IDS:
            if item.get(key) is not None:
                payload[key] = check_scope_id(key, item[key])
        payloads.append(payload)
    return payloads
