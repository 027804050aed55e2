"""API keys: who may use a kredenc server, and which namespace (tenant) each one sees.

One key model for every network interface (the proxy today, the REST API and MCP
later). A key is ``kr_`` followed by 43 URL-safe characters from :mod:`secrets`
(256 random bits); it is shown once, when it is made, and never stored. The store
keeps, in ``keys.json`` in the store directory (mode 0600, replaced atomically),
each key's SHA-256 digest, its first characters (to tell keys apart in listings),
a name, the ONE namespace it is bound to, when it was made and when it was revoked.

A server asks :meth:`KeyRing.verify` with the bearer token a client sent and gets
the key (and so the namespace) or ``None``; the namespace comes from the key, never
from the request. Revoking is a mark, not a deletion, so ``kredenc keys list`` still
shows what a key was; a running server sees the change at its next request (the file
is read again whenever it changes on disk).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kredenc.errors import InvalidInput, StoreError
from kredenc.storage import layout

KEYS_FILE = "keys.json"
KEY_PREFIX = "kr_"
SHOWN_CHARS = 10  # "kr_" and 7 random characters: names a key in listings, ~42 bits
_FORMAT = 1


@dataclass(frozen=True)
class ApiKey:
    """One key as stored: never the key itself."""

    name: str
    namespace: str
    prefix: str
    sha256: str
    created: float
    revoked: float | None = None

    @property
    def active(self) -> bool:
        return self.revoked is None

    def public(self) -> dict[str, Any]:
        """What a listing may show: everything but the digest."""
        return {
            "name": self.name,
            "namespace": self.namespace,
            "prefix": self.prefix,
            "created": self.created,
            "revoked": self.revoked,
        }


def digest(key: str) -> str:
    """The stored form of a key.

    A plain SHA-256 is enough here, unlike for passwords: a key holds 256 random bits,
    so there is no dictionary to try and no salt or slow hash would make a brute force
    of 2**256 any less hopeless; a fast hash keeps the check per request cheap.
    """
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer TOKEN`` header (as the OpenAI SDK sends
    its ``api_key``), else ``None``."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class KeyRing:
    """The keys of the store at ``home`` (``home/keys.json``)."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.path = self.home / KEYS_FILE
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._keys: list[ApiKey] = []

    # -- reading --------------------------------------------------------------
    def entries(self) -> list[ApiKey]:
        """Every key, revoked ones included, as the file holds them now."""
        with self._lock:
            try:
                st = self.path.stat()
            except FileNotFoundError:
                self._seen, self._keys = None, []
                return []
            seen = (st.st_ino, st.st_mtime_ns, st.st_size)
            if seen != self._seen:
                self._keys = self._read()
                self._seen = seen
            return list(self._keys)

    def active(self) -> list[ApiKey]:
        return [k for k in self.entries() if k.active]

    def verify(self, presented: str | None) -> ApiKey | None:
        """The active key ``presented`` is, else ``None``. Every stored digest is
        compared in constant time, so the answer's timing tells nothing of a digest."""
        if not presented or not presented.startswith(KEY_PREFIX) or len(presented) > 200:
            return None
        wanted = digest(presented)
        found = None
        for key in self.active():
            if hmac.compare_digest(key.sha256, wanted):
                found = key
        return found

    def _read(self) -> list[ApiKey]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            keys = [ApiKey(**item) for item in data["keys"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"{self.path} cannot be read as kredenc's key file ({type(exc).__name__})",
                f"restore it from a backup, or move it aside and run 'kredenc keys add'"
                f" again ({self.path})",
            ) from None
        return keys

    # -- changing -------------------------------------------------------------
    def add(self, namespace: str, name: str | None = None) -> tuple[str, ApiKey]:
        """Make a key for ``namespace``; returns it (to show once) and what is stored."""
        from kredenc.checks import check_name  # the one name rule (lazy: a light CLI)

        check_name("namespace", namespace)
        if name is not None:
            check_name("name", name)
            if name.startswith(KEY_PREFIX):
                raise InvalidInput(
                    f"a key name must not start with {KEY_PREFIX!r}", "pick another --name"
                )
        with self._editing() as keys:
            taken = {k.name for k in keys}
            if name is None:
                name = namespace
                n = 1
                while name in taken:
                    n += 1
                    name = f"{namespace}-{n}"
            elif name in taken:
                raise InvalidInput(
                    f"a key named {name!r} exists", "pick another --name (see 'kredenc keys list')"
                )
            secret = new_key()
            key = ApiKey(
                name=name,
                namespace=namespace,
                prefix=secret[:SHOWN_CHARS],
                sha256=digest(secret),
                created=time.time(),
            )
            keys.append(key)
        return secret, key

    def revoke(self, ref: str) -> ApiKey:
        """Revoke the key named ``ref``, or the one whose shown prefix starts with it."""
        with self._editing() as keys:
            matches = [i for i, k in enumerate(keys) if k.name == ref]
            if not matches and ref.startswith(KEY_PREFIX):
                if len(ref) < len(KEY_PREFIX) + 4:
                    raise InvalidInput(
                        f"a key prefix needs at least 4 characters after {KEY_PREFIX!r}",
                        "see 'kredenc keys list'",
                    )
                matches = [i for i, k in enumerate(keys) if k.prefix.startswith(ref[:SHOWN_CHARS])]
            if not matches:
                raise InvalidInput(
                    f"no key named or starting with {ref!r}", "see 'kredenc keys list'"
                )
            if len(matches) > 1:
                raise InvalidInput(
                    f"{len(matches)} keys start with {ref!r}",
                    "revoke by name (see 'kredenc keys list')",
                )
            (i,) = matches
            if not keys[i].active:
                raise InvalidInput(f"key {keys[i].name!r} is already revoked")
            keys[i] = ApiKey(**{**asdict(keys[i]), "revoked": time.time()})
            return keys[i]

    @contextlib.contextmanager
    def _editing(self) -> Iterator[list[ApiKey]]:
        """Read, change and write the file under an exclusive lock (two ``keys add``
        at once both land), written whole to a temporary file and renamed over."""
        if not self.home.is_dir():
            raise layout.missing_store(self.home)
        lock_path = self.home / (KEYS_FILE + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            keys = self._read() if self.path.exists() else []
            yield keys
            self._write(keys)
        finally:
            os.close(fd)  # releases the lock

    def _write(self, keys: list[ApiKey]) -> None:
        data = {"format": _FORMAT, "keys": [asdict(k) for k in keys]}
        fd, tmp = tempfile.mkstemp(prefix=KEYS_FILE + ".", suffix=".tmp", dir=self.home)
        try:
            os.fchmod(fd, 0o600)  # mkstemp makes it 0600; said so for whoever reads this
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(data, indent=2) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        dir_fd = os.open(self.home, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
