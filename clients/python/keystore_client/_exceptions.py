"""Everything this package raises, in one hierarchy.

    KeyStoreError                  base: status, code, message, response (None without an answer)
     +-- TransportError            no HTTP answer came back
     |    +-- ConnectError         the request never reached the service: nothing was applied
     |    +-- OutcomeUnknown       sent, but no answer (timeout, dropped connection): it may
     |                             or may not have been applied
     +-- APIError                  the service answered with an error: details, record, retry_after
     |    +-- InvalidRequest         400 invalid_request
     |    +-- Unauthorized           401 unauthorized
     |    +-- Forbidden              403 forbidden
     |    +-- NotFound               404 not_found
     |    +-- Expired                404 expired
     |    +-- MethodNotAllowed       405 method_not_allowed
     |    +-- InProgress             409 in_progress (another attempt holds a live lease)
     |    +-- NeedsReconciliation    409 needs_reconciliation (a person must resolve it)
     |    +-- LeaseLost              409 lease_lost (a newer attempt or a person replaced you)
     |    +-- AlreadyCompleted       409 already_completed
     |    +-- PayloadTooLarge        413 payload_too_large
     |    +-- FingerprintMismatch    422 fingerprint_mismatch (same key, different payload)
     |    +-- RateLimited            429 rate_limited
     |    +-- InternalError          500 internal_error
     |    +-- Unavailable            503 unavailable (nothing was written)
     |    +-- UnexpectedResponse     any answer docs/api.md does not list (a proxy's 502 page)
     +-- OperationFailed           a replayed operation had been recorded as a permanent failure

`code` is docs/api.md's error code (`"in_progress"`); transport errors use `"connect_error"`
and `"outcome_unknown"`. Messages never contain a token or a payload.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # pragma: no cover
    import requests

    from ._models import Record


class KeyStoreError(Exception):
    """Base of every error of this package."""

    code: str = "error"
    status: Optional[int] = None

    def __init__(self, message: str, *, response: Optional[requests.Response] = None):
        super().__init__(message)
        self.message = message
        self.response = response


class TransportError(KeyStoreError):
    """No HTTP answer came back; `__cause__` is the underlying `requests` exception."""


class ConnectError(TransportError):
    """The connection could not be made, so the service never saw the request. Always safe
    to retry; the client does, within its retry budget."""

    code = "connect_error"


class OutcomeUnknown(TransportError):
    """The request was sent but no answer arrived. Every call of the client is safe to
    repeat and is retried within its RetryPolicy (a claim with the lease token it proposed,
    so the repeat resumes what the lost one acquired); this is raised when no try is left."""

    code = "outcome_unknown"


class APIError(KeyStoreError):
    """The service answered with an error body (`{"error": {code, message, details}}`).

    `record` is the record the error is about, when the service sent one; `outcome` is the
    claim outcome of a refused claim; `retry_after` is the `Retry-After` header in seconds.
    """

    def __init__(self, message: str, *, response: Optional[requests.Response] = None,
                 status: Optional[int] = None, details: Optional[dict] = None,
                 record: Optional[Record] = None, outcome: Optional[str] = None,
                 retry_after: Optional[float] = None, body: Any = None):
        super().__init__(message, response=response)
        if status is not None:
            self.status = status
        self.details = details or {}
        self.record = record
        self.outcome = outcome
        self.retry_after = retry_after
        self.body = body

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


class InvalidRequest(APIError):
    code, status = "invalid_request", 400


class Unauthorized(APIError):
    code, status = "unauthorized", 401


class Forbidden(APIError):
    code, status = "forbidden", 403


class NotFound(APIError):
    code, status = "not_found", 404


class Expired(APIError):
    code, status = "expired", 404


class MethodNotAllowed(APIError):
    code, status = "method_not_allowed", 405


class InProgress(APIError):
    code, status = "in_progress", 409


class NeedsReconciliation(APIError):
    code, status = "needs_reconciliation", 409


class LeaseLost(APIError):
    code, status = "lease_lost", 409


class AlreadyCompleted(APIError):
    code, status = "already_completed", 409


class PayloadTooLarge(APIError):
    code, status = "payload_too_large", 413


class FingerprintMismatch(APIError):
    code, status = "fingerprint_mismatch", 422


class RateLimited(APIError):
    code, status = "rate_limited", 429


class InternalError(APIError):
    code, status = "internal_error", 500


class Unavailable(APIError):
    code, status = "unavailable", 503


class UnexpectedResponse(APIError):
    """An answer outside docs/api.md: a status or body the service never sends (for example
    a reverse proxy's HTML error page). `status` is the HTTP status that came back."""

    code = "unexpected_response"


class OperationFailed(KeyStoreError):
    """The operation had been completed with state `failed` (a permanent failure someone
    recorded); the exactly-once decorator raises this on replay instead of returning."""

    code = "operation_failed"

    def __init__(self, message: str, *, record: Record):
        super().__init__(message)
        self.record = record


BY_CODE: dict[str, type[APIError]] = {
    cls.code: cls for cls in APIError.__subclasses__() if cls is not UnexpectedResponse}
