"""``kredenc eval beir`` on both backends: nDCG@10 and the per-query top-10 agreement.

Runs ``kredenc eval beir DIR --mode M ... --run RUN --json`` once with ``--backend
sqlite`` and once with ``--backend postgres`` (the test PostgreSQL of
``kredenc.testing.postgres``), both on the same embedding cache (``--cache``: the
PostgreSQL store is fed from it, so both rank the same vectors and nothing is embedded
twice), then compares each mode's run files with ``kredenc.eval.agreement``: the share
of queries whose top 10 are the same set and the same list, and the mean overlap@10,
with 95 % bootstrap intervals::

    nice -n 10 python benchmarks/bench_postgres_beir.py ../shared/data/scifact

``--reuse-sqlite`` takes the SQLite runs already in ``--out`` (``sqlite.json`` and
``sqlite.<mode>.jsonl``). Writes ``benchmarks/results/postgres_beir.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kredenc.eval import agreement, read_run
from kredenc.interfaces.cli import main as cli
from kredenc.testing.postgres import PostgresServer

CACHE = Path("~/.cache/kredenc/eval-embeddings.db").expanduser()
RESULTS = Path(__file__).parent / "results" / "postgres_beir.json"
MODES = ("lexical", "dense", "hybrid")


def eval_beir(directory: str, modes: Sequence[str], run: Path, extra: list[str]) -> Any:
    """The ``--json`` summaries of ``kredenc eval beir`` (one per mode, in order)."""
    args = ["eval", "beir", directory, "--run", str(run), "--json", *extra]
    for mode in modes:
        args += ["--mode", mode]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            cli(args)
        except SystemExit as exc:
            if exc.code:
                raise
    summaries = json.loads(out.getvalue().strip().splitlines()[-1])
    return summaries if isinstance(summaries, list) else [summaries]


def run_file(out: Path, backend: str, mode: str, modes: Sequence[str]) -> Path:
    """Where ``--run`` left a mode's run (``cli_eval._suffixed`` with several modes)."""
    return out / (f"{backend}.{mode}.jsonl" if len(modes) > 1 else f"{backend}.jsonl")


def cell(agree: dict[str, Any], name: str) -> str:
    lo, hi = agree[f"{name}_ci95"]
    return f"{agree[name]:.4f} [{lo:.3f},{hi:.3f}]"


def ms(timing: dict[str, float]) -> str:
    return f"{timing['search_ms_p50']:.0f}/{timing['search_ms_p95']:.0f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("--mode", dest="modes", action="append", choices=MODES)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--out", type=Path, default=Path("/tmp/kredenc-bench-postgres-beir"))
    parser.add_argument("--reuse-sqlite", action="store_true")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    modes = tuple(args.modes or MODES)
    args.out.mkdir(parents=True, exist_ok=True)
    cache = ["--cache", str(args.cache)]
    summaries: dict[str, list[Any]] = {}
    sqlite_json = args.out / "sqlite.json"
    if args.reuse_sqlite:
        loaded = json.loads(sqlite_json.read_text())
        summaries["sqlite"] = loaded if isinstance(loaded, list) else [loaded]
    else:
        t0 = time.perf_counter()
        summaries["sqlite"] = eval_beir(
            args.directory, modes, args.out / "sqlite.jsonl", [*cache, "--backend", "sqlite"]
        )
        sqlite_json.write_text(json.dumps(summaries["sqlite"]))
        print(f"sqlite: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    t0 = time.perf_counter()
    with PostgresServer() as server:
        dsn = server.create_app_database("kredenc", role="kredenc")
        pg = [*cache, "--backend", "postgres", "--postgres-dsn", dsn]
        summaries["postgres"] = eval_beir(args.directory, modes, args.out / "postgres.jsonl", pg)
    print(f"postgres: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    (args.out / "postgres.json").write_text(json.dumps(summaries["postgres"]))

    rows = []
    header = (
        f"{'mode':8} {'nDCG@10 sqlite':>14} {'postgres':>9} {'delta':>8} {'same set':>22}"
        f" {'same order':>22} {'overlap@10':>22} {'p50/p95 ms sqlite':>18} {'postgres':>12}"
    )
    print(header)
    for mode in modes:
        by = {b: next(s for s in summaries[b] if s["config"]["mode"] == mode) for b in summaries}
        agree = agreement(
            read_run(run_file(args.out, "sqlite", mode, modes)),
            read_run(run_file(args.out, "postgres", mode, modes)),
            10,
        )
        ndcg = {b: by[b]["metrics"]["ndcg@10"] for b in by}
        timing = {b: by[b]["timing"] for b in by}
        rows.append(
            {
                "mode": mode,
                "ndcg@10": ndcg,
                "recall@100": {b: by[b]["metrics"]["recall@100"] for b in by},
                "agreement": agree,
                "timing": timing,
            }
        )

        print(
            f"{mode:8} {ndcg['sqlite']:14.4f} {ndcg['postgres']:9.4f}"
            f" {ndcg['postgres'] - ndcg['sqlite']:+8.4f} {cell(agree, 'same_set'):>22}"
            f" {cell(agree, 'same_order'):>22} {cell(agree, 'overlap'):>22}"
            f" {ms(timing['sqlite']):>18} {ms(timing['postgres']):>12}"
        )
    args.results.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "dataset": args.directory,
        "queries": rows[0]["agreement"]["queries"] if rows else 0,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "modes": rows,
    }
    args.results.write_text(json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
