"""The operation cache: searches, LLM calls, judge results and the deterministic roles'
own results, by the SHA-256 of what shapes them.

Two tiers: an in-process LRU (bounded by entries and by bytes of JSON) over a
persistent :class:`~kredenc.storage.base.CacheTier` (``<store>/opcache.db``, the
SQLite tier in ``storage/opcache.py``; with ``opcache_redis_url`` set, Redis over it,
``storage/opcache_chain.py``); a value found only in the persistent tier is copied
into the LRU (backfill). Values are JSON: a caller always gets its own fresh
objects, never one another caller may change.

What a key holds (:meth:`OpCache.key`: SHA-256 over the canonical JSON of the kind
and the parts):

- ``search``: the namespace, its **generation** over the types searched (it changes
  on every write that could change the result: ``Index.generation``; the edges'
  too when the search expands the graph), the query, the caller's options, the
  search settings, the embedding model and the reranker.
- ``llm``: the model's ``fingerprint()`` (provider, model, base URL), the messages,
  the schema and the call's options. Only temperature-0 calls are cached (a sampled
  reply is not a function of its inputs).
- ``judge``: the judge's ``fingerprint()`` (or its class, and its LLM's fingerprint),
  the question, the answer and the contexts.
- ``role``: a deterministic role's result (:func:`cached_role`): the role and its
  implementation, the settings and constants that shape it (named by the role), the
  embedding model, its inputs (chunks as :func:`hits_part`: ids, types, titles, text
  digests) and, for a role that reads the store beyond its inputs (verify's evidence
  search), the namespace and its generation over the types it reads.
- ``embed``: not here. Document vectors are cached by the Store in
  ``embeddings.db`` by text hash (they survive rebuilds); query vectors in the
  Store's in-process LRU (``Store.embed_query``). A second copy would only cost.

Never the assembled answer: an ask always runs its loop, on cached inputs, builds its
Answer and files its turns.

The roles call :func:`cached_search`, :func:`cached_complete`, :func:`cached_judge`
and :func:`cached_role` (with ``services.cache`` None they call straight through), so
no role builds a key by hand. Inside :func:`one_ask` (the orchestrator's run) a text
is hashed and a generation read once per ask. A search hit in the in-memory tier is a
copy of its decoded hits (:meth:`OpCache.get_copy`), not a JSON decode. Each helper
counts a hit or a miss in the :class:`Tally` of the innermost :func:`counting` block:
the orchestrator wraps each tool's run in one and reports the counts in
``ToolResult.cache_hits``/``cache_misses``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, is_dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from kredenc.errors import InvalidInput, ProviderError, StoreClosed
from kredenc.grounding.base import Evaluation, Judge
from kredenc.loop.cache_json import (
    completion_from_json,
    completion_to_json,
    copy_hits,
    evaluation_from_json,
    evaluation_to_json,
    hit_from_json,
    hit_to_json,
)
from kredenc.loop.tracing import span
from kredenc.providers.llm.base import Completion, Message
from kredenc.providers.llm.structured import check_reply, unusable
from kredenc.records import Hit
from kredenc.retrieve import query as queries
from kredenc.storage.base import CacheTier

if TYPE_CHECKING:
    from kredenc.loop.tool import Services
    from kredenc.storage.store import Store

log = logging.getLogger(__name__)

T = TypeVar("T")

KINDS = ("search", "llm", "judge", "embed", "role")
#: Part of every key: bump it when what a kind's value means changes.
CACHE_VERSION = 2


# -- keys ---------------------------------------------------------------------
def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    raise InvalidInput(
        f"a cache key part of type {type(value).__name__} is not JSON",
        "pass strings, numbers, lists and dicts (or dataclasses) to the cached call",
    )


#: orjson's options for a key: keys sorted (an int key as its text), dataclasses and
#: datetimes through :func:`_plain` (as ``json.dumps(default=_plain)`` did).
_KEY_OPTIONS = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_NON_STR_KEYS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
#: The standard library's encoder for what orjson refuses (an int past 64 bits).
_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_plain
)


def canonical(parts: Sequence[Any]) -> bytes:
    """The parts as canonical JSON: sorted keys, no spaces, tuples as lists, UTF-8.

    orjson writes it, ~15x faster than the standard library (a repeated ask builds a
    dozen keys): the bytes of ``json.dumps(sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`` but for a float's exponent (``1.5e-7``, not ``1.5e-07``:
    such a key written before reads as a miss, never as another entry). A part it
    refuses (an int past 64 bits) goes through the standard library's encoder. A float
    NaN would be written as null, as None is: no key holds one (settings are
    range-checked; inputs are texts, ids and ranks)."""
    try:
        return orjson.dumps(list(parts), default=_plain, option=_KEY_OPTIONS)
    except orjson.JSONEncodeError as exc:
        if isinstance(exc.__cause__, InvalidInput):  # _plain's refusal, as it was
            raise exc.__cause__ from None
        return _ENCODER.encode(list(parts)).encode("utf-8")


def digest(parts: Sequence[Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of ``parts``: a long or nested part of a key
    stands in it as these 64 characters (what a key holds is unchanged: a digest
    changes whenever the parts do)."""
    return hashlib.sha256(canonical(parts)).hexdigest()


@lru_cache(maxsize=256)
def _frozen_plain(value: Any) -> str:
    return digest([asdict(value)])


def frozen_digest(value: Any) -> str:
    """A dataclass of settings as the :func:`digest` of its fields for a key, remembered
    by value when it is frozen and hashable (``asdict`` deep-copies every field: ~100 us
    for the judge's parameters, on every ask)."""
    try:
        return _frozen_plain(value)
    except TypeError:
        return digest([asdict(value)])


def make_key(kind: str, *parts: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of the kind, :data:`CACHE_VERSION` and parts."""
    return hashlib.sha256(canonical([kind, CACHE_VERSION, *parts])).hexdigest()


# -- counting -------------------------------------------------------------------
@dataclass
class Tally:
    """Hits and misses counted inside one :func:`counting` block."""

    hits: int = 0
    misses: int = 0


_TALLY: ContextVar[Tally | None] = ContextVar("kredenc_cache_tally", default=None)


class counting:  # used as a function: ``with counting() as tally``
    """Count the cache's hits and misses of the calls made in this block (this thread
    or task); an enclosing block counts them as well. A class, not a generator: the
    orchestrator opens one per tool of every ask."""

    __slots__ = ("_outer", "_tally", "_token")

    def __enter__(self) -> Tally:
        self._outer = _TALLY.get()
        self._tally = Tally()
        self._token = _TALLY.set(self._tally)
        return self._tally

    def __exit__(self, *exc: object) -> None:
        _TALLY.reset(self._token)
        outer, tally = self._outer, self._tally
        if outer is not None:
            outer.hits += tally.hits
            outer.misses += tally.misses


# -- the tiers ------------------------------------------------------------------
class LruTier:
    """JSON text by (kind, key) in memory: at most ``entries`` entries and ``max_bytes``
    characters of values; the least recently used go first. Thread-safe.

    Beside an entry's text it may keep the decoded value (:meth:`attach`), counted at
    the text's size again: a caller that copies it (:meth:`OpCache.get_copy`) skips the
    JSON decode, which is most of a search hit's cost."""

    def __init__(self, entries: int, max_bytes: int) -> None:
        self.entries = entries
        self.max_bytes = max_bytes
        self._data: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._objects: dict[tuple[str, str], Any] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, kind: str, key: str) -> str | None:
        with self._lock:
            value = self._data.get((kind, key))
            if value is not None:
                self._data.move_to_end((kind, key))
            return value

    def get_object(self, kind: str, key: str) -> Any | None:
        """The decoded value attached to the entry, or None (no entry, or none attached)."""
        with self._lock:
            found = self._objects.get((kind, key))
            if found is not None:
                self._data.move_to_end((kind, key))
            return found

    def attach(self, kind: str, key: str, obj: Any) -> None:
        """Keep ``obj`` (the decoded value, never handed out itself) beside the entry."""
        with self._lock:
            text = self._data.get((kind, key))
            if text is None or (kind, key) in self._objects:
                return
            self._objects[(kind, key)] = obj
            self._bytes += len(text)
            self._evict()

    def put(self, kind: str, key: str, value: str) -> None:
        if len(value) > self.max_bytes or self.entries <= 0:
            return
        with self._lock:
            self._drop((kind, key))
            self._data[(kind, key)] = value
            self._bytes += len(value)
            self._evict()

    def _drop(self, entry: tuple[str, str]) -> None:
        old = self._data.pop(entry, None)
        if old is not None:
            self._bytes -= len(old) * (2 if self._objects.pop(entry, None) is not None else 1)

    def _evict(self) -> None:
        while self._data and (len(self._data) > self.entries or self._bytes > self.max_bytes):
            self._drop(next(iter(self._data)))

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._objects.clear()
            self._bytes = 0

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"entries": len(self._data), "bytes": self._bytes}


Generation = Callable[..., int]


@dataclass
class KindStats:
    hits: int = 0
    misses: int = 0
    backfills: int = 0


@dataclass
class OpCache:
    """The two tiers and the store's generations. ``services.cache`` is one of these
    (:func:`cache_for` makes one per open store)."""

    tier: CacheTier | None = None
    entries: int = 4096
    max_bytes: int = 64 * 1024 * 1024
    generation_of: Generation | None = None
    lru: LruTier = field(init=False)
    counts: dict[str, KindStats] = field(init=False)

    def __post_init__(self) -> None:
        self.lru = LruTier(self.entries, self.max_bytes)
        self.counts = {kind: KindStats() for kind in KINDS}
        self._epoch = self.tier.epoch if self.tier is not None else 0
        self._lock = threading.Lock()
        if self.tier is not None:
            self.tier.listen(self._emptied)  # a rebuild or purge empties this tier at once

    def _emptied(self) -> None:
        self.lru.clear()
        _DIGESTS.clear()  # they are keyed by texts: a purge leaves none of them held

    def key(self, kind: str, *parts: Any) -> str:
        """SHA-256 over the canonical JSON of ``parts``; include the model and settings
        fingerprint that shape the value."""
        return make_key(kind, *parts)

    def generation(self, ns: str, types: Sequence[str] = (), *, edges: bool = False) -> int:
        """Changes whenever a write could change a search of ``ns`` over ``types``."""
        if self.generation_of is None:
            return 0
        return int(self.generation_of(ns, tuple(types), edges=edges))

    def get(self, kind: str, key: str) -> Any | None:
        """The value under (kind, key), or None; counts a hit or a miss."""
        self._follow_epoch()
        text = self.lru.get(kind, key)
        if text is None and self.tier is not None:
            text = self.tier.get(kind, key)
            if text is not None:
                self.lru.put(kind, key, text)  # backfill: the next get stays in process
                self._stats(kind).backfills += 1
        if text is None:
            self._count(kind, hit=False)
            return None
        try:
            value = orjson.loads(text)
        except ValueError:
            log.warning("operation cache: an unreadable %s entry is a miss", kind)
            self._count(kind, hit=False)
            return None
        self._count(kind, hit=True)
        return value

    def get_copy(
        self, kind: str, key: str, decode: Callable[[Any], T], copy: Callable[[T], T]
    ) -> T | None:
        """``decode(get(kind, key))`` or None, without the JSON decode when the in-memory
        tier holds the decoded value: the caller gets ``copy(value)``, its own objects
        (``copy`` must copy whatever a caller could change). Counts like :meth:`get`."""
        self._follow_epoch()
        obj = self.lru.get_object(kind, key)
        if obj is not None:
            self._count(kind, hit=True)
            return copy(obj)
        found = self.get(kind, key)
        if found is None:
            return None
        value = decode(found)
        self.lru.attach(kind, key, copy(value))
        return value

    def put(self, kind: str, key: str, value: Any) -> None:
        """Store ``value`` (JSON-serialisable) in both tiers."""
        self._follow_epoch()
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise InvalidInput(
                f"a {kind} cache value is not JSON ({exc})", "cache JSON values only"
            ) from None
        self.lru.put(kind, key, text)
        if self.tier is not None:
            self.tier.put(kind, key, text)

    def clear(self) -> None:
        """Empty both tiers."""
        self.lru.clear()
        if self.tier is not None:
            self.tier.clear()

    def stats(self) -> dict[str, Any]:
        """Hits, misses and backfills per kind, and what the in-memory tier holds."""
        return {
            "kinds": {k: asdict(v) for k, v in self.counts.items()},
            "memory": self.lru.stats(),
        }

    def _follow_epoch(self) -> None:
        # The persistent tier was emptied (rebuild, purge, a bad file): so is this one.
        if self.tier is not None and self.tier.epoch != self._epoch:
            self._epoch = self.tier.epoch
            self._emptied()

    def _stats(self, kind: str) -> KindStats:
        found = self.counts.get(kind)
        if found is None:
            with self._lock:
                found = self.counts.setdefault(kind, KindStats())
        return found

    def _count(self, kind: str, *, hit: bool) -> None:
        stats = self._stats(kind)
        tally = _TALLY.get()
        if hit:
            stats.hits += 1
            if tally is not None:
                tally.hits += 1
        else:
            stats.misses += 1
            if tally is not None:
                tally.misses += 1


_CACHES: weakref.WeakKeyDictionary[Store, OpCache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def cache_for(store: Store) -> OpCache | None:
    """The operation cache of an open store (one per store, shared by its handles and
    namespaces), or None when the ``opcache`` setting is off."""
    s = store.settings
    if not s.opcache:
        return None
    with _CACHES_LOCK:
        found = _CACHES.get(store)
        if found is None:
            found = _CACHES[store] = OpCache(
                store.opcache_tier(),
                entries=s.opcache_entries,
                max_bytes=s.opcache_bytes,
                generation_of=_generation_of(store),
            )
        return found


def _generation_of(store: Store) -> Generation:
    """``store.generation`` through a weak reference: the cache must not keep its store
    (its key in ``_CACHES``) alive."""
    ref = weakref.ref(store)

    def generation(ns: str, types: Sequence[str] = (), *, edges: bool = False) -> int:
        st = ref()
        if st is None:
            raise StoreClosed("the store of this operation cache is gone", "open it again")
        return st.generation(ns, types, edges=edges)

    return generation


# -- what the roles call ------------------------------------------------------------
def cached_search(services: Services, query: str, **opts: Any) -> list[Hit]:
    """``Kredenc.search(query, **opts)`` in ``services.ns``, through the cache."""
    store, ns, cache, tracer = services.store, services.ns, services.cache, services.tracer
    leg_span = tracer.span if tracer is not None else None
    with span(tracer, "search", query_chars=len(query), mode=str(opts.get("mode", "hybrid"))) as sp:
        if cache is None:
            return queries.search(store, ns, query, span=leg_span, **opts)
        gen = generation_of(services, opts.get("types") or (), edges=bool(opts.get("hops")))
        key = cache.key("search", ns, gen, query, opts, search_fingerprint(store, opts))
        found: list[Hit] | None = cache.get_copy("search", key, _hits_from_json, copy_hits)
        if sp is not None:
            sp.set(cache_hit=found is not None, generation=gen)
        if found is not None:
            return found
        hits = queries.search(store, ns, query, span=leg_span, **opts)
        cache.put("search", key, [hit_to_json(h) for h in hits])
        if sp is not None:
            sp.set(hits=len(hits))
        return hits


def _hits_from_json(raw: list[dict[str, Any]]) -> list[Hit]:
    return [hit_from_json(h) for h in raw]


def search_fingerprint(store: Store, opts: dict[str, Any]) -> str:
    """What shapes a search besides its query and options, as one :func:`digest`: the
    search settings, the embedding model, the reranker. Computed once per ask
    (:func:`one_ask`; settings may change between asks, not during one)."""
    s = store.settings
    rerank = opts.get("rerank") or s.rerank
    memo = _memo("search_fingerprint")
    part = (id(store), id(s), rerank)
    found: str | None = memo.get(part)
    if found is None:
        params = frozen_digest(queries.search_params(s))
        found = digest([{"params": params, "model": store.meta.model_id, "rerank": rerank}])
        memo[part] = found  # the ask holds the store and its settings: ids stay theirs
    return found


def cached_complete(
    services: Services,
    messages: Sequence[Message],
    *,
    schema: dict[str, Any] | None = None,
    **kw: Any,
) -> Completion:
    """``services.llm.complete(messages, schema=schema, **kw)`` through the cache (only
    at temperature 0). A hit's usage is zero: it cost no tokens. A reply that answers
    nothing (empty; with a schema, no JSON object: ``structured.unusable``) is a
    ProviderError and is never cached; such an entry already in a tier is a miss."""
    llm, cache = services.llm, services.cache
    if llm is None:
        raise ProviderError(
            "this step needs an LLM and none is configured",
            "set llm_provider (see docs/configuration.md), or choose the role's 'rules' form",
        )
    with span(services.tracer, "llm.complete", provider=llm.name, model=llm.model) as sp:
        cacheable = cache is not None and float(kw.get("temperature", 0.0)) == 0.0
        key = ""
        if cacheable:
            msgs = [dict(m) for m in messages]
            key = cache.key("llm", llm.fingerprint(), msgs, schema, kw)
            found = cache.get("llm", key)
            hit = None if found is None else completion_from_json(found, usage=False)
            if hit is not None and not unusable(hit, schema):  # an unusable one: a miss
                if sp is not None:
                    sp.set(cache_hit=True)
                return hit
        done: Completion = check_reply(
            llm.complete(messages, schema=schema, **kw), llm.describe(), schema
        )
        if cacheable:
            cache.put("llm", key, completion_to_json(done))
        if sp is not None:
            sp.set(
                cache_hit=False,
                prompt_tokens=done.usage.prompt_tokens,
                completion_tokens=done.usage.completion_tokens,
                cost_usd=done.usage.cost_usd,
            )
        return done


def judge_fingerprint(judge: Judge) -> str:
    """What shapes a judge's verdicts: its ``fingerprint()`` when it has one, else its
    class, its ``params`` (a dataclass of thresholds, as ``SupportJudge`` has) and its
    LLM's fingerprint: refitted thresholds miss."""
    own = getattr(judge, "fingerprint", None)
    if callable(own):
        return str(own())
    cls = type(judge)
    name = f"{cls.__module__}.{cls.__qualname__}"
    params = getattr(judge, "params", None)  # SupportJudge's fitted weights and floors
    if is_dataclass(params) and not isinstance(params, type):
        name += ":" + frozen_digest(params)
    llm = getattr(judge, "llm", None)
    return f"{name}:{llm.fingerprint()}" if llm is not None else name


def cached_judge(
    services: Services, judge: Judge, question: str, answer: str, contexts: Sequence[str]
) -> Evaluation:
    """``judge.judge(question, answer, contexts)`` through the cache."""
    cache = services.cache
    with span(services.tracer, "judge", judge=type(judge).__name__) as sp:
        key = ""
        if cache is not None:
            texts = [text_digest(c) for c in contexts]  # a context's digest: hashed once per ask
            key = cache.key("judge", judge_fingerprint(judge), question, answer, texts)
            found = cache.get("judge", key)
            if sp is not None:
                sp.set(cache_hit=found is not None)
            if found is not None:
                return evaluation_from_json(found)
        ev = judge.judge(question, answer, contexts)
        if cache is not None:
            cache.put("judge", key, evaluation_to_json(ev))
        if sp is not None:
            sp.set(confidence_score=ev.confidence_score)
        return ev


# -- one ask's memo -------------------------------------------------------------------
_MEMO: ContextVar[dict[str, Any] | None] = ContextVar("kredenc_ask_memo", default=None)


@contextmanager
def one_ask() -> Iterator[dict[str, Any]]:
    """What the helpers compute once per ask (generations, the search fingerprint), for
    this block (the orchestrator wraps an ask's run in one). Outside a block nothing of
    it is remembered: each call reads afresh."""
    memo: dict[str, Any] = {}
    token = _MEMO.set(memo)
    try:
        yield memo
    finally:
        _MEMO.reset(token)


def _memo(part: str) -> dict[Any, Any]:
    memo = _MEMO.get()
    return {} if memo is None else memo.setdefault(part, {})


# -- the deterministic roles' own results ------------------------------------------------
#: Digests by what they are digests of (a text; a hit's id, type, title and text): pure
#: functions of their keys, so kept across asks, at most this many (then emptied).
_DIGESTS: dict[Any, str] = {}
DIGESTS_MAX = 8192


def _keep(key: Any, value: str) -> str:
    if len(_DIGESTS) >= DIGESTS_MAX:
        _DIGESTS.clear()
    _DIGESTS[key] = value
    return value


def text_digest(text: str) -> str:
    """SHA-256 (hex) of ``text``, remembered by the text: the roles of an ask key the
    same chunks, a repeated ask the same again, and a long text is hashed once."""
    found = _DIGESTS.get(text)
    if found is None:
        found = _keep(text, hashlib.sha256(text.encode("utf-8")).hexdigest())
    return found


def hit_digest(hit: Hit) -> str:
    """The :func:`digest` of what of a hit shapes a role's result: its id, type, title
    and the digest of its text (the text itself is never in a key); remembered by those
    four (a hit whose text or title changes is another entry)."""
    part = ("hit", hit.id, hit.type, hit.title, hit.text)
    found = _DIGESTS.get(part)
    if found is None:
        found = _keep(part, digest([hit.id, hit.type, hit.title, text_digest(hit.text)]))
    return found


def hits_part(hits: Sequence[Hit], extra: Sequence[Any] | None = None) -> str:
    """What of ``hits`` shapes a role's result, for its key, as one digest: each hit's
    :func:`hit_digest` in order, and beside each its ``extra`` (what else of that hit
    the role reads: grade its legs' ranks) when given."""
    rows = [hit_digest(h) for h in hits]
    if extra is None:
        return hashlib.sha256("\n".join(rows).encode("ascii")).hexdigest()
    if len(extra) != len(rows):
        raise ValueError(f"hits_part: {len(extra)} extras for {len(rows)} hits")
    return digest([rows, list(extra)])


def generation_of(services: Services, types: Sequence[str] = (), *, edges: bool = False) -> int:
    """``cache.generation(services.ns, types, edges=edges)``, read once per ask
    (:func:`one_ask`): the loop writes nothing while it runs (its turns are filed
    after), so one read serves every search and role of the ask."""
    cache = services.cache
    if cache is None:
        return 0
    memo = _memo("generation")
    part = (services.ns, tuple(types), edges)
    found: int | None = memo.get(part)
    if found is None:
        found = memo[part] = cache.generation(services.ns, types, edges=edges)
    return found


def cached_role(
    services: Services,
    tool: str,
    inputs: Mapping[str, Any],
    compute: Callable[[], T],
    encode: Callable[[T], Any],
    decode: Callable[[Any], T],
    *,
    shaped_by: Mapping[str, Any],
    implementation: str = "rules",
    store_types: Sequence[str] | None = None,
    copy: Callable[[T], T] | None = None,
) -> T:
    """A deterministic role's result through the cache (kind ``role``): ``compute()`` on
    a miss, ``decode(value)`` on a hit, ``encode(result)`` (JSON) what is stored.

    The key holds the role's name and ``implementation``, ``shaped_by`` (every setting
    and constant that shapes the result: name them explicitly), the embedding model,
    ``inputs`` (what it reads of the mind: the query, the focus, :func:`hits_part` of
    the chunks...) and, for a role that reads the store beyond its inputs
    (``store_types``: the types it searches; ``()`` for all), the namespace and its
    generation over them. ``copy``, for a value ``decode`` builds from the JSON alone
    (not from this ask's objects), keeps the decoded value in memory and hands each hit
    ``copy(value)`` instead of decoding again (:meth:`OpCache.get_copy`). With
    ``services.cache`` None it is ``compute()``."""
    cache = services.cache
    if cache is None:
        return compute()
    with span(services.tracer, f"role.{tool}", implementation=implementation) as sp:
        store = None
        if store_types is not None:
            store = [services.ns, generation_of(services, store_types)]
        model = services.store.meta.model_id if services.store is not None else ""
        key = cache.key("role", tool, implementation, dict(shaped_by), model, dict(inputs), store)
        if copy is not None:  # the decoded value is kept in memory; each hit gets a copy
            kept: T | None = cache.get_copy("role", key, decode, copy)
            if sp is not None:
                sp.set(cache_hit=kept is not None)
            if kept is not None:
                return kept
        else:
            found = cache.get("role", key)
            if sp is not None:
                sp.set(cache_hit=found is not None)
            if found is not None:
                return decode(found)
        result = compute()
        cache.put("role", key, encode(result))
        return result
