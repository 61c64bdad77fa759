"""Every error docs/api.md names: one class per code, each with one HTTP status.

    KeystoreError
     +-- InvalidRequest        400 invalid_request
     +-- Unauthorized          401 unauthorized
     +-- InvalidSignature      401 invalid_signature (inbound webhooks only)
     +-- Forbidden             403 forbidden
     +-- NotFound              404 not_found
     +-- Expired               404 expired
     +-- MethodNotAllowed      405 method_not_allowed
     +-- InProgress            409 in_progress
     +-- NeedsReconciliation   409 needs_reconciliation
     +-- LeaseLost             409 lease_lost
     +-- AlreadyCompleted      409 already_completed
     +-- BodyDropped           409 body_dropped (a redelivery after the body's retention)
     +-- PayloadTooLarge       413 payload_too_large
     +-- UriTooLong            414 uri_too_long (the request line; answered by the server)
     +-- HeadersTooLarge       431 headers_too_large (answered by the server)
     +-- FingerprintMismatch   422 fingerprint_mismatch
     +-- RateLimited           429 rate_limited
     +-- InternalError         500 internal_error
     +-- Unavailable           503 unavailable

An error may carry the record it is about (rendered under `record`) and headers. Messages
never contain a payload, a result body or a token.
"""
from __future__ import annotations

from typing import Any, Optional


class KeystoreError(Exception):
    code = "internal_error"
    status = 500
    default_message = "internal error"

    def __init__(self, message: Optional[str] = None, *, details: Optional[dict] = None,
                 record: Any = None, headers: Optional[dict] = None, outcome: Optional[str] = None):
        self.message = message or self.default_message
        super().__init__(self.message)
        self.details = details or {}
        self.record = record
        self.headers = headers or {}
        self.outcome = outcome


class InvalidRequest(KeystoreError):
    code, status, default_message = "invalid_request", 400, "the request is not valid"


class Unauthorized(KeystoreError):
    code, status, default_message = "unauthorized", 401, "a valid bearer token is required"


class InvalidSignature(KeystoreError):
    code, status = "invalid_signature", 401
    default_message = "the webhook's signature is missing, wrong or too old"


class Forbidden(KeystoreError):
    code, status, default_message = "forbidden", 403, "this token's role may not do that"


class NotFound(KeystoreError):
    code, status, default_message = "not_found", 404, "no such record"


class Expired(KeystoreError):
    code, status, default_message = "expired", 404, "the record has expired"


class MethodNotAllowed(KeystoreError):
    code, status, default_message = "method_not_allowed", 405, "method not allowed"


class InProgress(KeystoreError):
    code, status, default_message = "in_progress", 409, "another attempt holds a live lease"


class NeedsReconciliation(KeystoreError):
    code, status = "needs_reconciliation", 409
    default_message = "an earlier attempt ended with an unknown outcome; a person must resolve it"


class LeaseLost(KeystoreError):
    code, status = "lease_lost", 409
    default_message = "this lease token was replaced by a newer attempt or a resolution"


class AlreadyCompleted(KeystoreError):
    code, status = "already_completed", 409
    default_message = "the record is already finished with a different state or result"


class BodyDropped(KeystoreError):
    code, status = "body_dropped", 409
    default_message = "the event's body is no longer kept; it cannot be forwarded again"


class PayloadTooLarge(KeystoreError):
    code, status, default_message = "payload_too_large", 413, "the request body is too large"


class UriTooLong(KeystoreError):
    code, status, default_message = "uri_too_long", 414, "the request line is too long"


class HeadersTooLarge(KeystoreError):
    code, status, default_message = ("headers_too_large", 431,
                                     "the request's header fields are too large")


class FingerprintMismatch(KeystoreError):
    code, status = "fingerprint_mismatch", 422
    default_message = "the key was used before with a different payload; refused, not overwritten"


class RateLimited(KeystoreError):
    code, status, default_message = "rate_limited", 429, "too many requests for this token"


class InternalError(KeystoreError):
    code, status, default_message = "internal_error", 500, "internal error"


class Unavailable(KeystoreError):
    code, status = "unavailable", 503
    default_message = ("the database is unavailable; try again (repeating this request is "
                       "safe: nothing is ever half-written)")


BY_CODE = {cls.code: cls for cls in KeystoreError.__subclasses__()}
