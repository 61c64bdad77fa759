"""Batch claims (`KeyStore.claim_batch`): what goes in, one item per key, and what comes back,
one typed result per item in the order sent.

    outcome                 the item                       carries
    acquired                is yours: act, then complete   lease_token, attempt (and
                            or release it                  resumed: a lost answer's)
    replay                  finished before (at this or    record.result
                            a newer version): do nothing
    in_progress             held by a live lease           retry_after (seconds)
    needs_reconciliation    an attempt ended unknown       error (NeedsReconciliation)
    fingerprint_mismatch    same key, other payload        error (FingerprintMismatch)
    invalid                 refused alone: a version of    error (InvalidRequest), and the
                            the other kind than stored     stored record

A refused item's `error` is the exception a single claim would have raised (not raised
here: the other items of the batch stand).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Optional, Union

from ._exceptions import APIError, UnexpectedResponse
from ._models import Claimed, Record, VersionLike, proposed_token, version_json
from ._transport import error_from_json

MAX_ITEMS = 1000  # docs/api.md's limit per batch claim
INVALID = "invalid"  # the outcome shown for an item refused as invalid (the wire has none)


@dataclass(frozen=True)
class BatchItem:
    """One key of a batch claim, with what it is about (`payload` or a ready `fingerprint`,
    never both), its `version` (an int, an RFC 3339 str or an aware datetime) and the
    `lease_token` it proposes (None: `claim_batch` makes one for it)."""

    key: str
    payload: Any = None
    fingerprint: Optional[str] = None
    version: VersionLike = None
    # not part of what the item is about (two items equal whatever they propose), and never
    # in a repr: a lease token is a credential of its attempt
    lease_token: Optional[str] = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.key, str):
            raise TypeError(f"an item's key is a str, not {type(self.key).__name__}")
        if self.payload is not None and self.fingerprint is not None:
            raise ValueError(f"item {self.key!r}: send either payload or fingerprint, not both")
        version_json(self.version)  # TypeError / ValueError now, not a 400 for the batch
        if self.lease_token is not None:
            proposed_token(self.lease_token)

    @classmethod
    def of(cls, item: Union[BatchItem, Mapping]) -> BatchItem:
        """An item from itself or from a dict with the same fields; ValueError names a field
        this class does not know (a misspelt `verison` must not be dropped silently)."""
        if isinstance(item, BatchItem):
            return item
        if not isinstance(item, Mapping):
            raise TypeError(f"an item is a BatchItem or a dict, not {type(item).__name__}")
        unknown = set(item) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown item fields: {', '.join(sorted(map(str, unknown)))}")
        if "key" not in item:
            raise ValueError("an item needs a key")
        return cls(**item)

    def to_json(self) -> dict:
        out: dict = {"key": self.key}
        if self.payload is not None:
            out["payload"] = self.payload
        if self.fingerprint is not None:
            out["fingerprint"] = self.fingerprint
        if self.version is not None:
            out["version"] = version_json(self.version)
        if self.lease_token is not None:
            out["lease_token"] = self.lease_token
        return out


@dataclass(frozen=True)
class BatchResult(Claimed):
    """The answer for one item of a batch claim (see the table at the top of this module).
    `item` is the item it answers; `error` is set for every outcome that is not `acquired` or
    `replay`; `retry_after` is the seconds left on the holder's lease for `in_progress`."""

    item: Optional[BatchItem] = None
    error: Optional[APIError] = None
    retry_after: Optional[float] = None

    @property
    def key(self) -> str:
        return self.record.key

    @property
    def refused(self) -> bool:
        """True for every outcome but `acquired` and `replay`."""
        return self.error is not None

    @classmethod
    def from_item_json(cls, data: Any, item: BatchItem) -> BatchResult:
        if not isinstance(data, dict) or not isinstance(data.get("record"), dict):
            raise ValueError(f"an answer for {item.key!r} without a record")
        error = error_from_json(data)
        outcome = data.get("outcome") or (INVALID if error is not None and
                                          error.code == "invalid_request" else None)
        if not isinstance(outcome, str):
            raise ValueError(f"an answer for {item.key!r} without an outcome")
        retry = (error.details or {}).get("retry_after_seconds") if error else None
        return cls(outcome, Record.from_json(data["record"]), data.get("lease_token"),
                   data.get("attempt"), data.get("resumed") is True, item=item, error=error,
                   retry_after=float(retry) if isinstance(retry, (int, float)) else None)


def items_json(items: Iterable[Union[BatchItem, Mapping]]) -> tuple[list, list]:
    """(the typed items, each with the lease token it proposes, and their wire form);
    ValueError for more than MAX_ITEMS."""
    typed = [BatchItem.of(it) for it in items]
    if len(typed) > MAX_ITEMS:
        raise ValueError(f"{len(typed)} items: a batch claim takes at most {MAX_ITEMS} (one "
                         "transaction each; split them, and finish what each batch acquired)")
    typed = [it if it.lease_token else replace(it, lease_token=proposed_token(None))
             for it in typed]
    return typed, [it.to_json() for it in typed]


def results_from(body: dict, items: list, response: Any = None) -> list:
    """One BatchResult per item, in order; UnexpectedResponse when the answer does not
    have one readable result per item."""
    results = body.get("results")
    if not isinstance(results, list) or len(results) != len(items):
        raise UnexpectedResponse(f"a batch claim of {len(items)} items answered without one "
                                 "result per item", response=response)
    try:
        return [BatchResult.from_item_json(r, it) for r, it in zip(results, items)]
    except (ValueError, KeyError, TypeError) as exc:
        raise UnexpectedResponse(f"a batch claim's answer is not the contract's: {exc}",
                                 response=response) from None
