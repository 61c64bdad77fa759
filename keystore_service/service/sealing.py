"""Secrets at rest: a source's signing secrets, its destination's headers and secret, and
its ingest id are sealed with Fernet under a key from the environment, so a database dump
alone reveals none of them.

KEYSTORE_SECRET_KEY holds one or more Fernet keys, comma-separated: the first seals, every
one opens (rotate by putting the new key first; a PATCH of a source seals it again). Without
it, KEYSTORE_SECRET_KEY_FILE names a file holding them; `keystore serve` on SQLite makes that
file beside the database the first time (mode 600), so the quick start needs no setup, but
never for a database that holds sealed data already (gateway.py).

Sealing keys must agree (issue 25): the database keeps a check value, a fixed text sealed
with the key that seals its secrets (storage/sealing.py). Before anything is sealed, and
when `serve` or `relay` starts, `agree()` opens it: keys that cannot open it raise
KeysRefused, naming the setting to fix, and nothing is sealed. With several keys the check
value is sealed again with the first one, as every seal is.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Optional, Protocol

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from keystore_service.errors import InvalidRequest, Unavailable

CHECK = "keystore sealing check"  # the check value's text; what matters is who sealed it
FIX = ("set KEYSTORE_SECRET_KEY (or KEYSTORE_SECRET_KEY_FILE) to the key(s) this key store's "
       "other processes use; nothing is sealed until then (docs/deployment.md, 'Sealing "
       "keys')")


class CheckStore(Protocol):
    def get(self) -> Optional[str]: ...
    def put_first(self, value: str, now: int) -> str: ...
    def replace(self, old: str, new: str, now: int) -> None: ...
    def sealed_samples(self) -> list[str]: ...


class _KeysMissing(Unavailable):
    """503 `unavailable` that is not a database outage (not counted as one in metrics).
    Retry-After 60, not the outage's 1: a person mends it, by a key and a restart."""

    from_database = False

    def __init__(self, message: str, *, details: Optional[dict] = None):
        super().__init__(message, details=details, headers={"Retry-After": "60"})


class KeysRefused(_KeysMissing):
    """This process's sealing keys cannot open the database's check value (or, before
    there is one, any of its sealed sources): it seals nothing. 503: the request was fine,
    the process is misconfigured. The message names the setting, never a key."""


class SourceBroken(_KeysMissing):
    """A source whose secrets no configured key opens (sealed with a key since removed)."""


class Sealer:
    def __init__(self, keys: list[str], origin: str = "KEYSTORE_SECRET_KEY",
                 check: Optional[CheckStore] = None,
                 clock: Callable[[], int] = lambda: 0):
        """`keys`: Fernet keys (urlsafe base64 of 32 bytes); ValueError if one is not.
        `origin` says where they came from, for messages; `check` is the database's check
        value (None: no database, nothing to agree with); `clock` gives Micros."""
        self.origin, self.check, self.clock = origin, check, clock
        self._fernet: Optional[MultiFernet] = None
        self._first: Optional[Fernet] = None
        if keys:
            try:
                fernets = [Fernet(k.strip().encode()) for k in keys]
            except (ValueError, TypeError):
                raise ValueError(f"{origin}: each key is 32 bytes of urlsafe base64 "
                                 "(make one with `keystore secret-key`)") from None
            self._fernet, self._first = MultiFernet(fernets), fernets[0]

    @staticmethod
    def new_key() -> str:
        return Fernet.generate_key().decode()

    @property
    def ready(self) -> bool:
        return self._fernet is not None

    def agree(self, sealing: bool = False) -> None:
        """Check these keys against the database; KeysRefused if they cannot open it.
        Without a check value yet: one is written when the keys open one of the sealed
        sources (a database sealed before check values existed), or, `sealing`, when
        nothing is sealed at all. A check value not sealed with the first key is sealed
        again with it (rotation). Raises errors.Unavailable when the database is down."""
        if self.check is None:
            return
        value = self.check.get()
        if value is None:
            samples = self.check.sealed_samples()
            if samples and not any(self._opens(s) for s in samples):
                raise self._refused("open none of this database's sealed sources"
                                    if self.ready else None)
            if not self.ready or not (samples or sealing):
                return  # nothing sealed yet, and nothing to seal now
            value = self.check.put_first(self._encrypt(CHECK), self.clock())
        if not self.ready:
            raise self._refused(None)
        if self._text(value) != CHECK:
            raise self._refused("cannot open this database's check value")
        if self._text(value, first_only=True) != CHECK:  # sealed with a key now second
            self.check.replace(value, self._encrypt(CHECK), self.clock())

    def seal(self, value: Any) -> str:
        """JSON of `value`, encrypted and authenticated; InvalidRequest without a key,
        KeysRefused when the keys do not agree with the database's (agree())."""
        self.agree(sealing=True)
        if self._fernet is None:
            raise InvalidRequest(
                "this key store has no KEYSTORE_SECRET_KEY: a source's secrets cannot be "
                "sealed (docs/webhooks/README.md, 'The secret key')",
                details={"reason": "no_secret_key"})
        return self._encrypt(json.dumps(value))

    def open(self, sealed: str) -> Any:
        """What seal() sealed; ValueError if no key opens it (a key that was removed)."""
        if self._fernet is None:
            raise ValueError("no KEYSTORE_SECRET_KEY to open a sealed source")
        try:
            return json.loads(self._fernet.decrypt(sealed.encode()))
        except (InvalidToken, ValueError, TypeError):
            raise ValueError("none of the KEYSTORE_SECRET_KEY keys opens this source") from None

    def reseal(self, sealed: str) -> str:
        """The same secrets sealed with the first key (key rotation)."""
        if self._fernet is None:
            raise ValueError("no KEYSTORE_SECRET_KEY")
        return self._fernet.rotate(sealed.encode()).decode()

    def _encrypt(self, text: str) -> str:
        assert self._fernet is not None
        return self._fernet.encrypt(text.encode()).decode()

    def _text(self, sealed: str, first_only: bool = False) -> Optional[str]:
        """The text `sealed` holds, None if these keys (or the first alone) cannot open it."""
        fernet = self._first if first_only else self._fernet
        if fernet is None:
            return None
        try:
            return fernet.decrypt(sealed.encode()).decode()
        except (InvalidToken, ValueError, TypeError, UnicodeDecodeError):
            return None

    def _opens(self, sealed: str) -> bool:
        return self._text(sealed) is not None

    def _refused(self, what: Optional[str]) -> KeysRefused:
        said = (f"the keys of {self.origin} {what}" if what else
                f"this database holds secrets sealed with a key, and this process has none "
                f"({self.origin})")
        return KeysRefused(f"{said}: {FIX}", details={
            "reason": "secret_key_mismatch" if what else "no_secret_key",
            "setting": "KEYSTORE_SECRET_KEY"})


def keys_from(value: Optional[str], file_text: Optional[str]) -> list[str]:
    """The keys of KEYSTORE_SECRET_KEY, else of the key file's text (one per line or comma)."""
    text = value if value else (file_text or "")
    return [k for k in (part.strip() for part in text.replace("\n", ",").split(",")) if k]
