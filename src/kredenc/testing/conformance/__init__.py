"""Conformance suites for storage backends: pytest mixin classes.

A backend's test module subclasses each class under a ``Test...`` name and implements
its hooks (``make_log`` and the damage hooks; ``make_index``; ``make_tier``;
``make_mind``); pytest then runs every
``test_*`` method against that backend. The file haystack and the SQLite index run
them in ``tests/storage/test_conformance.py``; docs/storage.md says how another
backend does. Importing this package imports pytest (``kredenc`` itself never does).
"""

from __future__ import annotations

from kredenc.testing.conformance.cache import CacheTierConformance
from kredenc.testing.conformance.index import IndexConformance
from kredenc.testing.conformance.log import LogConformance
from kredenc.testing.conformance.mind import MindConformance

__all__ = ["CacheTierConformance", "IndexConformance", "LogConformance", "MindConformance"]
