"""The integration tests' Redis helper: skip without a Redis, fail instead under CI."""

from __future__ import annotations

import pytest

from kredenc.testing.redis import closed_port_url, redis_url_or_skip


def test_no_redis_skips_with_the_reason_and_fails_under_ci(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KREDENC_TEST_REDIS_URL", closed_port_url())
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"no Redis answers at redis://127\.0\.0\.1"):
        redis_url_or_skip()
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="CI is set and no Redis answers"):
        redis_url_or_skip()
