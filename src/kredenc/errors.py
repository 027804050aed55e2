"""One exception tree. Every error carries a user-facing message and a hint.

Interfaces (CLI, REST, MCP) map this tree in exactly one place each; library and
vendor errors are translated into it at the adapter that meets them.
"""

from __future__ import annotations

#: The longest message an error carries (longer ones are cut, with "…").
MAX_MESSAGE_CHARS = 500


def shown(value: object, width: int = 40) -> str:
    """``repr`` of a user's value for a message: one line, at most ``width`` characters."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


class KredencError(Exception):
    """Base of every error kredenc raises on purpose.

    ``message`` says what went wrong, ``hint`` what to do about it, ``code`` is a
    stable machine-readable name used in JSON error bodies.
    """

    code = "error"
    exit_code = 1

    def __init__(self, message: str, hint: str = "") -> None:
        # A message may quote what was sent (a kind, a relation): whatever its length,
        # an error stays one short line, and a client's value is not sent back whole.
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[: MAX_MESSAGE_CHARS - 1] + "…"
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "hint": self.hint}


class CannotListen(KredencError):
    """A server could not bind its address (the port is taken, or not ours to take)."""

    code = "cannot_listen"


class InvalidInput(KredencError):
    """The caller passed something kredenc cannot accept (nothing was written)."""

    code = "invalid_input"
    exit_code = 2


class NotFound(KredencError):
    code = "not_found"


class StoreError(KredencError):
    """The store cannot be opened or used as asked."""

    code = "store_error"


class StoreLocked(StoreError):
    code = "store_locked"


class StoreReadOnly(StoreError):
    """A write to a store opened read-only (a reader beside the writer, a replica)."""

    code = "store_read_only"


class StoreClosed(StoreError):
    """A call on a store (or a handle on it) after :meth:`close`."""

    code = "store_closed"

    def __init__(
        self,
        message: str = "store is closed",
        hint: str = "open it again with Kredenc.open(...)",
    ) -> None:
        super().__init__(message, hint)


class FormatError(StoreError):
    """The store was written by another format version or another model."""

    code = "format_mismatch"


class IndexOutdated(StoreError):
    """The index was built by another schema version; it is rebuilt from the log."""


class CorruptLog(StoreError):
    """The haystack holds a damaged record that is not a torn tail."""

    code = "corrupt_log"

    def __init__(self, message: str, offset: int, hint: str = "") -> None:
        super().__init__(
            message,
            hint or "run 'kredenc check' for details; restore the store from a backup",
        )
        self.offset = offset


class ReadOnlyRecord(KredencError):
    code = "read_only"


class DeadlineExceeded(KredencError):
    """A read was stopped because its caller's deadline passed (nothing was changed)."""

    code = "deadline_exceeded"


class ProviderError(KredencError):
    """A model or remote provider failed or is not installed."""

    code = "provider_error"


class MissingExtra(ProviderError):
    code = "missing_extra"

    def __init__(self, what: str, extra: str) -> None:
        super().__init__(
            f"{what} needs an optional dependency that is not installed",
            f"pip install 'kredenc[{extra}]'",
        )


class IngestError(KredencError):
    """One source could not be loaded (the rest of an ingest goes on)."""

    code = "ingest_error"


class FetchRefused(IngestError):
    """A URL was refused before or during fetching (scheme, address, size, time)."""

    code = "fetch_refused"
