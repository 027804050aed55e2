"""A knowledge-base question: ingest a folder, ask, print the cited answer and the
judge's card (confidence band and score, whether the context sufficed, hallucination).

With no LLM configured (``llm_provider`` unset) the answer loop answers extractively,
offline; set ``KREDENC_LLM_PROVIDER`` (docs/llm.md) to have a model write it.

    python examples/kb_question.py [FOLDER] [QUESTION]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from kredenc import Kredenc

NOTES = {
    "transformer.md": "# The Transformer\n\nThe Transformer uses 8 attention heads in each "
    "layer.\n\n## Training\n\nIt was trained on eight GPUs for twelve hours with the Adam "
    "optimizer.\n",
    "garden.md": "# Garden\n\nThe garden has tomatoes, beans and a small pond.\n",
}
QUESTION = "How many attention heads does the Transformer use?"


def main(folder: Path, question: str, store: Path) -> None:
    with Kredenc.open(store) as kb:
        report = kb.ingest([folder])
        print(f"ingested {folder}: {report.documents} documents, {report.chunks} chunks")
        answer = kb.ask(question)
    print(f"\nQ: {question}\nA: {answer.text}\n")
    for cite in answer.citations:
        where = cite.title or cite.origin
        print(f"[{cite.n}] {where} ({Path(cite.origin).name})  score {cite.score:.3f}")
    ev = answer.evaluation
    if ev is None:
        print("\njudge: not judged")
    else:
        print(
            f"\njudge: confidence {ev.confidence_score} ({ev.band}), context "
            f"{'sufficient' if ev.context_sufficient else 'insufficient'}, hallucination "
            f"{'detected' if ev.hallucination_detected else 'none'}"
        )


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        if len(sys.argv) > 1:
            notes = Path(sys.argv[1])
        else:
            notes = Path(tmp) / "notes"
            notes.mkdir()
            for name, text in NOTES.items():
                (notes / name).write_text(text)
        main(notes, sys.argv[2] if len(sys.argv) > 2 else QUESTION, Path(tmp) / "store")
