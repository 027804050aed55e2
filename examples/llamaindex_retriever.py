"""A LlamaIndex retriever over a kredenc store: memories and a document, searched through
llama-index-core's ``BaseRetriever`` interface (``pip install 'kredenc[llamaindex]'``).

Each hit is a ``NodeWithScore``: the node's ``score`` is the calibrated relevance (0..1,
comparable across queries, so LlamaIndex's ``SimilarityPostprocessor`` cut-off means
the same for every question), its metadata the file, title, page, type and scope ids of
the record, and a document's chunk points at its document (``SOURCE``). Use it in a
``RetrieverQueryEngine`` with any LLM; here it is called directly.

    python examples/llamaindex_retriever.py [STORE_DIR]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from llama_index.core.postprocessor import SimilarityPostprocessor

from kredenc import Kredenc
from kredenc.integrations.llamaindex import KredencRetriever


def main(store: Path) -> None:
    notes = store.parent / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    (notes / "kestrel.md").write_text(
        "# Project Kestrel\n\nKestrel is the new billing service. It launches on 14 March "
        "after the security review; Dana owns the review.\n",
        encoding="utf-8",
    )
    with Kredenc.open(store) as kb:
        kb.ingest([notes])
        kb.remember("Alice prefers short status updates by email.", user_id="alice")
        kb.remember("Bob prefers a phone call for status updates.", user_id="bob")

        retriever = KredencRetriever(kb, k=3)
        nodes = retriever.retrieve("When does Kestrel launch?")
        kept = SimilarityPostprocessor(similarity_cutoff=0.3).postprocess_nodes(nodes)
        print(f"Q: When does Kestrel launch? ({len(nodes)} nodes, {len(kept)} above 0.3)")
        for n in kept:
            m = n.node.metadata
            where = f"{m['title']} ({Path(m['file']).name})" if "file" in m else m["type"]
            print(
                f"  relevance {n.score:.2f}  {where}: {' '.join(n.node.get_content().split())[:60]}"
            )

        bob = KredencRetriever(kb, k=1, user_id="bob")
        (node,) = asyncio.run(bob.aretrieve("How does he want status updates?"))
        print(f"bob (async, user_id filter): {node.node.get_content()}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp) / "store")
