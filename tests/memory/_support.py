"""Shared helpers of the memory tests: fixed times and a settable clock."""

from __future__ import annotations

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
HOUR = 3600.0
DAY = 86_400.0


class Clock:
    """The store's clock, set by the test (records are filed at ``clock.t``)."""

    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t
