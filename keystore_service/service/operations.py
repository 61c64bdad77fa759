"""What operators do: list reviews, resolve records, and the audit trail of each resolution.

A resolution is one transaction: the record changes by compare-and-set, the reviews close,
the attempt history and the audit row (who, when, what, the record before and after) are
written with it, or nothing is.
"""
from __future__ import annotations

import base64
import json
import re
from dataclasses import asdict
from typing import Optional

from keystore_service import errors
from keystore_service.domain import records as domain
from keystore_service.domain import upkeep
from keystore_service.domain.records import Record
from keystore_service.service.claims import ANSWER_RESULTS_BYTES, KeyStoreService
from keystore_service.service.phases import AGAIN, Again, atomic_phase
from keystore_service.storage.accounts import Principal
from keystore_service.storage.reviews import Review

ACTIONS = ("mark_succeeded", "mark_failed", "release", "dismiss")
# Reviews a person may close leaving the record as it is: a mismatch (the original stands)
# and a failed delivery (it stays failed).
DISMISSABLE = (domain.ReviewKind.FINGERPRINT_MISMATCH, domain.ReviewKind.DELIVERY_FAILED)


def snapshot(record: Optional[Record]) -> Optional[str]:
    """The record as the audit trail keeps it (never the lease token's hash)."""
    if record is None:
        return None
    return json.dumps({k: v for k, v in asdict(record).items() if k != "lease_token_hash"},
                      sort_keys=True)


class Operations:
    def __init__(self, service: KeyStoreService):
        self.service = service
        self.records = service.records
        self.reviews = service.reviews
        self.db = service.records.db

    # --- the review queue ----------------------------------------------------------------

    def list_reviews(self, tenant_id: int, state: str = "open", kind: Optional[str] = None,
                     scope: Optional[str] = None, key: Optional[str] = None,
                     min_age_seconds: int = 0, limit: int = 50,
                     cursor: Optional[str] = None) -> tuple[list[tuple[Review, Optional[Record]]],
                                                            Optional[str]]:
        """Reviews oldest first (the queue's order), with each one's record, and the cursor
        of the next page (None at the end)."""
        now = self.service.clock()
        opened_before = now - min_age_seconds * domain.SECOND if min_age_seconds else None
        after = _decode_cursor(cursor) if cursor else None
        page, more = self.reviews.page(tenant_id, state, kind, scope, key, opened_before,
                                       limit, after, ANSWER_RESULTS_BYTES)
        return page, (_encode_cursor(page[-1][0]) if more and page else None)

    def kept(self, review: Review, record: Optional[Record]) -> Optional[dict]:
        """A mismatch review's kept payloads, for a person to compare: the original (kept
        with the record when its claim asked) and the refused one (kept with the review);
        a held webhook's refused body and headers. None when nothing was kept."""
        if not review.kept or review.state != "open":
            return None
        try:
            held = json.loads(review.kept)
        except ValueError:
            return None
        if not isinstance(held, dict):
            return None
        if "payload" in held:  # a claim's kept payload (canonical JSON text)
            original = None
            if record is not None:
                with self.db.connection() as cur:
                    original = self.records.kept_payload(cur, record)
            return {"original": _parsed(original), "refused": _parsed(held["payload"])}
        return {"refused": held}  # a held webhook body, or a failed delivery's last answers

    # --- resolving -----------------------------------------------------------------------

    def resolve(self, who: Principal, scope: str, key: str, action: str,
                review_id: Optional[int] = None, result: Optional[str] = None,
                resource_id: Optional[str] = None) -> tuple[Record, list[int]]:
        """Settle a record as a person decided; returns it and the reviews closed."""
        now = self.service.clock()
        if action == "release" and domain.is_hook_scope(scope):
            raise errors.InvalidRequest("release is not for an event of the gateway: it would "
                                        "let a resend in again (redeliver it, or dismiss the "
                                        "review)", details={"field": "action"})

        def step(cur) -> tuple[Record, list[int]] | Again:
            seen = self.records.get(who.tenant_id, scope, key, cur)
            if seen is None:
                raise errors.NotFound()
            if domain.expired(seen, now):
                raise errors.Expired()
            targets = self._targets(cur, seen, action, review_id)
            if action == "dismiss":
                new = seen
            else:
                new = self._settle(cur, seen, action, result, resource_id, who, now)
                if new is None:
                    return AGAIN  # changed under us: decide again
            closed = []
            for review in targets:
                closed += self.reviews.close(cur, seen.id, action, now, who.token_name,
                                             review_id=review.id)
            if closed:
                new = self.records.get(who.tenant_id, scope, key, cur)
            self.reviews.audit(cur, tenant_id=who.tenant_id, record_id=seen.id,
                               review_id=targets[0].id if len(targets) == 1 else None,
                               scope=scope, key=key, action=action, actor=who.token_name,
                               at=now, before=snapshot(seen), after=snapshot(new))
            return new, closed
        return atomic_phase(self.records.transaction, step)

    def expire(self, who: Principal, scope: str, key: str) -> Record:
        """End a record's window now, as a person decided, with its audit row."""
        def audit(cur, before: Record, after: Record, now: int) -> None:
            self.reviews.audit(cur, tenant_id=who.tenant_id, record_id=before.id,
                               review_id=None, scope=scope, key=key, action="expire",
                               actor=who.token_name, at=now, before=snapshot(before),
                               after=snapshot(after))
        return self.service.expire(who.tenant_id, scope, key, audit)

    def _targets(self, cur, seen: Record, action: str, review_id: Optional[int]) -> list:
        open_reviews = self.reviews.open_of(cur, seen.id)
        if review_id is not None:
            open_reviews = [r for r in open_reviews if r.id == review_id]
            if not open_reviews:
                raise errors.NotFound(f"the record has no open review {review_id}")
        if action != "dismiss":
            return open_reviews
        if any(r.kind == "stale_lease" for r in open_reviews) and review_id is not None:
            raise errors.InvalidRequest("dismiss keeps the original of a fingerprint mismatch; "
                                        "a stale lease needs mark_succeeded, mark_failed or "
                                        "release")
        mismatches = [r for r in open_reviews if r.kind in DISMISSABLE]
        if not mismatches:
            if open_reviews:
                raise errors.InvalidRequest("dismiss is for fingerprint mismatches; this record"
                                            " has a stale lease to resolve")
            raise errors.NotFound("the record has no open review to dismiss")
        return mismatches

    def _settle(self, cur, seen: Record, action: str, result: Optional[str],
                resource_id: Optional[str], who: Principal, now: int) -> Optional[Record]:
        try:
            decided = upkeep.resolution_changes(seen, action, result, resource_id,
                                                f"{action} by {who.token_name}", now)
        except upkeep.AlreadyFinished:
            raise errors.AlreadyCompleted(record=seen) from None
        if decided is None:
            return seen
        changes, ended = decided
        return self.records.compare_and_set(seen, changes, cur, ended)


# A cursor is the queue position after a page: unpadded base64url of "[opened_at, id]"
# (schemas.Cursor publishes this shape). Only the service's own spelling of two integers
# 0..2^63-1 is taken back: anything else would reach the database as a value it cannot hold.
MAX_BIGINT = 2**63 - 1
_CURSOR = re.compile("[A-Za-z0-9_-]{8,56}")  # ASCII, and no longer than two 19-digit numbers


def _encode_cursor(review: Review) -> str:
    return _cursor_text(review.opened_at, review.id)


def _cursor_text(opened_at: int, last_id: int) -> str:
    raw = json.dumps([opened_at, last_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[int, int]:
    """(opened_at, id) of a cursor this service gave out; InvalidRequest for any other."""
    refused = errors.InvalidRequest("the cursor is not one this service gave out",
                                    details={"field": "cursor"})
    if not _CURSOR.fullmatch(cursor):
        raise refused
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except ValueError:  # not base64, not UTF-8, not JSON
        raise refused from None
    if not (isinstance(value, list) and len(value) == 2
            and all(type(v) is int and 0 <= v <= MAX_BIGINT for v in value)):  # bool is no int
        raise refused
    if _cursor_text(*value) != cursor:  # "[1,2]", "[01, 2]", " [1, 2]": not our spelling
        raise refused
    return value[0], value[1]


def _parsed(text: Optional[str]):
    return json.loads(text) if text is not None else None
