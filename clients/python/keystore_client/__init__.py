"""Python client of the Idempotency Key Store: claim before a side effect, complete after it,
and let every repeat get the first result back.

    from keystore_client import KeyStore, derive_key

    ks = KeyStore("http://127.0.0.1:8080", token)
    with ks.once("create_invoice", derive_key("acme", "2026-W48"), payload=order) as op:
        if not op.replayed:
            invoice = billing.create(order, idempotency_key=op.idempotency_key)
            op.succeed(resource_id=invoice.id)
    print(op.result.resource_id)

Polling (records without event ids, fetched in overlapping windows): `claim_batch` with a
`version` per item acquires a record again only when it changed; see docs/polling.md.

Outbound requests made once by the key store itself: `ks.send(scope, key, "billing",
method="POST", path="/invoices", json=order)` returns `Sent` (docs/python-client.md).
"""
from ._batch import BatchItem, BatchResult
from ._client import KeyStore, __version__
from ._exceptions import (
    AlreadyCompleted,
    APIError,
    ConnectError,
    Expired,
    FingerprintMismatch,
    Forbidden,
    InProgress,
    InternalError,
    InvalidRequest,
    KeyStoreError,
    LeaseLost,
    MethodNotAllowed,
    NeedsReconciliation,
    NotFound,
    OperationFailed,
    OutcomeUnknown,
    PayloadTooLarge,
    RateLimited,
    TransportError,
    Unauthorized,
    Unavailable,
    UnexpectedResponse,
)
from ._keys import derive_key
from ._models import Checkpoint, Claimed, Record, Result, new_lease_token
from ._once import Operation
from ._send import Sent
from ._retry import RetryPolicy

__all__ = [
    "KeyStore", "Operation", "RetryPolicy", "derive_key", "new_lease_token",
    "Claimed", "Record", "Result", "Checkpoint", "BatchItem", "BatchResult", "Sent",
    "KeyStoreError", "TransportError", "ConnectError", "OutcomeUnknown", "APIError",
    "InvalidRequest", "Unauthorized", "Forbidden", "NotFound", "Expired", "MethodNotAllowed",
    "InProgress", "NeedsReconciliation", "LeaseLost", "AlreadyCompleted", "PayloadTooLarge",
    "FingerprintMismatch", "RateLimited", "InternalError", "Unavailable", "UnexpectedResponse",
    "OperationFailed", "__version__",
]
