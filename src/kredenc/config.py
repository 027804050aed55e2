"""One settings object, read in one place.

Sources, lowest to highest precedence: defaults, ``kredenc.toml`` in the store
directory, environment variables ``KREDENC_*``, explicit arguments. No other module
reads the environment.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal, get_origin
from urllib.parse import parse_qs, urlsplit

from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from kredenc import plugins
from kredenc.errors import InvalidInput

DEFAULT_HOME = Path(".kredenc")
CONFIG_FILE = "kredenc.toml"
# Ceilings of the time settings: a finite but absurd number of seconds overflows a clock,
# a socket or Redis's PX far from the setting (threading.TIMEOUT_MAX is ~292 years).
DAY_S = 86_400.0
YEAR_S = 365 * DAY_S


class Settings(BaseSettings):
    """Every setting kredenc reads, with its default. Documented in docs/configuration.md."""

    # allow_inf_nan: every float setting is a finite number (an infinite timeout or TTL
    # overflows the clock, the socket or Redis's PX far from the setting that caused it).
    model_config = SettingsConfigDict(env_prefix="KREDENC_", extra="forbid", allow_inf_nan=False)

    home: Path = Field(
        DEFAULT_HOME,
        description="Store directory: --store DIR (or Kredenc.open's path), else KREDENC_HOME, "
        "else ./.kredenc. Not a kredenc.toml key: the file lives in it, and refuses it.",
    )
    namespace: str = Field("default", description="Default namespace (tenant).")
    backend: Literal["sqlite", "postgres"] = Field(
        "sqlite",
        description="Where the log and the index live: files in the store directory "
        "('sqlite': the haystack and SQLite) or a PostgreSQL database with pgvector "
        "('postgres': postgres_dsn; needs kredenc[postgres]). See docs/postgres.md.",
    )
    postgres_dsn: SecretStr = Field(
        SecretStr(""),
        description="libpq connection string (or postgresql:// URL) of the database for "
        "backend = 'postgres'; a secret: never printed.",
    )
    postgres_schema: str = Field(
        "kredenc",
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        description="PostgreSQL schema holding this store's log and index (one store each).",
    )
    durability: Literal["append", "batch", "none"] = Field(
        "append",
        description="fsync per append ('append'), per batch only ('batch'), or never ('none').",
    )
    # -- scale-out: Redis for the blackboard, sessions' hot history and locks --
    redis_url: SecretStr = Field(
        SecretStr(""),
        description="Redis for the answer loop's blackboard (mind_backend = 'redis'), "
        "sessions' hot history and locks between processes (e.g. redis://127.0.0.1:6379/0; "
        "needs the 'redis' extra; a noeviction Redis: locks and blackboards must not be "
        "evicted); empty: all in-process. A secret: never printed. See docs/redis.md.",
    )
    redis_prefix: str = Field(
        "kredenc:",
        description="Prefix of every key under redis_url: separates deployments sharing one Redis.",
    )
    mind_backend: Literal["local", "redis"] = Field(
        "local",
        description="Where an ask's blackboard lives: in the process ('local') or in a Redis "
        "hash per run ('redis': redis_url; values JSON).",
    )
    mind_ttl_s: int = Field(
        3600,
        ge=1,
        description="Seconds a Redis blackboard outlives its last write (an abandoned run "
        "vanishes; a finished one is deleted at once).",
    )
    session_cache_ttl_s: int = Field(
        86400,
        ge=0,
        description="With redis_url: seconds a session's last messages stay hot in Redis "
        "after their last use (0: no hot history; every read asks the store).",
    )
    lock_ttl_s: float = Field(
        30.0,
        gt=0,
        le=DAY_S,
        description="Seconds a Redis lock lives unless its holder renews it (it renews every "
        "third of this while it holds it): the lock of a process that died frees itself.",
    )
    embed_provider: str = Field(
        "minilm",
        description="Embedding provider, a name in the kredenc.embedders plugin group: "
        "'minilm' (bundled), 'openai' (an OpenAI-compatible API), 'onnx' (an ONNX export in "
        "embed_model_path), 'sentence-transformers' (a sentence-transformers folder in "
        "embed_model_path; the rerank extra) or an installed plugin's. See docs/models.md.",
    )
    embed_model_path: Path | None = Field(
        None,
        description="Local model folder of the 'onnx' and 'sentence-transformers' embedders "
        "(model.onnx + tokenizer.json, or a sentence-transformers folder); never downloaded.",
    )
    embed_threads: int = Field(2, ge=1, le=64, description="onnxruntime threads for MiniLM.")
    embed_query_quantized: bool = Field(
        True,
        description="Embed search queries with an 8-bit copy of MiniLM where it is faster on "
        "this CPU (made, checked and raced once, cached in ~/.cache/kredenc/models); stored "
        "vectors always come from the full model.",
    )
    embed_query_threads: int = Field(
        1,
        ge=1,
        le=64,
        description="onnxruntime threads of MiniLM's 8-bit query graph. One query is a few "
        "word pieces, which a second thread does not speed up: it costs a third more CPU "
        "(docs/benchmarks.md).",
    )
    embed_url: str = Field("", description="Base URL of an OpenAI-compatible embeddings API.")
    embed_model: str = Field("", description="Model name for the OpenAI-compatible API.")
    embed_api_key: SecretStr = Field(SecretStr(""), description="API key for embed_url.")
    embed_cache: Path | None = Field(
        None, description="Embedding cache file (default <store>/embeddings.db); shareable."
    )
    fusion: Literal["rrf", "minmax", "learned"] = Field(
        "minmax",
        description="How hybrid search fuses its legs: min-max scores, weighted RRF, or the "
        "learned logistic fusion over leg and text features (opt-in; docs/retrieval.md).",
    )
    feedback: Literal["none", "rm3", "rocchio", "both"] = Field(
        "none",
        description="Pseudo-relevance feedback (opt-in; docs/retrieval.md): a second lexical "
        "query of RM3 expansion words ('rm3'), a second dense query moved toward the first "
        "pass's best records ('rocchio'), or both.",
    )
    feedback_docs: int = Field(5, ge=1, le=100, description="Feedback records (first pass's top).")
    feedback_terms: int = Field(10, ge=1, le=64, description="RM3 expansion words.")
    feedback_lambda: float = Field(
        0.6, ge=0.0, le=1.0, description="RM3: the original query's share of the lexical leg."
    )
    feedback_alpha: float = Field(1.0, ge=0.0, description="Rocchio: weight of the query vector.")
    feedback_beta: float = Field(
        0.5, ge=0.0, description="Rocchio: weight of the feedback records' mean vector."
    )
    rrf_k: int = Field(60, ge=1, description="Reciprocal rank fusion constant.")
    weight_dense: float = Field(0.4, ge=0.0, description="Fusion weight of the dense leg.")
    weight_lexical: float = Field(0.6, ge=0.0, description="Fusion weight of the lexical leg.")
    lexical_context_weight: float = Field(
        0.5, ge=0.0, le=1.0, description="BM25 weight of a card's context beside its own words."
    )
    leg_k: int = Field(50, ge=1, le=1000, description="Candidates each leg returns before fusion.")
    lexical_max_scored: int = Field(
        2000,
        ge=0,
        description=(
            "Most cards a lexical query scores: past it, only cards holding one of the "
            "query's rarest words are ranked (by all its words), and when even those are "
            "more than twice as many, the newest of them first; 0: rank every match."
        ),
    )
    neighbors_max: int = Field(40, ge=0, description="Most graph neighbours added to a search.")
    graph_decay: float = Field(
        0.7,
        gt=0,
        le=1,
        description="A graph neighbour's share of its seed's fused score per hop (times "
        "the edge's weight); chosen across the multihop dev sets (docs/benchmarks.md).",
    )
    coverage_weight: float = Field(
        0.5,
        ge=0,
        le=10,
        description="Hybrid search with min-max fusion: weight of a hit's share of the "
        "query's terms that no hit above it holds, beside its fused score, in the top 12 "
        "(0: the fused order); chosen leave-one-set-out on the dev sets "
        "(docs/benchmarks.md).",
    )
    spelling: bool = Field(
        True,
        description="Search also looks for a query word that no card holds (4-24 "
        "letters) as the word one typo away that the most cards the caller can read hold "
        "('sydeney': 'sydney'), on both legs; a word some card holds is never changed. "
        "With one typo per question it recovers most of the 4-10 points a typo costs, "
        "and leaves the dev questions as written within noise (docs/retrieval.md, "
        "'Misspelt words').",
    )
    mention_links: int = Field(
        10,
        ge=0,
        le=100,
        description="Most 'mentions' edges a chunk gets to documents (of the same ingest"
        " run or eval corpus) whose title it names; 0 files none.",
    )
    rerank: str = Field(
        "none",
        description="Reranker: 'none', a kredenc.rerankers plugin as NAME or NAME:ARGUMENT "
        "('onnx:PATH': an ONNX cross-encoder folder, no torch; 'cross-encoder:PATH': "
        "sentence-transformers; 'maxsim': late interaction over the bundled MiniLM's "
        "token vectors), or a local cross-encoder path. Search --rerank and the "
        "answer loop use it.",
    )
    rerank_depth: int = Field(
        30,
        ge=1,
        description="Fused candidates a search's reranker rescores (the answer loop reranks "
        "its own ask_rerank_depth chunks, once per ask).",
    )
    rerank_quantized: bool = Field(
        True,
        description="The 'onnx' reranker scores with the folder's int8 copy, "
        "model_quantized.onnx beside model.onnx (optimum's name), where it has one.",
    )
    rerank_mix: float = Field(
        1.0,
        ge=0,
        le=1,
        description="Share of the reranker in the reranked order: 1 orders by its score "
        "alone; below 1, by (1 - mix) * fused + mix * rerank score, each min-max scaled "
        "over the reranked candidates.",
    )
    rank_similarity: float = Field(0.5, ge=0, description="ContextGraph weight of similarity.")
    rank_importance: float = Field(0.3, ge=0, description="ContextGraph weight of importance.")
    rank_recency: float = Field(0.2, ge=0, description="ContextGraph weight of recency.")
    recency_half_life_days: float = Field(30.0, gt=0, description="Days for recency to halve.")
    access_batch: int = Field(256, ge=1, description="Recalled ids collected per access record.")
    ann_threshold: int = Field(
        20_000, ge=0, description="Vectors in a drawer before the ANN index replaces exact search."
    )
    ann_dtype: Literal["f32", "f16", "i8"] = Field("f16", description="ANN vector precision.")
    ann_connectivity: int = Field(16, ge=4, le=128, description="ANN graph degree (M).")
    ann_expansion_add: int = Field(64, ge=8, description="ANN build-time search width.")
    ann_expansion_search: int = Field(96, ge=8, description="ANN query-time search width.")
    chunk_size: int = Field(1000, ge=50, description="Characters per document chunk.")
    chunk_overlap: int = Field(200, ge=0, description="Characters shared by neighbouring chunks.")
    fetch_allow_private: bool = Field(
        False, description="Allow fetching URLs on private, loopback and link-local addresses."
    )
    fetch_allow_hosts: list[str] = Field(
        default_factory=list,
        description="Hosts ('wiki.internal') or host:port fetched even on private addresses.",
    )
    fetch_max_bytes: int = Field(20 * 1024 * 1024, ge=1, description="Largest URL body fetched.")
    fetch_timeout_s: float = Field(
        20.0, gt=0, le=DAY_S, description="Time limit for one URL fetch."
    )
    ingest_max_bytes: int = Field(
        256 * 1024 * 1024, ge=1, description="Largest local file ingest reads (bytes)."
    )
    ingest_max_pages: int = Field(5000, ge=1, description="Most pages of one document.")
    ingest_max_page_chars: int = Field(
        100_000,
        ge=1,
        description="Characters kept of one page, and of one line of any document; "
        "the rest is cut, with a warning.",
    )
    ingest_max_chars: int = Field(20_000_000, ge=1, description="Most characters of one document.")
    ingest_timeout_s: float = Field(
        300.0, gt=0, le=DAY_S, description="Time limit for parsing one file."
    )
    youtube_languages: list[str] = Field(
        default_factory=lambda: ["en"], description="Transcript languages to try, in order."
    )
    youtube_audio_dir: Path | None = Field(
        None, description="Folder of <video id>.<ext> audio files for speech-to-text fallback."
    )
    stt_url: str = Field("", description="Base URL of an OpenAI-compatible transcription API.")
    stt_model: str = Field("whisper-1", description="Transcription model name.")
    stt_api_key: SecretStr = Field(SecretStr(""), description="API key for stt_url.")
    recall_dry_run: bool = Field(
        False, description="Recall searches, times and logs what it would inject; changes nothing."
    )
    recall_items: int = Field(
        8, ge=0, description="Most memories recall injects per turn (within the characters)."
    )
    recall_item_chars: int = Field(
        600, ge=0, description="Characters per recalled memory (0: no limit)."
    )
    recall_total_chars: int = Field(
        1800, ge=0, description="Characters per recall block (0: no limit)."
    )
    recall_item_tokens: int = Field(0, ge=0, description="Tokens per recalled memory (0: unused).")
    recall_total_tokens: int = Field(0, ge=0, description="Tokens per recall block (0: unused).")
    recall_snippet_chars: int = Field(
        0,
        ge=0,
        description="A recalled text longer than this shows the window of its sentences "
        "around the best match (0: whole texts).",
    )
    recall_show_ids: bool = Field(
        False,
        description="Show each recalled record's store id in its line (off: the line spends "
        "those characters on text; every recall item carries its id either way).",
    )
    recall_time_budget_ms: float = Field(50.0, gt=0, description="Time recall may take per turn.")
    recall_mode: Literal["hybrid", "lexical", "dense"] = Field(
        "hybrid", description="How recall searches: words and meaning, or one of them."
    )
    recall_role: Literal["system", "user"] = Field(
        "system",
        description="Role of the injected recall message: 'system', or 'user' for providers "
        "that treat a trailing system message specially.",
    )
    recall_types: list[str] = Field(
        default_factory=lambda: ["memory", "turn", "chunk"],
        description="Record types recall may inject: memories, conversation turns and "
        "document passages (chunks).",
    )
    recall_leg_k: int = Field(20, ge=1, description="Candidates each recall leg returns.")
    recall_min_similarity: float = Field(
        0.2, ge=0.0, le=1.0, description="Cosine a record found by meaning alone must reach."
    )
    proxy_allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names (besides localhost and loopback addresses) the proxy answers "
        "to and whose pages (Origin) may call it.",
    )
    proxy_max_body_bytes: int = Field(
        32 * 1024 * 1024, ge=1, description="Largest request body the proxy accepts (bytes)."
    )
    proxy_max_json_depth: int = Field(
        64, ge=4, le=500, description="Deepest nesting of a JSON body the proxy accepts."
    )
    proxy_upstream_api_key: SecretStr = Field(
        SecretStr(""),
        description="Key the proxy sends to the upstream (Authorization: Bearer) in place of "
        "the client's; needed when clients authenticate with kredenc keys.",
    )
    # -- server (kredenc serve: REST, MCP over HTTP, the web page, the proxy at /v1) --
    server_host: str = Field("127.0.0.1", description="Address kredenc serve listens on.")
    server_port: int = Field(8765, ge=0, le=65535, description="Port kredenc serve listens on.")
    server_roots: list[str] = Field(
        default_factory=list,
        description="Folders a client may ingest from by path (POST /ingest with a path); "
        "none: only uploads and URLs.",
    )
    server_upstream: str = Field(
        "",
        description="Base URL of the chat model the server's /v1 proxy forwards to; empty: "
        "/v1 answers 503.",
    )
    server_rate_per_minute: int = Field(
        600,
        ge=0,
        description="Requests per minute each API key (or loopback client without "
        "keys) may make; 0: no limit.",
    )
    server_max_k: int = Field(100, ge=1, le=10_000, description="Largest k a request may ask.")
    server_max_query_chars: int = Field(
        4000, ge=16, description="Longest query or question a request may send (characters)."
    )
    server_max_hops: int = Field(3, ge=0, le=10, description="Most graph hops a request may ask.")
    server_max_fanout: int = Field(
        200, ge=1, description="Most neighbours per node a context-graph request may ask."
    )
    max_text_chars: int = Field(
        1_000_000, ge=1, description="Longest text one memory may hold (characters)."
    )
    # -- LLM provider --
    llm_provider: str = Field(
        "none",
        description="Chat model for the answer loop's LLM roles: 'none' (deterministic roles "
        "only), a record (openai, groq, openrouter, ollama, vllm, llamacpp, lmstudio, "
        "openai-compatible), 'local' (the kredenc[local] extra) or a kredenc.llms plugin's.",
    )
    llm_model: str = Field(
        "", description="Model id for llm_provider; for 'local', a GGUF path (default: bundled)."
    )
    llm_base_url: str = Field(
        "", description="Base URL replacing the provider record's (needed for openai-compatible)."
    )
    llm_api_key: SecretStr = Field(
        SecretStr(""),
        description="API key for llm_provider; when empty, the record's own variable "
        "(OPENAI_API_KEY, GROQ_API_KEY, OPENROUTER_API_KEY, ...) is read.",
    )
    llm_timeout_s: float = Field(60.0, gt=0, le=DAY_S, description="Time limit for one LLM reply.")
    llm_max_tokens: int = Field(1024, ge=1, description="Most tokens one LLM reply may hold.")
    llm_local_threads: int = Field(
        2, ge=1, le=64, description="CPU threads of the local model (llm_provider 'local')."
    )
    # -- answer loop: framework (loopcore) --
    ask_max_iterations: int = Field(
        3,
        ge=1,
        le=10,
        description="Most iterations of the answer loop (an agent's max_iterations overrides).",
    )
    ask_k: int = Field(12, ge=1, le=200, description="Chunks the answer loop retrieves per query.")
    ask_context_k: int = Field(
        4, ge=1, le=50, description="Chunks the answer loop hands to the generator."
    )
    ask_rerank_depth: int = Field(
        12,
        ge=0,
        le=200,
        description="With a reranker configured, how many retrieved chunks the answer loop "
        "reranks per ask, in all: the first iteration's best, a later one only what that "
        "left (12 -> the ask_context_k given to the generator); verify's searches for "
        "evidence never rerank. 0: the loop reranks nothing.",
    )
    agents_dir: Path | None = Field(
        None,
        description="A folder of markdown agents (*.md) added to the shipped ones; an agent "
        "there replaces a shipped one of the same name.",
    )
    tools_dir: Path | None = Field(
        None,
        description="A folder of tools (*.py defining kredenc.loop.tool.Tool subclasses) "
        "added to the kredenc.tools plugins; only files directly in it are loaded.",
    )
    ask_file_in_background: bool = Field(
        True,
        description="File an ask's question and answer as turns on a background thread "
        "(the answer returns at once with the turns' ids; every later call of the same "
        "open store waits for them); false: filed before ask returns.",
    )
    ask_session_turns: int = Field(
        20, ge=0, le=200, description="Previous messages of a session the answer loop reads."
    )
    # -- answer loop: cache and tracing --
    opcache: bool = Field(
        True,
        description="Cache embeddings, searches, LLM calls and judge results by the hash of "
        "their inputs (an in-process LRU over <store>/opcache.db).",
    )
    opcache_entries: int = Field(
        4096, ge=0, description="Most entries the operation cache keeps in memory (0: none)."
    )
    opcache_bytes: int = Field(
        64 * 1024 * 1024, ge=0, description="Most bytes of values the in-memory tier keeps."
    )
    opcache_disk_bytes: int = Field(
        256 * 1024 * 1024,
        ge=0,
        description="Most bytes of values the cold tier keeps (opcache.db, or its PostgreSQL "
        "table with backend = 'postgres'); the oldest go first (0: no cold tier).",
    )
    opcache_redis_url: SecretStr = Field(
        SecretStr(""),
        description="Redis for the operation cache's shared tier, between the in-memory "
        "LRU and opcache.db (e.g. redis://127.0.0.1:6379/0; needs the 'redis' extra); "
        "empty: off (redis_url does not turn it on: a cache wants an allkeys-lru Redis, "
        "the locks' must not evict; see docs/redis.md).",
    )
    opcache_redis_ttl_s: int = Field(
        86400, ge=0, description="Seconds a Redis cache entry lives (0: until Redis evicts it)."
    )
    opcache_redis_prefix: str = Field(
        "kredenc:opcache:",
        description="Prefix of every Redis cache key (before the store's id): separates "
        "deployments sharing one Redis.",
    )
    opcache_redis_value_bytes: int = Field(
        4 * 1024 * 1024,
        ge=0,
        description="Largest value stored in Redis; a larger one stays in the other tiers.",
    )
    jobs_queue: Literal["thread", "rq"] = Field(
        "thread",
        description="Where kredenc serve runs ingest jobs and lifecycle runs: its own worker "
        "thread ('thread') or RQ workers ('rq': kredenc worker processes over jobs_redis_url; "
        "needs backend = 'postgres' and the 'workers' extra). See docs/workers.md.",
    )
    jobs_redis_url: SecretStr = Field(
        SecretStr(""),
        description="Redis of the RQ job queue and the jobs' records and events (e.g. "
        "redis://127.0.0.1:6379/0); empty: redis_url, else opcache_redis_url. A secret: "
        "never printed.",
    )
    jobs_redis_prefix: str = Field(
        "kredenc:jobs:",
        pattern=r"^[A-Za-z0-9_.:-]{1,64}$",
        description="Prefix of the jobs' Redis keys (records, events, uploads) and name of "
        "their RQ queue (servers and workers of one store use the same): deployments on one "
        "Redis with different prefixes never take each other's jobs, but RQ's own keys "
        "(rq:job:*, rq:queue:<prefix>, rq:queues, rq:worker:*) sit outside it "
        "(docs/workers.md).",
    )
    jobs_retries: int = Field(
        3,
        ge=0,
        le=20,
        description="Times an RQ job is run again after its worker died or lost the store "
        "(a document is one batch: a retry files what is missing, the rest is unchanged).",
    )
    jobs_timeout_s: int = Field(
        3600, ge=10, description="Longest an RQ job may run before its worker stops it."
    )
    jobs_heartbeat_s: int = Field(
        10,
        ge=1,
        le=600,
        description="Seconds between a worker's heartbeats; a job whose worker is silent "
        "for three is abandoned and retried by another worker.",
    )
    scheduler: bool = Field(
        True,
        description="kredenc serve runs the lifecycle jobs on a schedule (scheduler_intervals) "
        "in every namespace it serves; kredenc serve --no-scheduler turns it off, kredenc "
        "worker --scheduler runs one in a worker. Each job runs once per interval across "
        "all the store's processes. See docs/workers.md.",
    )
    scheduler_intervals: dict[str, float] = Field(
        default_factory=dict,
        examples=[{"episodes": 300}],
        description="Seconds between runs of a lifecycle job, by name, over the defaults "
        "(episodes 600, contradictions 3600, reflect 3600, decay 21600), e.g. "
        "{episodes = 300}.",
    )
    scheduler_throttle_s: float = Field(
        60.0,
        gt=0,
        le=DAY_S,
        description="The scheduler looks at the clock at most once per this many seconds.",
    )
    trace: bool = Field(
        False,
        description="Record OpenTelemetry spans of every ask, tool, provider call and search "
        "leg (needs the 'tracing' extra).",
    )
    otlp_endpoint: str = Field(
        "",
        description="OTLP/HTTP collector the spans go to (e.g. http://localhost:4318; "
        "Langfuse and others accept it); empty: OTEL_EXPORTER_OTLP_ENDPOINT.",
    )
    # -- answer loop: roles --
    role_decide: Literal["rules", "llm"] = Field(
        "rules", description="decide (is retrieval needed?): rules or llm."
    )
    role_rewrite: Literal["rules", "llm"] = Field(
        "rules", description="rewrite (a standalone query from the session): rules or llm."
    )
    role_retrieve: Literal["rules", "llm"] = Field(
        "rules", description="retrieve (search mode and sub-queries): rules or llm."
    )
    role_grade: Literal["rules", "llm"] = Field(
        "rules", description="grade (each chunk CORRECT/AMBIGUOUS/INCORRECT): rules or llm."
    )
    role_verify: Literal["rules", "llm"] = Field(
        "rules", description="verify (ambiguous chunks against independent evidence): rules or llm."
    )
    role_generate: Literal["rules", "llm"] = Field(
        "rules", description="generate (the answer with citations): rules or llm."
    )
    role_judge: Literal["rules", "llm"] = Field(
        "rules", description="judge (grounding of the answer): rules or llm."
    )
    role_reflect: Literal["rules", "llm"] = Field(
        "rules", description="reflect (is the answer complete, what to search next): rules or llm."
    )
    grade_upper: float = Field(
        0.4667,
        ge=0,
        le=1,
        description="Relevance at or above which grade calls a chunk CORRECT (fitted: "
        "CORRECT chunks 80 % relevant; benchmarks/fit_grade.py).",
    )
    grade_lower: float = Field(
        0.0354,
        ge=0,
        le=1,
        description="Relevance below which grade calls a chunk INCORRECT (fitted: at most "
        "5 % of relevant chunks below it; benchmarks/fit_grade.py).",
    )
    web_search_url: str = Field(
        "",
        description="Base URL of a SearxNG-compatible search API verify may ask (off when empty).",
    )
    web_search_timeout_s: float = Field(
        10.0, gt=0, le=DAY_S, description="Time limit for one web search request."
    )
    web_search_results: int = Field(
        5, ge=1, le=50, description="Web results verify reads per search."
    )
    # -- search and CLI polish (issue 16): context graph ranking --
    rank_tiebreak: float = Field(
        0.05,
        ge=0,
        le=1,
        description="How much importance and recency count beside similarity in the "
        "ContextGraph ranking (their weighted terms are scaled by it): with the default "
        "weights a node can pass one at most 0.05 more similar, so relevance dominates.",
    )
    # -- recall (issue 16) --
    recall_time_phrases: bool = Field(
        False,
        description="Recall reads a time the message names ('two months ago', 'last "
        "Saturday') and puts what was filed since then first (off by default: on "
        "LongMemEval it moved one question of 50, docs/benchmarks.md).",
    )
    recall_spelling: bool = Field(
        True,
        description="Recall corrects a message's misspelt words as search does (the "
        "'spelling' setting). With one typo per question it puts the evidence in the "
        "block for 0.76 of LoCoMo questions against 0.66 without (docs/benchmarks.md).",
    )
    recall_assistant_turns: bool = Field(
        False,
        description="Recall may inject the assistant's own past turns (off: only the "
        "user's turns, memories and document passages, so the agent is not fed its own "
        "answers back).",
    )
    recall_warm_at_open: bool = Field(
        True,
        description="Opening a store loads the query model, the vector shards and (with "
        "recall_spelling) the term set in the background, so the first recall finds them "
        "ready; a recall never loads the shards on its own thread past its time budget.",
    )
    recall_user_id: str = Field(
        "",
        description="Recall only records filed with this user_id (inside the namespace) "
        "when a recall names none ('': no filter).",
    )
    recall_agent_id: str = Field(
        "", description="Recall only records filed with this agent_id ('': no filter)."
    )
    recall_run_id: str = Field(
        "", description="Recall only records filed with this run_id ('': no filter)."
    )

    def with_embedder(self, spec: str) -> Settings:
        """These settings with the embedder ``spec`` names: ``NAME`` (a
        ``kredenc.embedders`` plugin) or ``NAME:PATH`` (``embed_model_path`` too), as
        ``kredenc reembed --to`` takes it."""
        name, colon, path = spec.strip().partition(":")
        name = name.strip()
        if not plugins.is_known(plugins.EMBEDDERS, name):
            known = ", ".join(plugins.names(plugins.EMBEDDERS))
            raise InvalidInput(
                f"unknown embedder {name!r} in {spec!r}",
                f"name one of {known}, as NAME or NAME:PATH (e.g. onnx:/models/my-model)",
            )
        update: dict[str, Any] = {"embed_provider": name}
        if colon:
            if not path.strip():
                raise InvalidInput(f"{spec!r} names no folder after the colon", "NAME:PATH")
            update["embed_model_path"] = Path(path.strip()).expanduser()
        return self.model_copy(update=update)

    @field_validator("embed_provider")
    @classmethod
    def _known_embedder(cls, value: str) -> str:
        # Built-in names answer without reading the entry points (kredenc.plugins).
        if not plugins.is_known(plugins.EMBEDDERS, value):
            known = ", ".join(plugins.names(plugins.EMBEDDERS))
            raise ValueError(f"unknown embedder {value!r}; available: {known}")
        return value

    @field_validator("llm_provider")
    @classmethod
    def _known_llm(cls, value: str) -> str:
        if value != "none" and not plugins.is_known(plugins.LLMS, value):
            known = ", ".join(["none", *plugins.names(plugins.LLMS)])
            raise ValueError(f"unknown LLM provider {value!r}; available: {known}")
        return value

    @field_validator("scheduler_intervals")
    @classmethod
    def _intervals(cls, value: dict[str, float]) -> dict[str, float]:
        bad = [
            f"{name} = {seconds!r}" for name, seconds in value.items() if not 0 < seconds <= YEAR_S
        ]
        if bad:
            raise ValueError(
                f"scheduler_intervals need positive seconds up to a year ({YEAR_S:.0f}), "
                f"not {', '.join(bad)}"
            )
        return value

    @field_validator("opcache_redis_url", "jobs_redis_url", "redis_url")
    @classmethod
    def _redis_url(cls, value: SecretStr, info: ValidationInfo) -> SecretStr:
        # The URL is a secret: the message names its scheme only.
        url = value.get_secret_value()
        if url and not url.startswith(("redis://", "rediss://", "unix://")):
            scheme = url.split("://", 1)[0] if "://" in url else "no scheme"
            raise ValueError(
                f"{info.field_name} must start with redis://, rediss:// or unix:// "
                f"(it has {scheme}); empty turns it off"
            )
        problem = redis_url_problem(url) if url else None
        if problem:
            raise ValueError(
                f"not a Redis URL: {problem} (e.g. "
                "redis://127.0.0.1:6379/0, or unix:///run/redis/redis.sock?db=0)"
            )
        return value

    @model_validator(mode="after")
    def _mind_redis(self) -> Settings:
        if self.mind_backend == "redis" and not self.redis_url.get_secret_value():
            raise ValueError(
                "mind_backend = 'redis' needs redis_url (KREDENC_REDIS_URL), e.g. "
                "'redis://127.0.0.1:6379/0'"
            )
        return self

    @model_validator(mode="after")
    def _weights(self) -> Settings:
        if self.weight_dense + self.weight_lexical <= 0:
            raise ValueError("weight_dense + weight_lexical must be positive")
        if self.feedback_alpha + self.feedback_beta <= 0:
            raise ValueError("feedback_alpha + feedback_beta must be positive")
        return self

    @model_validator(mode="after")
    def _postgres_dsn(self) -> Settings:
        if self.backend == "postgres" and not self.postgres_dsn.get_secret_value():
            raise ValueError(
                "backend = 'postgres' needs postgres_dsn (KREDENC_POSTGRES_DSN), e.g. "
                "'host=127.0.0.1 dbname=kredenc user=kredenc'"
            )
        return self

    @model_validator(mode="after")
    def _grade_thresholds(self) -> Settings:
        if self.grade_lower > self.grade_upper:
            raise ValueError("grade_lower must not be above grade_upper")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Precedence: explicit arguments, then environment, then the store's toml.
        toml = TomlConfigSettingsSource(settings_cls)
        if "home" in toml.toml_data:
            # The file is read from inside the store, so it cannot choose the store.
            raise InvalidInput(
                f"{toml.toml_file_path} cannot set home (the file lives in the store directory)",
                "remove home from it; choose the store with --store DIR or KREDENC_HOME",
            )
        return (init_settings, _EnvSource(settings_cls), toml)


class _EnvSource(EnvSettingsSource):
    """The ``KREDENC_*`` variables. A list or dict setting is JSON there; plain text
    is a usage error naming the setting, its variable and the form it takes (pydantic's
    own ``SettingsError`` names neither the variable nor the form)."""

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        try:
            return super().decode_complex_value(field_name, field, value)
        except ValueError:
            origin = get_origin(field.annotation)
            if origin is list:
                items = [part.strip() for part in str(value).split(",") if part.strip()]
                expected = f"a JSON list, e.g. '{json.dumps(items or ['...'])}'"
            elif origin is dict:
                example = field.examples[0] if field.examples else {"name": "value"}
                expected = f"a JSON object, e.g. '{json.dumps(example)}'"
            else:
                raise
            variable = f"{self.env_prefix}{field_name}".upper()
            raise InvalidInput(
                f"invalid setting {field_name} ({variable}): expected {expected}"
            ) from None


def redis_url_problem(url: str) -> str | None:
    """What is wrong with the Redis URL ``url`` (already ``redis://``, ``rediss://`` or
    ``unix://``), or None: what redis-py would refuse at the first use (a port that is
    not a number), or read as something else (``/abc``: database 0; no host: localhost).
    The message never quotes the URL (a secret: in ``redis://user:password/0`` the
    password stands where the port goes)."""
    parts = urlsplit(url)
    try:
        port = parts.port  # None when the URL names none (6379)
    except ValueError:  # not a number, or past 65535
        port = 0
    if port == 0:
        return "its port is not a number from 1 to 65535"
    databases = parse_qs(parts.query).get("db", [])
    if parts.scheme == "unix":
        if not parts.path:
            return "it names no socket path"
    else:
        if not parts.hostname:
            return "it names no host"
        if parts.path.strip("/"):
            databases.append(parts.path.strip("/"))
    if any(not re.fullmatch(r"[0-9]+", db) for db in databases):
        return "its database is not a number (0, 1, ...)"
    return None


def resolve_home(store: str | Path | None) -> Path:
    """The store directory: the argument, else ``KREDENC_HOME``, else ``./.kredenc``."""
    if store is not None and str(store) != "":
        return Path(store)
    env = os.environ.get("KREDENC_HOME")
    return Path(env) if env else DEFAULT_HOME


def env_secret(name: str) -> SecretStr:
    """The environment variable ``name`` as a secret (empty when unset): how a provider
    record's own key variable (``OPENAI_API_KEY``) is read, here and nowhere else."""
    return SecretStr(os.environ.get(name, ""))


def load_settings(store: str | Path | None = None, **overrides: Any) -> Settings:
    """Settings for the store at ``store`` with explicit ``overrides`` on top."""
    home = resolve_home(store)
    overrides = {k: v for k, v in overrides.items() if v is not None}
    overrides["home"] = home
    toml = home / CONFIG_FILE
    bound = type(
        "Settings",
        (Settings,),
        {"model_config": {**Settings.model_config, "toml_file": toml if toml.is_file() else None}},
    )
    try:
        settings: Settings = bound(**overrides)
        return settings
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"{toml} is not valid TOML ({exc})", f"fix or remove {toml}") from None
    except SettingsError as exc:
        # What _EnvSource does not name itself (a source that cannot be read at all).
        raise InvalidInput(
            f"invalid settings: {exc}", f"check {home / CONFIG_FILE} and KREDENC_* variables"
        ) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "settings"
        message = first["msg"].removeprefix("Value error, ")  # pydantic's, for a ValueError
        raise InvalidInput(
            f"invalid setting {where}: {message}",
            f"check {home / CONFIG_FILE} and KREDENC_* variables",
        ) from None
