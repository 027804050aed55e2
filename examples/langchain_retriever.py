"""A LangChain retriever over a kredenc store: memories and a document, searched through
langchain-core's ``BaseRetriever`` interface (``pip install 'kredenc[langchain]'``).

Each hit is a LangChain ``Document`` whose metadata holds where it came from (the file,
its title, the page of a PDF), the fused rank ``score`` and the calibrated
``relevance`` (0..1, comparable across queries, so ``min_score`` is a real floor). The
retriever passes ``user_id`` / ``agent_id`` / ``run_id``, ``tags``, ``where`` and
``min_score`` to every search; a call may override them. It works in any LangChain chain
(``retriever | format_docs | prompt | llm``); here it is called directly.

    python examples/langchain_retriever.py [STORE_DIR]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from kredenc import Kredenc
from kredenc.integrations.langchain import KredencRetriever


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

        retriever = KredencRetriever(kb=kb, k=3)
        print("Q: When does Kestrel launch?")
        for doc in retriever.invoke("When does Kestrel launch?"):
            m = doc.metadata
            where = f"{m['title']} ({Path(m['file']).name})" if "file" in m else m["type"]
            text = " ".join(doc.page_content.split())
            print(f"  relevance {m['relevance']:.2f}  {where}: {text[:60]}")

        alice = KredencRetriever(kb=kb, k=3, user_id="alice", min_score=0.05)
        (doc,) = asyncio.run(alice.ainvoke("How does she want status updates?", k=1))
        print(f"alice (async, user_id filter): {doc.page_content}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp) / "store")
