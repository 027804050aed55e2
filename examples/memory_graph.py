"""A memory graph: remember facts, relate them, walk the context graph around a
question and print the prompt text an agent would be given.

The graph's seeds are the memories nearest the question; relations (``supports``,
``depends_on``, ...) bring in the memories around them, and the nodes are ranked by
similarity, with importance and recency breaking near-ties.

    python examples/memory_graph.py [STORE_DIR]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from kredenc import Kredenc


def main(store: Path) -> None:
    with Kredenc.open(store) as kb:
        launch = kb.remember("Project Kestrel launches on 14 March.", kind="fact")
        review = kb.remember("The Kestrel launch needs the security review first.", kind="fact")
        owner = kb.remember("Dana owns the security review.", kind="fact", importance=0.8)
        kb.remember("The office coffee machine is broken.", kind="fact")
        kb.relate(launch.id, review.id, "depends_on")
        kb.relate(review.id, owner.id, "related_to")

        graph = kb.context_graph("When does Kestrel launch and what blocks it?", hops=2)
    print(f"{len(graph.nodes)} nodes, {len(graph.edges)} edges")
    for node in graph.nodes:
        print(f"  {node.score:.3f}  {node.text}")
    print("\nprompt text:\n" + graph.to_prompt_text())


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp) / "store")
