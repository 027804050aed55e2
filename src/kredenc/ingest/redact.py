"""Secrets out of messages: a URL's ``user:password@`` and a keyword connection
string's ``password=...`` (a PostgreSQL DSN) never reach a report or a log.

Its own module, below both the loaders and the fetcher, which both mask what they say.
"""

from __future__ import annotations

import re

# The user name and password of a URL: everything between ``scheme://`` and the last
# ``@`` before the host ends.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s?#]*@")
# A keyword DSN's password: quoted (to the closing quote, or the end when there is none;
# ``\'`` inside), or up to the next space.
_KEYWORD_PASSWORD = re.compile(r"(?i)\b(password\s*=\s*)(?:'(?:[^'\\]|\\.)*(?:'|$)|[^\s']\S*)")


def redact_url(text: str) -> str:
    """``text`` (a URL, or a message naming URLs or holding a DSN) with every URL's
    ``user:password@`` replaced by ``***@`` and every ``password=VALUE`` by
    ``password=***``, so that no message, report or log line echoes a secret."""
    return _KEYWORD_PASSWORD.sub(r"\1***", _USERINFO.sub(r"\1***@", text))
