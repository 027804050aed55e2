"""Secrets out of messages: a URL's ``user:password@`` and a keyword DSN's
``password=...`` never reach what kredenc prints or logs."""

from __future__ import annotations

import pytest

from kredenc.ingest.redact import redact_url


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("fetch https://bob:s3cret@example.com/a failed", "fetch https://***@example.com/a failed"),
        ("postgresql://kredenc:s3cret@db/kredenc", "postgresql://***@db/kredenc"),
        ("host=db password=s3cret dbname=kredenc", "host=db password=*** dbname=kredenc"),
        ("host=db PASSWORD = s3cret", "host=db PASSWORD = ***"),
        ("host=db password='s3 cret' user=k", "host=db password=*** user=k"),
        ("host=db password='s3 \\' cret' user=k", "host=db password=*** user=k"),
        ("host=db password='s3 cret", "host=db password=***"),
        ("password authentication failed for user kredenc", None),
    ],
)
def test_secrets_are_masked(text: str, shown: str | None) -> None:
    assert redact_url(text) == (text if shown is None else shown)
