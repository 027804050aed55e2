"""What both retriever adapters share: the search options they pass through, the call
on whichever handle they were given, and a hit's metadata (library-free).

A handle is a :class:`~kredenc.Kredenc` (or a namespace view of one), a
:class:`~kredenc.Client` (a running ``kredenc serve``) or an
:class:`~kredenc.AsyncKredenc`. The sync call uses the handle's ``search`` (an
``AsyncKredenc``'s sync core); the async call awaits an ``AsyncKredenc``'s ``search`` and
runs the others' on a worker thread, as ``AsyncKredenc`` itself does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from kredenc.aio import AsyncKredenc
from kredenc.errors import InvalidInput
from kredenc.records import Hit

if TYPE_CHECKING:
    from kredenc.client import Client
    from kredenc.engine import Kredenc


@dataclass(frozen=True)
class SearchOptions:
    """The ``search`` arguments of one retriever: how many hits, the mode, the scope ids,
    tags (every one must be carried), ``where`` (``meta`` equality), ``min_score`` (the
    calibrated relevance floor); ``extra``: any other ``search`` argument."""

    k: int = 4
    mode: str = "hybrid"
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    tags: tuple[str, ...] = ()
    where: Mapping[str, Any] | None = None
    min_score: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def merged(self, overrides: Mapping[str, Any]) -> SearchOptions:
        """These options with a call's ``overrides`` (option names only; ``None`` leaves
        one as it is). An unknown name is refused, naming the ones there are."""
        unknown = sorted(set(overrides) - set(OPTIONS))
        if unknown:
            raise InvalidInput(
                f"unknown search option {', '.join(unknown)}",
                f"pass one of {', '.join(OPTIONS)} (others through search_kwargs)",
            )
        given = {key: value for key, value in overrides.items() if value is not None}
        if "tags" in given:
            given["tags"] = _names("tags", given["tags"])
        return replace(self, **given)

    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``search``."""
        out: dict[str, Any] = dict(self.extra)
        for key in OPTIONS:
            value = getattr(self, key)
            if key == "tags":
                value = list(value) or None
            if value is not None:
                out[key] = value
        return out


#: The search arguments a retriever passes through, set once or per call: the fields of
#: :class:`SearchOptions` (each a keyword of ``Kredenc.search``), so an adapter that
#: builds its options from this tuple passes a new one without a change.
OPTIONS = tuple(f.name for f in fields(SearchOptions) if f.name != "extra")


def _names(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"{key} must be a list of strings, not {value!r}")
    return tuple(value)


def search_options(
    *, search_kwargs: Mapping[str, Any] | None = None, **options: Any
) -> SearchOptions:
    """A retriever's options: ``options`` by the names of :data:`OPTIONS` (``None``
    leaves the default), ``search_kwargs`` any other ``search`` argument (``types``,
    ``hops``, ``per_document``, ``drawer``, ``source``, ``pages``...)."""
    extra = dict(search_kwargs or {})
    clash = sorted(set(extra) & {*OPTIONS, "query"})
    if clash:
        raise InvalidInput(
            f"search_kwargs repeats {', '.join(clash)}", "pass those as the retriever's own"
        )
    return SearchOptions(extra=extra).merged(options)


def search(kb: Kredenc | Client | AsyncKredenc, query: str, options: SearchOptions) -> list[Hit]:
    """The handle's search, synchronously."""
    sync = kb.sync if isinstance(kb, AsyncKredenc) else kb
    return sync.search(query, **options.kwargs())


async def asearch(
    kb: Kredenc | Client | AsyncKredenc, query: str, options: SearchOptions
) -> list[Hit]:
    """The handle's search, awaited (on a worker thread unless it is an AsyncKredenc)."""
    if isinstance(kb, AsyncKredenc):
        return await kb.search(query, **options.kwargs())
    return await asyncio.to_thread(kb.search, query, **options.kwargs())


def hit_metadata(hit: Hit) -> dict[str, Any]:
    """A hit's provenance as flat metadata: ``id``, ``type``, ``kind``, ``drawer``,
    ``score`` (the rank score: the fused score, 1.0 for the query's best, plus in the top
    12 the bonus for query terms the hits above lack), ``relevance`` (the
    calibrated probability in [0, 1], comparable across queries; absent when the search
    did not compute it), ``legs`` (each leg's rank and raw score), and where there is one:
    ``title``, ``file`` (the source path or URL), ``page``, ``start_s``, ``doc_id``,
    ``created_at``, ``user_id``, ``agent_id``, ``run_id``, ``tags``, ``graph`` (the edge
    that brought a graph neighbour) and ``meta`` (the record's own)."""
    out: dict[str, Any] = {
        "id": hit.id,
        "type": hit.type,
        "kind": hit.kind,
        "drawer": hit.drawer,
        "score": hit.score,
        "legs": {name: {"rank": leg.rank, "score": leg.score} for name, leg in hit.legs.items()},
    }
    optional: dict[str, Any] = {
        "relevance": hit.relevance,
        "title": hit.title or None,
        "file": hit.origin or None,
        "page": hit.page,
        "start_s": hit.start_s,
        "doc_id": hit.doc_id,
        "created_at": hit.created_at or None,
        "user_id": hit.user_id,
        "agent_id": hit.agent_id,
        "run_id": hit.run_id,
        "tags": list(hit.tags) or None,
        "graph": hit.graph,
        "meta": dict(hit.meta) or None,
    }
    out.update({key: value for key, value in optional.items() if value is not None})
    return out
