"""Speed of the local LLM (the ``kredenc[local]`` extra): join, load, read, write.

Measures joining the 22 weight parts (skipped when the joined file is cached: pass
``--fresh`` with a scratch ``--cache``), loading the model, one plain reply (time to
the first piece, pieces per second while writing) and one schema reply (the judge's
kind of verdict), on ``--threads`` threads.

    .venv/bin/python benchmarks/bench_llm_local.py [--threads 1] [--cache DIR] [--fresh]

Needs the extra (``pip install -c constraints-local.txt 'kredenc[local]'``). Prints a
table and writes benchmarks/results/llm-local.json.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from _common import now, print_table, write_results
from kredenc.providers.llm.local import MODEL_CACHE, Gpt4AllLLM, bundled_model
from kredenc.providers.llm.structured import estimate_prompt_tokens

CONTEXT = (
    "The Transformer uses h = 8 parallel attention layers, or heads. For each of these "
    "we use d_k = d_v = d_model / h = 64. Due to the reduced dimension of each head, the "
    "total computational cost is similar to that of single-head attention with full "
    "dimensionality. We used the Adam optimizer with beta1 = 0.9, beta2 = 0.98 and "
    "epsilon = 10^-9. On the WMT 2014 English-to-German translation task, the big "
    "transformer model outperforms the best previously reported models by more than "
    "2.0 BLEU, establishing a new state-of-the-art BLEU score of 28.4."
)
PLAIN = [
    {"role": "system", "content": "Answer in one sentence from the context only."},
    {"role": "user", "content": f"Context: {CONTEXT}\n\nHow many attention heads are used?"},
]
VERDICT = {
    "type": "object",
    "properties": {
        "supported": {"type": "boolean"},
        "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
        "reason": {"type": "string"},
    },
    "required": ["supported", "confidence", "reason"],
    "additionalProperties": False,
}
JUDGED = [
    {"role": "system", "content": "You check whether a claim is supported by a context."},
    {
        "role": "user",
        "content": f"Context: {CONTEXT}\n\nClaim: The big model reaches 41.8 BLEU on "
        "English-German.",
    },
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache", type=Path, default=MODEL_CACHE.expanduser())
    parser.add_argument("--fresh", action="store_true", help="join the parts again")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []

    if args.fresh and args.cache.exists():
        shutil.rmtree(args.cache)
    start = now()
    path = bundled_model(args.cache)
    rows.append(
        {"step": "join parts (or find the cached file)", "seconds": now() - start, "per_s": None}
    )

    llm = Gpt4AllLLM(path, threads=args.threads, max_tokens=128)
    start = now()
    llm.load()
    rows.append({"step": "load model", "seconds": now() - start})

    start = now()
    stream = llm.stream(PLAIN)
    first = None
    pieces = 0
    for _piece in stream:
        if first is None:
            first = now() - start
        pieces += 1
    total = now() - start
    done = stream.completion
    assert done is not None
    rows.append(
        {
            "step": f"plain reply, first piece (prompt ~{estimate_prompt_tokens(PLAIN)} tok)",
            "seconds": first,
        }
    )
    rows.append(
        {
            "step": f"plain reply, {pieces} pieces written",
            "seconds": total - (first or 0.0),
            "per_s": pieces / max(total - (first or 0.0), 1e-9),
        }
    )

    start = now()
    verdict = llm.complete(JUDGED, schema=VERDICT)
    rows.append({"step": "schema reply (verdict)", "seconds": now() - start})
    llm.close()

    print_table(f"local LLM, {args.threads} thread(s)", rows)
    print(f"\nplain: {done.text!r}\nverdict: {verdict.data!r}")
    write_results(
        "llm-local",
        {
            "threads": args.threads,
            "model": path.name,
            "rows": rows,
            "plain_reply": done.text,
            "verdict": verdict.data,
        },
    )


if __name__ == "__main__":
    main()
