"""Loading the ANN library (usearch) safely.

Measured here (usearch 2.26.6, onnxruntime 1.32, Linux x86-64): importing onnxruntime
*after* usearch kills the process with a segmentation fault, while the other order
works. The embedding provider imports onnxruntime lazily, so a store whose ANN graph
loads before the first embedding would crash. This module is the one place usearch
is imported, and it imports onnxruntime first when it is installed.
"""

from __future__ import annotations

import importlib.util
from typing import Any


def usearch_index_class() -> Any:
    if importlib.util.find_spec("onnxruntime") is not None:
        import onnxruntime  # noqa: F401  (see the module docstring)
    from usearch.index import Index

    return Index
