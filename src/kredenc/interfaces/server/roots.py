"""Ingest by path stays inside the server's roots (the ``server_roots`` setting).

A caller of the server (a REST client, an MCP client over HTTP or stdio) names a path
on the server's machine; the server reads it only when the path, with every symlink
and ``..`` resolved, lies inside one of the configured folders. A relative path is
taken from the first root, never from the server's working directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kredenc.errors import InvalidInput

_ROOTS_HINT = "name a file or folder inside the server's roots (the server_roots setting)"


def inside_roots(path: str, roots: Sequence[Path]) -> Path:
    """``path`` resolved, when it lies inside one of ``roots`` (resolved folders);
    otherwise :class:`~kredenc.errors.InvalidInput` saying why."""
    if not roots:
        raise InvalidInput(
            "this server ingests no paths: it has no roots configured",
            "upload the file or pass a URL, or list folders in the server_roots setting",
        )
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        raise InvalidInput("a path must be non-empty text", _ROOTS_HINT)
    given = Path(path)
    candidate = given if given.is_absolute() else roots[0] / given
    try:
        resolved = candidate.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop, an unreadable folder
        raise InvalidInput(
            f"the path {path[:200]!r} cannot be resolved ({exc})", _ROOTS_HINT
        ) from None
    for root in roots:
        if resolved == root or resolved.is_relative_to(root):
            return resolved
    raise InvalidInput(f"the path {path[:200]!r} is outside the server's roots", _ROOTS_HINT)
