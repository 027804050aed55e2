"""Retrieval evaluation on public datasets, independent of the engine.

Load a dataset, hand it and any ``Retriever`` to ``run``::

    from kredenc.eval import load_beir, run
    result = run(retriever, load_beir("../shared/data/scifact"), run_file="scifact.run.jsonl")
    result.summary()   # {"dataset", "metrics", "timing"}

``recompute(run_file, dataset)`` scores a saved run file again.
"""

from kredenc.eval.beir import BeirDataset, load_beir
from kredenc.eval.datasets import EvalDataset, EvalDoc, EvalQuery, Group, Retriever
from kredenc.eval.locomo import LocomoDataset, load_locomo, normalise_evidence
from kredenc.eval.longmemeval import (
    LongMemEvalDataset,
    PooledLongMemEval,
    load_longmemeval,
    load_longmemeval_pooled,
)
from kredenc.eval.multihop import MultihopDataset, load_multihop
from kredenc.eval.runner import RunResult, agreement, read_run, recompute, run, write_run

__all__ = [
    "BeirDataset",
    "EvalDataset",
    "EvalDoc",
    "EvalQuery",
    "Group",
    "LocomoDataset",
    "LongMemEvalDataset",
    "MultihopDataset",
    "PooledLongMemEval",
    "Retriever",
    "RunResult",
    "agreement",
    "load_beir",
    "load_locomo",
    "load_longmemeval",
    "load_longmemeval_pooled",
    "load_multihop",
    "normalise_evidence",
    "read_run",
    "recompute",
    "run",
    "write_run",
]
