"""``kredenc demo``: file sample memories, search them, show what happened and how long."""

from __future__ import annotations

import json
import time
from importlib import resources
from typing import Any

from rich.console import Console
from rich.table import Table

DEMO_DRAWER = "demo"
QUERIES = (
    ("when do we deploy?", "hybrid"),
    ("which database runs in production", "hybrid"),
    ("food the user cannot eat", "dense"),
    ("Pogácsa", "lexical"),
    ("how fast must recall be", "hybrid"),
)


def sample_memories() -> list[dict[str, Any]]:
    text = resources.files("kredenc.data").joinpath("sample_memories.jsonl").read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def run_demo(store: str | None, namespace: str | None, *, quiet: bool = False) -> dict[str, Any]:
    from kredenc.engine import Kredenc

    console = Console(quiet=quiet)
    report: dict[str, Any] = {"steps": [], "searches": []}

    def step(name: str, seconds: float, detail: str) -> None:
        report["steps"].append({"step": name, "ms": round(seconds * 1000, 2), "detail": detail})

    t0 = time.perf_counter()
    kb = Kredenc.open(store, namespace)
    step("open store", time.perf_counter() - t0, str(kb.home))
    with kb:
        t0 = time.perf_counter()
        kb.embedder.embed(["warm up"])
        kb.embedder.embed_query("warm up")
        step("load embedding model", time.perf_counter() - t0, kb.embedder.describe())
        existing = [d for d in kb.stats()["drawers"] if d["drawer"] == DEMO_DRAWER]
        samples = sample_memories()
        if existing:
            step("file sample memories", 0.0, "already filed earlier; skipped")
        else:
            t0 = time.perf_counter()
            for item in samples:
                kb.remember(item["text"], kind=item["kind"], tags=item["tags"], drawer=DEMO_DRAWER)
            took = time.perf_counter() - t0
            step(
                "file sample memories",
                took,
                f"{len(samples)} memories, {took / len(samples) * 1000:.1f} ms each "
                "(embedding + fsync)",
            )
        for query, mode in QUERIES:
            t0 = time.perf_counter()
            hits = kb.search(query, k=3, mode=mode, drawer=DEMO_DRAWER)
            took = time.perf_counter() - t0
            report["searches"].append(
                {
                    "query": query,
                    "mode": mode,
                    "ms": round(took * 1000, 2),
                    "hits": [{"id": h.id, "score": h.score, "text": h.text} for h in hits],
                }
            )
        report["stats"] = kb.stats()

    table = Table(title="kredenc demo: steps")
    table.add_column("step")
    table.add_column("ms", justify="right")
    table.add_column("detail")
    for s in report["steps"]:
        table.add_row(s["step"], f"{s['ms']:.1f}", s["detail"])
    console.print(table)
    for s in report["searches"]:
        console.print(f"\n[bold]{s['query']}[/bold]  ({s['mode']}, {s['ms']:.1f} ms)")
        for i, h in enumerate(s["hits"], 1):
            console.print(f"  {i}. {h['score']:.4f}  {h['text']}")
    console.print(f"\nstore: {report['stats']['store']}, {report['stats']['records']} records")
    return report
