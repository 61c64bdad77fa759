"""Secrets at rest: a source's signing secrets, its destination's headers and secret, and
its ingest id are sealed with Fernet under a key from the environment, so a database dump
alone reveals none of them.

KEYSTORE_SECRET_KEY holds one or more Fernet keys, comma-separated: the first seals, every
one opens (rotate by putting the new key first, then `keystore source reseal`). Without it,
KEYSTORE_SECRET_KEY_FILE names a file holding them; `keystore serve` on SQLite makes that
file beside the database the first time (mode 600), so the quick start needs no setup.
"""
from __future__ import annotations

import json
from typing import Any, Optional

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from keystore_service.errors import InvalidRequest


class Sealer:
    def __init__(self, keys: list[str]):
        """`keys`: Fernet keys (urlsafe base64 of 32 bytes); ValueError if one is not."""
        self._fernet: Optional[MultiFernet] = None
        if keys:
            try:
                self._fernet = MultiFernet([Fernet(k.strip().encode()) for k in keys])
            except (ValueError, TypeError):
                raise ValueError("KEYSTORE_SECRET_KEY: each key is 32 bytes of urlsafe base64 "
                                 "(make one with `keystore secret-key`)") from None

    @staticmethod
    def new_key() -> str:
        return Fernet.generate_key().decode()

    @property
    def ready(self) -> bool:
        return self._fernet is not None

    def seal(self, value: Any) -> str:
        """JSON of `value`, encrypted and authenticated; InvalidRequest without a key."""
        if self._fernet is None:
            raise InvalidRequest(
                "this key store has no KEYSTORE_SECRET_KEY: a source's secrets cannot be "
                "sealed (docs/webhooks.md, 'The secret key')",
                details={"reason": "no_secret_key"})
        return self._fernet.encrypt(json.dumps(value).encode()).decode()

    def open(self, sealed: str) -> Any:
        """What seal() sealed; ValueError if no key opens it (a key that was removed)."""
        if self._fernet is None:
            raise ValueError("no KEYSTORE_SECRET_KEY to open a sealed source")
        try:
            return json.loads(self._fernet.decrypt(sealed.encode()))
        except InvalidToken:
            raise ValueError("none of the KEYSTORE_SECRET_KEY keys opens this source") from None

    def reseal(self, sealed: str) -> str:
        """The same secrets sealed with the first key (key rotation)."""
        if self._fernet is None:
            raise ValueError("no KEYSTORE_SECRET_KEY")
        return self._fernet.rotate(sealed.encode()).decode()


def keys_from(value: Optional[str], file_text: Optional[str]) -> list[str]:
    """The keys of KEYSTORE_SECRET_KEY, else of the key file's text (one per line or comma)."""
    text = value if value else (file_text or "")
    return [k for k in (part.strip() for part in text.replace("\n", ",").split(",")) if k]
