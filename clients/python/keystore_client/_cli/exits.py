"""The exit codes of `keystore-client`, and which error gives which.

`run` passes the command's own exit code through (0-125 as the command returned it, also when
it is replayed); the codes below mean that keystore-client itself stopped. They follow the BSD
sysexits.h numbers where one fits. A command that itself exits with one of these numbers is
indistinguishable by code alone; the message on stderr tells them apart.
"""
from __future__ import annotations

from .._exceptions import (
    FingerprintMismatch,
    Forbidden,
    InProgress,
    KeyStoreError,
    NeedsReconciliation,
    Unauthorized,
)

USAGE = 64  # EX_USAGE: wrong arguments
NO_RECORD = 66  # EX_NOINPUT: `lookup` found no record (or only an expired one)
UNAVAILABLE = 69  # EX_UNAVAILABLE: the key store could not be reached or refused the call
IN_PROGRESS = 75  # EX_TEMPFAIL: another run still holds the key after --wait; try later
NEEDS_RECONCILIATION = 76  # an earlier run ended with an unknown outcome: a person decides
FINGERPRINT_MISMATCH = 77  # the key was used with a different payload: refused, not run
CONFIG = 78  # EX_CONFIG: no URL or token, or the token was refused
CANNOT_EXECUTE = 126  # the command exists but could not be started (as in the shell)
NOT_FOUND = 127  # the command was not found (as in the shell)
SIGNAL_BASE = 128  # the command was killed by signal N: 128 + N (as in the shell)


def for_error(exc: KeyStoreError) -> int:
    """The exit code for an error of the key store client."""
    if isinstance(exc, InProgress):
        return IN_PROGRESS
    if isinstance(exc, NeedsReconciliation):
        return NEEDS_RECONCILIATION
    if isinstance(exc, FingerprintMismatch):
        return FINGERPRINT_MISMATCH
    if isinstance(exc, (Unauthorized, Forbidden)):
        return CONFIG
    return UNAVAILABLE
