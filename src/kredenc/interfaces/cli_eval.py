"""``kredenc eval …``: retrieval quality on public datasets, with the engine as retriever."""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from kredenc.interfaces.cli_common import context, json_option

DEFAULT_CACHE = Path("~/.cache/kredenc/eval-embeddings.db")
_BACKEND = "kredenc.eval.backend"  # click context meta: the --backend choice
_DSN = "kredenc.eval.postgres_dsn"
_UNITS = "kredenc.eval.units"  # click context meta: the --units choice
_WINDOW = "kredenc.eval.window"  # click context meta: the --window count


@click.group(name="eval")
def eval_group() -> None:
    """Measure retrieval and judge quality on public datasets (BEIR, multihop, LoCoMo,
    LongMemEval, RAGTruth, HaluEval)."""


def _keep(key: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def keep(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is not None:
            ctx.meta[key] = value

    return keep


def eval_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--mode",
            "modes",
            multiple=True,
            type=click.Choice(["hybrid", "lexical", "dense"]),
            help="Retrieval mode; repeat to compare (default hybrid).",
        ),
        click.option(
            "--hops", "hops", multiple=True, type=click.IntRange(0, 3), help="Graph hops."
        ),
        click.option(
            "--iterative",
            is_flag=True,
            help="Hops are bridge-search rounds (search(iterative=True)), not graph hops.",
        ),
        click.option("--rerank", default=None, help="Reranker name or model path."),
        click.option(
            "--run", "run_file", type=click.Path(dir_okay=False), help="Write ranked lists."
        ),
        click.option(
            "--cache",
            type=click.Path(dir_okay=False),
            default=str(DEFAULT_CACHE),
            show_default=True,
            help="Embedding cache shared by eval runs.",
        ),
        click.option(
            "--backend",
            type=click.Choice(["sqlite", "postgres"]),
            default=None,
            expose_value=False,
            callback=_keep(_BACKEND),
            help="Storage backend of the eval's store (default: the settings', sqlite). "
            "postgres: a new schema per configuration, fed from --cache, dropped after.",
        ),
        click.option(
            "--postgres-dsn",
            default=None,
            expose_value=False,
            callback=_keep(_DSN),
            help="PostgreSQL for --backend postgres (default KREDENC_POSTGRES_DSN).",
        ),
        json_option,
    ]
    for option in reversed(options):
        func = option(func)
    return func


def units_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--units`` and ``--window``: how a corpus's documents are cut and filed."""
    func = click.option(
        "--window",
        type=click.IntRange(0, 5),
        default=None,
        expose_value=False,
        callback=_keep(_WINDOW),
        help="Neighbouring units on each side filed as a unit's context (found by, "
        "not embedded); default 1 for sentences, 0 for chunks.",
    )(func)
    return click.option(
        "--units",
        type=click.Choice(["chunks", "sentences"]),
        default=None,
        expose_value=False,
        callback=_keep(_UNITS),
        help="What a document is filed as: chunks of chunk_size characters (default), "
        "or sentence windows (a sentence or a few, up to 300 characters, titled).",
    )(func)


@contextmanager
def _eval_store(cache: str) -> Iterator[Any]:
    """The store an eval configuration runs in: ``--store``, else a temporary one.

    On PostgreSQL a temporary store gets a schema of its own (``eval_<hex>``, dropped
    at the end: the BM25 statistics span every namespace of a schema, as they span the
    SQLite index, so configurations must not share one) and its embedding cache is
    fed from the file cache ``cache`` before and copied back into it after, so both
    backends rank the same vectors and nothing is embedded twice."""
    from kredenc.config import load_settings
    from kredenc.engine import Kredenc
    from kredenc.storage.backends import is_postgres

    c = context()
    meta = click.get_current_context().meta
    overrides: dict[str, Any] = {"backend": meta.get(_BACKEND), "postgres_dsn": meta.get(_DSN)}
    tmp = None
    store = c.store
    if store is None:
        tmp = tempfile.mkdtemp(prefix="kredenc-eval-")
        store = tmp
    postgres = is_postgres(load_settings(store, **overrides))
    schema = None
    if postgres and tmp is not None:
        schema = f"eval_{secrets.token_hex(4)}"
        overrides["postgres_schema"] = schema
    cache_path = Path(cache).expanduser()
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        kb = Kredenc.open(store, "eval", durability="none", embed_cache=cache_path, **overrides)
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    dsn = kb.settings.postgres_dsn.get_secret_value()
    try:
        if postgres:
            _postgres_index(kb).import_file_cache(cache_path)
        yield kb
        if postgres:
            _postgres_index(kb).export_file_cache(cache_path)
    finally:
        kb.close()
        if schema is not None:
            from kredenc.storage.postgres.index import PostgresIndex

            PostgresIndex.drop_schema(dsn, schema)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _postgres_index(kb: Any) -> Any:
    from kredenc.storage.postgres.index import PostgresIndex

    index = kb.store.index
    assert isinstance(index, PostgresIndex)
    return index


def _configs(modes: Sequence[str], hops: Sequence[int], iterative: bool) -> list[dict[str, Any]]:
    out = []
    for mode in modes or ("hybrid",):
        for hop in hops or (0,):
            cfg: dict[str, Any] = {"mode": mode}
            if hop or iterative:
                cfg["hops"] = hop
            if iterative:
                cfg["iterative"] = True
            out.append(cfg)
    return out


def _run_all(
    dataset: Any,
    modes: Sequence[str],
    hops: Sequence[int],
    rerank: str | None,
    run_file: str | None,
    cache: str,
    record_type: str,
    iterative: bool = False,
    dated: bool = False,
) -> list[dict[str, Any]]:
    from kredenc.eval import run
    from kredenc.eval.engine_retriever import EngineRetriever

    c = context()
    meta = click.get_current_context().meta
    configs = _configs(modes, hops, iterative)
    results = []
    for cfg in configs:
        # A fresh store per configuration: FTS5's BM25 statistics span the whole
        # table, so corpora filed earlier in the same store (other namespaces) would
        # shift this run's lexical scores, and a row would depend on the rows before it.
        with _eval_store(cache) as kb:
            opts = dict(cfg)
            if rerank:
                opts["rerank"] = rerank
            retriever = EngineRetriever(
                kb.store,
                record_type=record_type,
                units=meta.get(_UNITS, "chunks"),
                window=meta.get(_WINDOW),
                mention_links=kb.settings.mention_links,
                dated=dated,
                **opts,
            )
            target = None
            if run_file:
                target = run_file if len(configs) == 1 else _suffixed(run_file, cfg)
            result = run(retriever, dataset, run_file=target)
        summary = result.summary()
        summary["config"] = opts
        if retriever.units != "chunks" or retriever.window:
            summary["config"].update(units=retriever.units, window=retriever.window)
        if retriever.queries:
            summary["timing"]["searches_per_query"] = round(
                retriever.searches / retriever.queries, 3
            )
        results.append(summary)
        if not c.json:
            _print_summary(summary)
    if c.json:
        click.echo(json.dumps(results if len(results) > 1 else results[0], ensure_ascii=False))
    return results


def _suffixed(path: str, cfg: dict[str, Any]) -> str:
    p = Path(path)
    tag = "-".join(
        f"{k}{v}" if k == "hops" else "iterative" if k == "iterative" else str(v)
        for k, v in cfg.items()
    )
    return str(p.with_name(f"{p.stem}.{tag}{p.suffix}"))


def _print_summary(summary: dict[str, Any]) -> None:
    cfg = " ".join(f"{k}={v}" for k, v in summary["config"].items())
    click.echo(f"\n{summary['dataset']}  [{cfg}]")
    _print_metrics(summary["metrics"], "  ")
    timing = summary.get("timing", {})
    click.echo(
        "  timing: index {index_s:.1f} s, search p50 {search_ms_p50:.1f} ms, "
        "p95 {search_ms_p95:.1f} ms".format(**timing)
        + (
            f", {timing['searches_per_query']:.2f} searches a query"
            if "searches_per_query" in timing
            else ""
        )
    )


def _print_metrics(metrics: dict[str, Any], indent: str) -> None:
    for key, value in metrics.items():
        if isinstance(value, list) and len(value) == 2 and all(isinstance(v, float) for v in value):
            click.echo(f"{indent}{key}: [{value[0]:.4f}, {value[1]:.4f}]")  # an interval
        elif isinstance(value, dict):
            click.echo(f"{indent}{key}:")
            _print_metrics(value, indent + "  ")
        elif isinstance(value, float):
            click.echo(f"{indent}{key}: {value:.4f}")
        elif not isinstance(value, list):
            click.echo(f"{indent}{key}: {value}")


@eval_group.command("beir")
@click.argument("directory", type=click.Path(file_okay=False))
@eval_options
@units_options
def eval_beir(
    directory: str,
    modes: tuple[str, ...],
    hops: tuple[int, ...],
    iterative: bool,
    rerank: str | None,
    run_file: str | None,
    cache: str,
) -> None:
    """BEIR layout (corpus.jsonl, queries.jsonl, qrels/test.tsv): nDCG@10, Recall@100."""
    from kredenc.eval import load_beir

    _run_all(load_beir(directory), modes, hops, rerank, run_file, cache, "chunk", iterative)


@eval_group.command("multihop")
@click.argument("questions", type=click.Path(dir_okay=False))
@click.argument("corpus", type=click.Path(dir_okay=False))
@eval_options
@units_options
def eval_multihop(
    questions: str,
    corpus: str,
    modes: tuple[str, ...],
    hops: tuple[int, ...],
    iterative: bool,
    rerank: str | None,
    run_file: str | None,
    cache: str,
) -> None:
    """HotpotQA / MuSiQue: Recall@k and all-gold@k for k = 2, 5, 10, with 95 % CIs.

    Passages that name another passage's title are linked (``mention_links``), and
    without ``--hops`` the search walks one hop along those links (``--hops 0`` for
    the legs alone). With ``--iterative``, ``--hops N`` is N bridge-search rounds
    instead (default 0).
    """
    from kredenc.eval import load_multihop

    dataset = load_multihop(questions, corpus)
    default = (0,) if iterative else (1,)
    _run_all(dataset, modes, hops or default, rerank, run_file, cache, "chunk", iterative)


@eval_group.command("locomo")
@click.argument("file", type=click.Path(dir_okay=False))
@eval_options
def eval_locomo(
    file: str,
    modes: tuple[str, ...],
    hops: tuple[int, ...],
    iterative: bool,
    rerank: str | None,
    run_file: str | None,
    cache: str,
) -> None:
    """LoCoMo: turn-level evidence recall@k (categories 1-4; 5 apart)."""
    from kredenc.eval import load_locomo

    _run_all(load_locomo(file), modes, hops, rerank, run_file, cache, "turn", iterative)


@eval_group.command("longmemeval")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--granularity", type=click.Choice(["session", "turn"]), default="session", show_default=True
)
@click.option(
    "--pooled",
    is_flag=True,
    help="Every question's sessions in one store (deduplicated), each question against all.",
)
@click.option(
    "--dated",
    is_flag=True,
    help="Each session filed at its date, each question asked at its date: a time the "
    "question names ('two months ago') is read (search's asked_at).",
)
@eval_options
def eval_longmemeval(
    file: str,
    granularity: str,
    pooled: bool,
    dated: bool,
    modes: tuple[str, ...],
    hops: tuple[int, ...],
    iterative: bool,
    rerank: str | None,
    run_file: str | None,
    cache: str,
) -> None:
    """LongMemEval: recall_any@k, recall_all@k, ndcg_any@k (official protocol).

    ``--pooled``: every session of every question in one store, deduplicated by session
    id, each question searched against all of them (session level; recall_any@k and
    recall_all@k with 95 % CIs). ``--dated``: sessions filed at their dates, questions
    asked at theirs (the official protocol has no dates)."""
    from kredenc.eval import load_longmemeval, load_longmemeval_pooled

    if pooled:
        if granularity != "session":
            raise click.UsageError("--pooled is session level: drop --granularity turn")
        dataset: Any = load_longmemeval_pooled(file)
    else:
        dataset = load_longmemeval(file, granularity=granularity)  # type: ignore[arg-type]
    _run_all(dataset, modes, hops, rerank, run_file, cache, "turn", iterative, dated=dated)


@eval_group.command("judge")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--run", "run_file", type=click.Path(dir_okay=False), help="Write one line per judged answer."
)
@click.option(
    "--cache",
    type=click.Path(dir_okay=False),
    default=str(DEFAULT_CACHE),
    show_default=True,
    help="Embedding cache shared by eval runs.",
)
@json_option
def eval_judge(file: str, run_file: str | None, cache: str) -> None:
    """RAGTruth QA / HaluEval QA: the deterministic judge's accuracy, precision, recall,
    F1 and AUROC on the hallucinated class (RAGTruth: span overlap too), with 95 %
    bootstrap intervals and the length and lexical-overlap floors beside."""
    from kredenc.eval.judge import load_judge_file, run_judge, score_run, write_judge_run
    from kredenc.grounding.judge import SupportJudge

    c = context()
    fmt, items = load_judge_file(file)  # a bad file fails here, before the model loads
    with _eval_store(cache) as kb:
        result = run_judge(SupportJudge(kb.store.embed_cached), fmt, items)
    if run_file:
        write_judge_run(run_file, result)
    summary = score_run(result)
    summary["file"] = file
    if c.json:
        click.echo(json.dumps(summary, ensure_ascii=False))
        return
    _print_judge(summary)


def _print_judge(summary: dict[str, Any]) -> None:
    m = summary["metrics"]
    click.echo(f"\n{summary['dataset']}  {summary['file']}")
    click.echo(f"  judged {m['n']} answers, {m['hallucinated']} hallucinated")
    rows = [(k, m[k]) for k in ("auroc", "f1", "precision", "recall", "accuracy")]
    rows += [(k, m[k]) for k in ("span_precision", "span_recall") if k in m]
    rows += [(f"floor {k}", v) for k, v in m["floors"].items()]
    for name, v in rows:
        lo, hi = v["ci95"]
        click.echo(f"  {name:30s} {v['value']:.3f}  [{lo:.3f}, {hi:.3f}]")


@eval_group.command("agree")
@click.argument("run_a", type=click.Path(dir_okay=False, exists=True))
@click.argument("run_b", type=click.Path(dir_okay=False, exists=True))
@click.option("--k", "k", default=10, show_default=True, type=click.IntRange(1), help="Top k.")
@json_option
def eval_agree(run_a: str, run_b: str, k: int) -> None:
    """How often two run files (``--run``) of the same queries give the same top k (e.g.
    one per backend): identical sets, identical order and mean overlap, with 95 %
    bootstrap intervals, and the queries whose sets differ."""
    from kredenc.eval import agreement, read_run

    result = agreement(read_run(run_a), read_run(run_b), k)
    if context().json:
        click.echo(json.dumps(result, ensure_ascii=False))
        return
    click.echo(f"{result['queries']} queries, top {k}")
    for name in ("same_set", "same_order", "overlap"):
        lo, hi = result[f"{name}_ci95"]
        click.echo(f"  {name:10s} {result[name]:.4f}  [{lo:.4f}, {hi:.4f}]")
    differ = result["differ"]
    if differ:
        more = f" (+{len(differ) - 20} more)" if len(differ) > 20 else ""
        click.echo(f"  sets differ: {' '.join(differ[:20])}{more}")


# -- eval answer (the answer loop on the Attention cases) ----------------------------


@eval_group.command("answer")
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option(
    "--docs",
    required=True,
    type=click.Path(file_okay=False, exists=True),
    help="Folder the cases' documents are under (e.g. ../shared/data/documents).",
)
@click.option(
    "--cache",
    type=click.Path(dir_okay=False),
    default=str(DEFAULT_CACHE),
    show_default=True,
    help="Embedding cache shared by eval runs.",
)
@json_option
def eval_answer(file: str | None, docs: str, cache: str) -> None:
    """The answer loop on questions with expected facts (default: the shipped Attention
    cases): a table of cases and the check each failed; exit 1 when one fails."""
    from kredenc.eval.answer import (
        CaseResult,
        default_cases_path,
        load_answer_cases,
        run_answer_eval,
        summarise,
    )

    c = context()
    cases = load_answer_cases(file or default_cases_path())

    header = [f"{'':4}  {'case':<24} {'conf':>3}  failed check"]  # before the first case

    def show(r: CaseResult) -> None:
        if not c.json:
            while header:
                click.echo(header.pop())
            ev = r.answer.evaluation if r.answer else None
            conf = f"{ev.confidence_score:>3}" if ev else "  -"
            why = "; ".join(r.failures)
            click.echo(f"{'pass' if r.passed else 'FAIL'}  {r.id:<24} {conf}  {why}")

    with _eval_store(cache) as kb:
        results = run_answer_eval(kb, cases, docs, on_case=show)
    summary = summarise(results)
    if c.json:
        payload = {"summary": summary, "cases": [r.to_json() for r in results]}
        click.echo(json.dumps(payload, ensure_ascii=False))
    else:
        low, high = summary["pass_rate_ci95"]
        click.echo(
            f"\n{summary['passed']}/{summary['cases']} passed "
            f"(pass rate {summary['pass_rate']:.2f}, 95 % CI {low:.2f}-{high:.2f})"
        )
    if summary["failed"]:
        raise SystemExit(1)


COMMANDS: tuple[click.Command, ...] = (eval_group,)
