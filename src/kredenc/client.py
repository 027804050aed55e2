"""(placeholder: filled in by the server work) ``kredenc.Client``: the facade over HTTP."""

from __future__ import annotations
