"""What the answer loop's framework costs per ask, apart from its tools.

Three rows, each timed over ``--n`` runs after a warm-up: the orchestrator running a
pipeline of eight tools that do nothing but write the contract's two required keys
(observe, execute, validate, communicate); finding the agent and the tools (the hot
reload's stat of each agent file, the registry's names); and a session's history read
back from the store (20 turns). The roles' own time is in ``bench_ask.py``.

    python benchmarks/bench_loop_framework.py [--n 2000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _common import median, now, percentile, print_table, write_results
from kredenc.engine import Kredenc
from kredenc.loop import sessions
from kredenc.loop.agents import Agent, library_for
from kredenc.loop.mind import Mind
from kredenc.loop.orchestrator import run_agent
from kredenc.loop.registry import registry_for
from kredenc.loop.tool import Services, Tool, ToolResult
from kredenc.testing.embedders import HashEmbedder

ROLES = ("decide", "rewrite", "retrieve", "grade", "verify", "generate", "judge", "reflect")


def noop(tool_name: str) -> Tool:
    class Noop(Tool):
        name = tool_name

        def run(self, mind: Mind, services: Services) -> ToolResult:
            if tool_name == "generate":
                mind.write("generate.text", "an answer [1]")
            elif tool_name == "reflect":
                mind.write("reflect.sufficient", True)
            return ToolResult()

    return Noop()


def timed(fn: Callable[[], Any], n: int) -> dict[str, float]:
    for _ in range(min(200, n)):
        fn()
    times = []
    for _ in range(n):
        start = now()
        fn()
        times.append((now() - start) * 1e6)
    return {"median_us": median(times), "p95_us": percentile(times, 95), "runs": n}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="Timed runs per row.")
    args = parser.parse_args(argv)
    tools = [noop(n) for n in ROLES]
    agent = Agent(name="bench", tools=ROLES)
    rows = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        Kredenc.open(Path(tmp) / "s", embedder=HashEmbedder(), durability="none") as kb,
    ):
        services = Services(kb.store, kb.namespace, kb.settings, options={"k": 12})
        rows.append(
            {
                "what": "orchestrator, 8 no-op tools",
                **timed(lambda: run_agent(agent, tools, services, question="q"), args.n),
            }
        )

        def lookup() -> None:
            library_for(None).get("answer")
            registry_for(None).names()

        rows.append({"what": "agent lookup + tool names", **timed(lookup, args.n)})
        kb.file_turns("s1", [{"role": "user", "content": f"turn {i}"} for i in range(40)])
        rows.append(
            {
                "what": "session history, 20 of 40 turns",
                **timed(lambda: sessions.history(kb.store, kb.namespace, "s1", 20), args.n),
            }
        )
    print_table("answer-loop framework per ask (microseconds)", rows)
    write_results("loop-framework", {"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
