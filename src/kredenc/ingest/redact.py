"""Secrets out of messages: a URL's ``user:password@`` never reaches a report or a log.

Its own module, below both the loaders and the fetcher, which both mask what they say.
"""

from __future__ import annotations

import re

# The user name and password of a URL: everything between ``scheme://`` and the last
# ``@`` before the host ends.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s?#]*@")


def redact_url(text: str) -> str:
    """``text`` (a URL, or a message naming URLs) with every URL's ``user:password@``
    replaced by ``***@``, so that no message, report or log line echoes a secret."""
    return _USERINFO.sub(r"\1***@", text)
