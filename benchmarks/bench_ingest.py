"""Ingesting a real PDF end to end, and how much of it is not the embedding model.

Targets (knowledge-base issue, 2-core machine): "Attention Is All You Need" (15 pages)
ingested end to end in <= 10 s, with parsing + chunking + indexing <= 10 % of that (the
rest is the embedding model).

Each run ingests the paper into a fresh store with the real MiniLM embedder (model
loaded first and timed apart, as a running service has it loaded) and an empty
embedding cache, so every chunk is embedded. The embedder is wrapped to time its calls;
"not the model" is the ingest's wall time minus the time spent inside ``embed``. Parsing
(PDFium) and chunking are also timed alone, in CPU seconds, which a busy machine inflates
less than wall time.

    .venv/bin/python benchmarks/bench_ingest.py            # 3 runs, medians
    .venv/bin/python benchmarks/bench_ingest.py --runs 1 --pdf other.pdf

Prints a table and writes benchmarks/results/ingest.json.

With ``--corpus DIR`` (a BEIR folder, e.g. ``../shared/data/scifact``) it measures a
corpus instead, in this process alone (memory issue 16: SciFact's 5,183 abstracts,
ingest and search peak <= 600 MB resident): the corpus filed as ``kredenc eval beir``
files it (``EngineRetriever``: passages in batches, real MiniLM, a fresh store and a fresh
embedding cache, so every text is embedded; never the shared eval cache), then every test
query searched (hybrid). It reports docs/s (model load timed apart), the peak resident
memory of the ingest and of the searches (``ru_maxrss``, and a 10 ms sampler of VmRSS
per phase), and nDCG@10 (identical embeddings give the same figure).

    nice -n 10 .venv/bin/python benchmarks/bench_ingest.py --corpus ../shared/data/scifact
    .venv/bin/python benchmarks/bench_ingest.py --corpus ../shared/data/scifact --limit 500

That writes benchmarks/results/ingest-<corpus>.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import median, peak_rss_mb, print_table, rss_mb, write_results

HERE = Path(__file__).resolve().parent
PDF = (
    HERE.parent.parent
    / "shared"
    / "data"
    / "documents"
    / "pdf"
    / "attention_is_all_you_need_1706.03762v7.pdf"
)
TARGET_TOTAL_S = 10.0
TARGET_NOT_MODEL_SHARE = 0.10
TARGET_CORPUS_PEAK_MB = 600.0


class TimedEmbedder:
    """An embedder that adds up the wall time spent inside its ``embed`` calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.texts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed(self, texts: Sequence[str]) -> Any:
        start = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - start
            self.texts += len(texts)


def one_run(pdf: Path, embedder: TimedEmbedder) -> dict[str, Any]:
    from kredenc import Kredenc
    from kredenc.ingest.chunker import chunk
    from kredenc.ingest.loaders.pdf import PdfLoader

    cpu = time.process_time()
    (doc,) = PdfLoader().load(str(pdf))
    parse_cpu = time.process_time() - cpu
    cpu = time.process_time()
    chunks = chunk(doc)
    chunk_cpu = time.process_time() - cpu

    home = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    try:
        embedder.seconds, embedder.texts = 0.0, 0
        with Kredenc.open(home / "store", embedder=embedder) as kb:  # type: ignore[arg-type]
            start = time.perf_counter()
            report = kb.ingest([pdf])
            total = time.perf_counter() - start
    finally:
        shutil.rmtree(home, ignore_errors=True)
    if report.failed:
        raise SystemExit(f"ingest failed: {report.failed}")
    return {
        "total_s": total,
        "embed_s": embedder.seconds,
        "not_model_s": total - embedder.seconds,
        "not_model_share": (total - embedder.seconds) / total,
        "parse_cpu_s": parse_cpu,
        "chunk_cpu_s": chunk_cpu,
        "chunks": report.chunks,
        "chunks_alone": len(chunks),
        "embedded_texts": embedder.texts,
    }


class RssSampler:
    """The highest VmRSS seen, sampled every ``interval`` seconds on a daemon thread;
    ``phase(name)`` starts a new maximum (``peaks[name]``). Every ``report`` seconds it
    prints the phase, its peak so far and the time to stderr (a long run that is stopped
    still says how far it got)."""

    def __init__(self, interval: float = 0.01, report: float = 60.0) -> None:
        self.interval = interval
        self.report = report
        self._started = time.perf_counter()
        self._reported = self._started
        self.texts = 0  # texts embedded so far (see ``count``)
        self.peaks: dict[str, float] = {}
        self._phase = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def phase(self, name: str) -> None:
        self._phase = name
        self.peaks[name] = rss_mb()

    def count(self, embedder: Any) -> None:
        """Count the texts ``embedder`` embeds from now on (for the progress lines)."""
        inner = embedder.embed

        def embed(texts: Sequence[str]) -> Any:
            self.texts += len(texts)
            return inner(texts)

        embedder.embed = embed

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            if self._phase:
                self.peaks[self._phase] = max(self.peaks[self._phase], rss_mb())
                now = time.perf_counter()
                if now - self._reported >= self.report:
                    self._reported = now
                    print(
                        f"  [{now - self._started:6.0f} s] {self._phase}: {self.texts} texts "
                        f"embedded, peak "
                        f"{self.peaks[self._phase]:.0f} MB, now {rss_mb():.0f} MB, "
                        f"load average {os.getloadavg()[0]:.1f}",
                        file=sys.stderr,
                        flush=True,
                    )


def corpus_run(corpus: Path, limit: int | None) -> dict[str, Any]:
    """Ingest a BEIR corpus as ``kredenc eval beir`` does, then search its test queries."""
    from kredenc import Kredenc
    from kredenc.eval.beir import load_beir
    from kredenc.eval.engine_retriever import EngineRetriever

    dataset = load_beir(corpus)
    docs = dataset.docs[:limit] if limit else dataset.docs
    home = Path(tempfile.mkdtemp(prefix="bench-ingest-corpus-"))
    ranked: dict[str, list[str]] = {}
    try:
        with RssSampler() as rss:
            rss.phase("open")
            kb = Kredenc.open(
                home / "store", "bench", durability="none", embed_cache=home / "embeddings.db"
            )
            with kb:
                start = time.perf_counter()
                kb.store.embedder.load()  # type: ignore[attr-defined]
                load_s = time.perf_counter() - start
                after_load = rss_mb()
                rss.count(kb.store.embedder)
                retriever = EngineRetriever(kb.store)
                rss.phase("ingest")
                cpu, start = time.process_time(), time.perf_counter()
                retriever.index(docs)
                ingest_s = time.perf_counter() - start
                ingest_cpu_s = time.process_time() - cpu
                ingest_peak = peak_rss_mb()
                after_ingest = rss_mb()
                rss.phase("search")
                start = time.perf_counter()
                for q in dataset.queries:
                    ranked[q.qid] = retriever.search(q.text, dataset.k)
                search_s = time.perf_counter() - start
            overall_peak = peak_rss_mb()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    ndcg = dataset.score(ranked).get("ndcg@10") if not limit else None
    return {
        "corpus": str(corpus),
        "docs": len(docs),
        "queries": len(ranked),
        "model_load_s": load_s,
        "ingest_s": ingest_s,
        "ingest_cpu_s": ingest_cpu_s,
        "docs_per_s": len(docs) / ingest_s,
        "search_s": search_s,
        "rss_after_load_mb": after_load,
        "rss_after_ingest_mb": after_ingest,
        "peak_rss_ingest_mb": ingest_peak,
        "peak_rss_mb": overall_peak,
        "sampled_peak_mb": dict(rss.peaks),
        "ndcg@10": ndcg,
    }


def corpus_main(corpus: Path, limit: int | None) -> int:
    if not (corpus / "corpus.jsonl").is_file():
        print(f"error: {corpus} is not a BEIR folder (no corpus.jsonl)", file=sys.stderr)
        return 2
    import onnxruntime  # noqa: F401  (before usearch, see benchmarks/corpus.py)

    res = corpus_run(corpus, limit)
    peaks = res["sampled_peak_mb"]
    rows = [
        {
            "what": f"{corpus.name}: ingest ({res['docs']:,} docs)",
            "measured": f"{res['docs_per_s']:.1f} docs/s ({res['ingest_s']:.1f} s)",
            "target": "",
            "ok": "",
        },
        {
            "what": "  peak RSS, open + ingest",
            "measured": f"{res['peak_rss_ingest_mb']:.0f} MB",
            "target": f"<= {TARGET_CORPUS_PEAK_MB:g} MB",
            "ok": res["peak_rss_ingest_mb"] <= TARGET_CORPUS_PEAK_MB,
        },
        {
            "what": f"  peak RSS, whole run ({res['queries']} searches)",
            "measured": f"{res['peak_rss_mb']:.0f} MB (search phase {peaks['search']:.0f})",
            "target": f"<= {TARGET_CORPUS_PEAK_MB:g} MB",
            "ok": res["peak_rss_mb"] <= TARGET_CORPUS_PEAK_MB,
        },
        {
            "what": "  nDCG@10 (hybrid)",
            "measured": "" if res["ndcg@10"] is None else f"{res['ndcg@10']:.4f}",
            "target": "",
            "ok": "",
        },
    ]
    print_table(
        f"ingest of a corpus (model load {res['model_load_s']:.2f} s apart; "
        f"load average {os.getloadavg()[0]:.1f})",
        rows,
    )
    write_results(f"ingest-{corpus.name}", res)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pdf", type=Path, default=PDF)
    parser.add_argument("--corpus", type=Path, help="a BEIR folder: measure it instead")
    parser.add_argument("--limit", type=int, help="with --corpus: its first N documents")
    args = parser.parse_args(argv)
    if args.corpus is not None:
        return corpus_main(args.corpus, args.limit)
    if not args.pdf.is_file():
        print(f"error: {args.pdf} is not here; pass --pdf FILE", file=sys.stderr)
        return 2

    import onnxruntime  # noqa: F401  (before usearch, see benchmarks/corpus.py)

    from kredenc.providers.embed.minilm import MiniLMEmbedder

    start = time.perf_counter()
    inner = MiniLMEmbedder()
    inner.load()
    load_s = time.perf_counter() - start
    embedder = TimedEmbedder(inner)
    runs = [one_run(args.pdf, embedder) for _ in range(args.runs)]
    med = {key: median([r[key] for r in runs]) for key in runs[0]}
    rows = [
        {
            "what": f"{args.pdf.name}: ingest end to end",
            "measured": f"{med['total_s']:.2f} s ({int(med['chunks'])} chunks)",
            "target": f"<= {TARGET_TOTAL_S:g} s",
            "ok": med["total_s"] <= TARGET_TOTAL_S,
        },
        {
            "what": "  of which not the model (parse, chunk, index, log)",
            "measured": f"{med['not_model_s']:.2f} s = {med['not_model_share']:.1%}",
            "target": f"<= {TARGET_NOT_MODEL_SHARE:.0%}",
            "ok": med["not_model_share"] <= TARGET_NOT_MODEL_SHARE,
        },
        {
            "what": "  parse (PDFium) / chunk alone, CPU",
            "measured": f"{med['parse_cpu_s']:.2f} s / {med['chunk_cpu_s']:.3f} s",
            "target": "",
            "ok": "",
        },
        {
            "what": "  embedding",
            "measured": f"{med['embed_s']:.2f} s",
            "target": "",
            "ok": "",
        },
    ]
    print_table(
        f"ingest ({args.runs} runs, medians; model load {load_s:.2f} s apart; "
        f"load average {os.getloadavg()[0]:.1f})",
        rows,
    )
    write_results(
        "ingest", {"pdf": str(args.pdf), "model_load_s": load_s, "median": med, "runs": runs}
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
