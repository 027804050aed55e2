"""What the ``spelling`` settings cost a search and a recall, and how often they find
the word meant.

A store of ``--n`` corpus memories with their MiniLM vectors (``bench_recall.py``'s
``bench_home``, fresh: the corpus's cached vectors seed the embedding cache), the card
index merged once as the housekeeper's compaction does. Each of ``--queries`` corpus
questions is asked as written and with one typo (``probe_typos.typo``: two neighbouring
letters swapped, or one dropped, in one content word of 5+ letters, seeded by the
question's number). Each text is timed, in one warm process, with the setting off and
on back to back (the query-vector cache cleared before each, so neither reuses the
other's embedding):

* ``corrections``: ``Index.corrections`` over the question's words alone;
* ``lexical``: the lexical leg as ``run_legs`` runs it (50 deep), the lookup included;
* ``hybrid``: ``Kredenc.search`` (k 10), the ``spelling`` setting off and on;
* ``recall``: the recall reflex on the question as a user message, ``recall_spelling``
  off and on.

Also: the first correction's time (it reads the index's terms, once per process), and
how many typo'd words were corrected back to the word typo'd (its index term), to
another word, or not at all; how many questions as written had a word "corrected" (a
word no card holds, with a held neighbour).

    .venv/bin/python benchmarks/bench_spelling.py [--n 100000] [--queries 500]

Prints a table; writes benchmarks/results/spelling.json.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

from _common import percentile, print_table, write_results
from bench_recall import NS, bench_home
from corpus import queries
from probe_typos import typo


def main(argv: Sequence[str] | None = None) -> int:
    import onnxruntime  # noqa: F401  (before usearch, see benchmarks/corpus.py)

    from kredenc import Kredenc
    from kredenc.recall import recall
    from kredenc.retrieve.search import SearchParams, run_legs
    from kredenc.retrieve.terms import query_terms
    from kredenc.storage.index.filters import Filters

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100_000, help="memories filed")
    parser.add_argument("--queries", type=int, default=500, help="questions asked")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="the PostgreSQL index instead (kredenc.testing.postgres starts one; hash "
        "vectors): the lookup and the lexical leg only (writes spelling-postgres.json)",
    )
    args = parser.parse_args(argv)
    asked = [q for q, _ in queries(args.queries, n=args.n)]
    variants = {
        "as written": asked,
        "swap": [typo(q, str(i), "swap") for i, q in enumerate(asked)],
        "drop": [typo(q, str(i), "drop") for i, q in enumerate(asked)],
    }
    if args.postgres:
        return postgres_main(args.n, args.queries, variants)
    out: dict[str, Any] = {"n": args.n, "queries": args.queries}
    rows: list[dict[str, Any]] = []
    fate_rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with bench_home(args.n, fresh=True) as home, Kredenc.open(home, NS) as kb:
        index = kb.index
        index.compact()
        vocabulary = index._vocabulary  # the index terms of a word
        out["filed_s"] = round(time.perf_counter() - t0, 1)
        settings = kb.store.settings
        # The store's query-vector LRU (``QueryVectors``). Stop 33 looked for a
        # ``cache_clear`` it does not have, so nothing was cleared and every recall and
        # hybrid row after a text's first timing reused its embedding.
        clear = kb.embed_query.clear
        # The first correction reads the index's terms (once per process): timed alone.
        start = time.perf_counter()
        index.corrections(NS, ["kestral"], Filters())
        out["terms_read_ms"] = round((time.perf_counter() - start) * 1000, 1)
        out["terms"] = len(vocabulary._terms or {})
        # Warm: the model, the vector shards.
        for text in asked[:20]:
            kb.search(text, k=10)
            index.corrections(NS, query_terms(text), Filters())

        def timed(fn: Callable[[], object]) -> float:
            clear()
            start = time.perf_counter()
            fn()
            return (time.perf_counter() - start) * 1000

        for i, (name, texts) in enumerate(variants.items()):
            times: dict[str, list[float]] = {}
            fates = {"back": 0, "other": 0, "none": 0, "corrected": 0}
            for j, (text, original) in enumerate(zip(texts, asked, strict=True)):
                words = query_terms(text)
                fixes = index.corrections(NS, words, Filters())
                times.setdefault("corrections", []).append(
                    timed(lambda w=words: index.corrections(NS, w, Filters()))  # type: ignore[misc]
                )
                for on in (False, True):
                    tag = "on" if on else "off"
                    settings.spelling = settings.recall_spelling = on
                    lexical = SearchParams(mode="lexical", spelling=on)
                    times.setdefault(f"lexical {tag}", []).append(
                        timed(
                            lambda t=text, p=lexical: run_legs(  # type: ignore[misc]
                                index, NS, t, p, Filters(), kb.embed_query
                            )
                        )
                    )
                    times.setdefault(f"hybrid {tag}", []).append(
                        timed(lambda t=text: kb.search(t, k=10))  # type: ignore[misc]
                    )
                    messages = [{"role": "user", "content": text}]
                    session = f"s{i}-{j}-{tag}"
                    times.setdefault(f"recall {tag}", []).append(
                        timed(
                            lambda m=messages, s=session: recall(  # type: ignore[misc]
                                kb.store, NS, m, session_id=s
                            )
                        )
                    )
                fates["corrected"] += bool(fixes)
                if name != "as written" and text != original:
                    meant = set(query_terms(original)) - set(words)
                    typed = set(words) - set(query_terms(original))
                    got = {fixes[w] for w in typed if w in fixes}
                    if not got:
                        fates["none"] += 1
                    elif {vocabulary.stems(w) for w in got} <= {vocabulary.stems(w) for w in meant}:
                        fates["back"] += 1
                    else:
                        fates["other"] += 1
            entry = {
                k: {f"p{p}": round(percentile(v, p), 3) for p in (50, 95, 99)}
                for k, v in times.items()
            }
            out[name] = {"ms": entry, "fates": fates}
            rows += [{"questions": name, "timed": k, **v} for k, v in entry.items()]
            fate_rows.append({"questions": name, **fates})
    print(f"the first correction read {out['terms']:,} index terms in {out['terms_read_ms']} ms")
    print_table(f"spelling at {args.n:,} memories (ms)", rows)
    print_table(
        "typo'd word corrected back to the word meant, to another, not at all; "
        "questions with a correction",
        fate_rows,
    )
    write_results("spelling", out)
    return 0


def postgres_main(n: int, m: int, variants: dict[str, list[str]]) -> int:
    """The lookup and the lexical leg, off and on, over a PostgreSQL index of ``n``
    corpus memories (hash vectors: the dense leg plays no part)."""
    import tempfile
    from pathlib import Path

    from corpus import memories
    from kredenc import Kredenc
    from kredenc.retrieve.search import SearchParams, run_legs
    from kredenc.retrieve.terms import query_terms
    from kredenc.storage.index.filters import Filters
    from kredenc.testing.embedders import HashEmbedder
    from kredenc.testing.postgres import PostgresServer

    server = PostgresServer().start()
    rows: list[dict[str, Any]] = []
    out: dict[str, Any] = {"n": n, "queries": m, "backend": "postgres"}
    try:
        dsn = server.create_database("spelling")
        with tempfile.TemporaryDirectory() as tmp, Kredenc.open(
            Path(tmp) / "pg", NS, embedder=HashEmbedder(dim=384), durability="batch",
            backend="postgres", postgres_dsn=dsn, postgres_schema="spelling",
        ) as kb:  # fmt: skip
            texts = memories(n)
            for start in range(0, n, 500):
                kb.remember_many([{"text": t} for t in texts[start : start + 500]])
            index = kb.index
            for text in variants["as written"][:20]:  # warm: connections, plans
                index.corrections(NS, query_terms(text), Filters())
            for name, texts_ in variants.items():
                times: dict[str, list[float]] = {}
                for text in texts_:
                    words = query_terms(text)
                    start_ = time.perf_counter()
                    index.corrections(NS, words, Filters())
                    times.setdefault("corrections", []).append(
                        (time.perf_counter() - start_) * 1000
                    )
                    for on in (False, True):
                        params = SearchParams(mode="lexical", spelling=on)
                        start_ = time.perf_counter()
                        run_legs(index, NS, text, params, Filters(), kb.embed_query)
                        times.setdefault(f"lexical {'on' if on else 'off'}", []).append(
                            (time.perf_counter() - start_) * 1000
                        )
                entry = {
                    k: {f"p{p}": round(percentile(v, p), 3) for p in (50, 95, 99)}
                    for k, v in times.items()
                }
                out[name] = {"ms": entry}
                rows += [{"questions": name, "timed": k, **v} for k, v in entry.items()]
    finally:
        server.stop()
    print_table(f"spelling on PostgreSQL, {n:,} memories (ms)", rows)
    write_results("spelling-postgres", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
