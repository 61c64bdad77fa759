"""Lease tokens: their one form, the one place one is made (a claim's and the gateway's), and
why one is refused (409 lease_lost): docs/api.md's code and status, with a message that
says what the record shows, so a pasted placeholder is not taken for a lost race (issue 25:
the README's "lt_..." was told it was "replaced by a newer attempt").

The record keeps only its current token's hash, so "never held" is said only where it is
certain: a string of another form than every lease token (none can have held any key), or a
key whose one and only attempt holds another token. After a release, a take-over or a new
window the key has had other tokens, and the message says a newer attempt holds it.
"""
from __future__ import annotations

import re
import secrets
from typing import Optional

from keystore_service import errors
from keystore_service.domain.records import Record, State
from keystore_service.storage.accounts import hash_token

# Every lease token: the service's own ("lt_" + 32 of base64url, new_lease_token) and
# the ones clients propose (web/api/field_types.py ProposedToken uses this same pattern).
LEASE_TOKEN_PATTERN = r"^lt_[A-Za-z0-9_-]{22,64}$"
_LEASE_TOKEN = re.compile(LEASE_TOKEN_PATTERN)
_USE = "send the lease_token that the claim which acquired the key returned"


def new_lease_token() -> tuple[str, str]:
    """A fresh lease token (192 random bits) and the hash that is stored instead of it."""
    token = "lt_" + secrets.token_urlsafe(24)
    return token, hash_token(token)


def proposed_or_new(proposed: Optional[str]) -> tuple[str, str]:
    """The client's proposed lease token (checked by the schema) and its hash, or a new one."""
    return (proposed, hash_token(proposed)) if proposed else new_lease_token()


def lease_lost(record: Record, lease_token: str, token_hash: str) -> errors.LeaseLost:
    """The 409 for `lease_token` (hashed: `token_hash`) refused by `record`. Never quotes
    the token."""
    if not _LEASE_TOKEN.fullmatch(lease_token):
        message = ("this is not a lease token (lt_ and 22-64 of A-Z a-z 0-9 _ -), so it never "
                   f"held this key: {_USE}")
    elif record.lease_token_hash == token_hash and record.state == State.RELEASED.value:
        message = ("this lease token's attempt was released (given back): claim the key again "
                   "for a new attempt")
    elif record.lease_token_hash is None:
        message = ("a person's resolution ended this key's lease: no lease token holds it now")
    elif record.attempt == 1 and record.incarnation == 1:
        message = f"this lease token never held this key (its only attempt has another): {_USE}"
    else:
        message = (f"this lease token was replaced by a newer attempt: attempt {record.attempt} "
                   "holds this key now, with another token")
    return errors.LeaseLost(message, record=record)
