"""The /v1 HTTP endpoints: parse, call the service, render. Nothing else lives here."""
from __future__ import annotations

from collections import Counter
from contextlib import nullcontext

from flask import Blueprint, g, request

from keystore_service import errors
from keystore_service.domain import canonical, versions
from keystore_service.domain.deliveries import DeliveryState
from keystore_service.domain.records import MAX_RESULT_BYTES, Outcome
from keystore_service.gateway.rules import SCOPE_PREFIX, is_hook_scope
from keystore_service.service.auth import require_operator
from keystore_service.service.batch import Item, ItemResult
from keystore_service.service.claims import Claim, KeyStoreService
from keystore_service.service.outcomes import LateRepeat
from keystore_service.web.api import schemas
from keystore_service.web.api.parsing import body as _body
from keystore_service.web.api.parsing import validate as _validate
from keystore_service.web.api.render import (
    kept_json,
    record_json,
    respond,
    review_json,
    rfc3339,
)
from keystore_service.web.context import keystore
from keystore_service.web.errors import error_json

bp = Blueprint("v1", __name__, url_prefix="/v1")


def _service() -> KeyStoreService:
    return keystore().service


def _record(record) -> dict:
    return record_json(record, _service().open_review)


def authenticate() -> None:
    """Every path under /v1 checks the token before it is routed (the app calls this for
    matched and unmatched paths alike): a mistyped base URL with a wrong token answers 401,
    never a 404 that a credential test could take for an accepted token."""
    ks = keystore()
    g.principal = ks.auth.authenticate(request.headers.get("Authorization"))
    if ks.limiter.enabled:
        ks.limiter.check(g.principal.token_id)


def _fingerprint(body: schemas.ClaimRequest | schemas.BatchItem, field: str) -> str | None:
    if body.payload is None:
        return body.fingerprint
    try:
        return canonical.fingerprint(body.payload)
    except ValueError as exc:
        raise errors.InvalidRequest(str(exc), details={"field": field}) from None


def _version(body: schemas.ClaimRequest | schemas.BatchItem) -> tuple[str | None, int | None]:
    return versions.parse(body.version) if body.version is not None else (None, None)


def _metrics():
    return keystore().metrics


def _not_a_hook_scope(scope: str) -> None:
    """Scopes beginning with `hook:` are the gateway's (contract v1.1): claims, batches and
    the holder's calls there are 403; lookups, reviews and resolutions work."""
    if is_hook_scope(scope):
        raise errors.Forbidden("scopes beginning with hook: are the webhook gateway's own",
                               details={"field": "scope"})


@bp.get("/whoami")
def whoami():
    p = g.principal
    return respond({"tenant": p.tenant, "role": p.role, "token": p.token_name})


@bp.post("/claim")
def claim():
    body = _body(schemas.ClaimRequest)
    _not_a_hook_scope(body.scope)
    ks = keystore()
    settings, wait = ks.settings, body.wait_seconds or 0
    c = Claim(body.scope, body.key, _fingerprint(body, "payload"),
              body.ttl_seconds or settings.default_ttl_seconds,
              body.lease_seconds or settings.default_lease_seconds, body.on_stale,
              *_version(body), lease_token=body.lease_token,
              on_late_repeat=body.on_late_repeat, kept_payload=_kept(body, settings))
    try:  # waiting takes a seat (waiting.py); without one, the claim answers at once
        with ks.waits.seat(g.principal.token_id) if wait else nullcontext(False) as seated:
            result = _service().claim(g.principal.tenant_id, c, wait if seated else 0)
    except errors.KeystoreError as exc:
        if exc.outcome:
            _metrics().claim(body.scope, exc.outcome)
        if isinstance(exc, LateRepeat):  # held for a person: the trace it repeats
            exc.details["late_repeat"] = _late_json(exc.trace)
        raise
    _metrics().claim(body.scope, result.outcome.value)
    record = result.record
    if result.outcome is Outcome.REPLAY:
        return respond({"outcome": "replay", "record": _record(record)}, 200, record,
                       {"Idempotent-Replayed": "true"})
    answer = {"outcome": "acquired", "lease_token": result.lease_token,
              "attempt": record.attempt, "record": _record(record)}
    if result.late is not None:  # acquired, but probably the old event sent again
        answer["late_repeat"] = _late_json(result.late)
    if result.resumed:  # the same attempt again: its first answer was lost
        return respond({**answer, "resumed": True}, 201, record,
                       {"Idempotent-Replayed": "true"})
    return respond(answer, 201, record)


MAX_KEPT_PAYLOAD = 64 * 1024  # docs/api.md's bound on a kept payload, canonical form


def _kept(body: schemas.ClaimRequest, settings) -> str | None:
    """The claim's canonical payload when it (or its scope, by configuration) keeps it;
    413 over 64 KiB, before anything is written."""
    scopes = {s.strip() for s in settings.keep_payload_scopes.split(",") if s.strip()}
    if body.payload is None or not (body.keep_payload or "*" in scopes
                                    or body.scope in scopes):
        return None
    text = canonical.canonical(body.payload)  # (valid: the fingerprint came from it)
    if len(text) > MAX_KEPT_PAYLOAD:
        raise errors.PayloadTooLarge("a kept payload is at most 64 KiB in canonical form",
                                     details={"field": "payload", "limit_bytes":
                                              MAX_KEPT_PAYLOAD})
    return text.decode("utf-8")


def _late_json(trace) -> dict:
    return {"first_seen_at": rfc3339(trace.first_seen_at),
            "expired_at": rfc3339(trace.expired_at), "resource_id": trace.resource_id}


@bp.post("/claim/batch")
def claim_batch():
    body = _body(schemas.BatchClaimRequest)
    _not_a_hook_scope(body.scope)
    settings = keystore().settings
    items = [Item(it.key, _fingerprint(it, f"items.{n}.payload"), *_version(it),
                  lease_token=it.lease_token) for n, it in enumerate(body.items)]
    results = keystore().batch.claim(
        g.principal.tenant_id, body.scope, items,
        body.ttl_seconds or settings.default_ttl_seconds,
        body.lease_seconds or settings.default_lease_seconds, body.on_stale)
    observed = _metrics()  # once per batch: counted per outcome, not per item
    counts = Counter(r.outcome.value for r in results if r.outcome is not None)
    for outcome, count in counts.items():
        observed.claim(body.scope, outcome, count)
    open_review = _service().open_review
    return respond({"results": [_item_json(r, open_review) for r in results]})


def _item_json(r: ItemResult, open_review) -> dict:
    out: dict = {}
    if r.outcome is not None:
        out["outcome"] = r.outcome.value
    if r.lease_token is not None:
        out["lease_token"], out["attempt"] = r.lease_token, r.record.attempt
    if r.resumed:
        out["resumed"] = True
    if r.error is not None:
        out["error"] = error_json(r.error)
    if r.record is not None:
        out["record"] = record_json(r.record, open_review)
    return out


def _result_json(result: schemas.ResultIn | None) -> str:
    fields = {} if result is None else result.model_dump(exclude_none=True)
    try:
        text = canonical.canonical(fields)
    except ValueError as exc:
        raise errors.InvalidRequest(str(exc), details={"field": "result"}) from None
    if len(text) > MAX_RESULT_BYTES:
        raise errors.InvalidRequest(
            f"result.body is over {MAX_RESULT_BYTES // 1024} KiB in canonical form",
            details={"field": "result.body", "limit": MAX_RESULT_BYTES})
    return text.decode("utf-8")


@bp.post("/complete")
def complete():
    body = _body(schemas.CompleteRequest)
    _not_a_hook_scope(body.scope)
    record = _service().complete(g.principal.tenant_id, body.scope, body.key, body.lease_token,
                                 body.state, _result_json(body.result),
                                 body.result.resource_id if body.result else None)
    return respond({"record": _record(record)}, 200, record)


@bp.post("/release")
def release():
    body = _body(schemas.ReleaseRequest)
    _not_a_hook_scope(body.scope)
    record = _service().release(g.principal.tenant_id, body.scope, body.key, body.lease_token,
                                body.reason)
    return respond({"record": _record(record)}, 200, record)


@bp.post("/extend")
def extend():
    body = _body(schemas.ExtendRequest)
    _not_a_hook_scope(body.scope)
    record = _service().extend(g.principal.tenant_id, body.scope, body.key, body.lease_token,
                               body.lease_seconds, body.checkpoint, body.resource_id)
    return respond({"record": _record(record)}, 200, record)


@bp.get("/keys")
def lookup():
    query = _validate(schemas.LookupQuery, request.args.to_dict())
    wait = query.wait or 0
    seats = keystore().waits
    with seats.seat(g.principal.token_id) if wait else nullcontext(False) as seated:
        record = _service().lookup(g.principal.tenant_id, query.scope, query.key,
                                   wait if seated else 0)
    # No free seat to wait in: the record as it is, and when to ask again.
    later = {"Retry-After": "1"} if wait and not seated and record.state == "in_progress" \
        else None
    return respond({"record": _record(record)}, 200, record, later)


@bp.post("/expire")
def expire():
    require_operator(g.principal)
    body = _body(schemas.ExpireRequest)
    record = keystore().operations.expire(g.principal, body.scope,
                                                                  body.key)
    return respond({"record": _record(record)}, 200, record)


# --- operators ----------------------------------------------------------------------------

@bp.get("/reviews")
def list_reviews():
    require_operator(g.principal)
    q = _validate(schemas.ReviewsQuery, request.args.to_dict())
    page, cursor = keystore().operations.list_reviews(
        g.principal.tenant_id, q.state, q.kind, q.scope, q.key, q.min_age_seconds, q.limit,
        q.cursor)
    ops = keystore().operations
    items = [{**review_json(v), "record": _record(r) if r is not None else None,
              **kept_json(ops.kept(v, r))} for v, r in page]
    return respond({"reviews": items, "next_cursor": cursor})


@bp.post("/resolve")
def resolve():
    require_operator(g.principal)
    body = _body(schemas.ResolveRequest)
    if is_hook_scope(body.scope) and body.action in ("release", "redeliver"):
        return _resolve_hook(body)
    if body.action == "redeliver":
        raise errors.InvalidRequest("redeliver is for the gateway's records (hook: scopes)",
                                    details={"field": "action"})
    result = _result_json(body.result) if body.result is not None else None
    record, closed = keystore().operations.resolve(
        g.principal, body.scope, body.key, body.action, body.review_id, result,
        body.result.resource_id if body.result else None)
    return respond({"record": _record(record), "closed_reviews": closed}, 200, record)


def _resolve_hook(body: schemas.ResolveRequest):
    """`release` would let a resend in again: 400. `redeliver` forwards the event again."""
    if body.action == "release":
        raise errors.InvalidRequest("release is not for an event of the gateway: it would let "
                                    "a resend in again (redeliver it, or dismiss the review)",
                                    details={"field": "action"})
    ks = keystore()
    source = body.scope[len(SCOPE_PREFIX):]  # is_hook_scope: the scope is hook:<source>
    deliveries = ks.gateway.deliveries
    detail = deliveries.detail(g.principal.tenant_id, source, body.key)
    failed = [name for name, e in detail.deliveries if e.state == DeliveryState.FAILED]
    if body.review_id is not None:  # that review's delivery only (each has its own)
        review = next((r for r in detail.reviews if r.id == body.review_id), None)
        if review is None:
            raise errors.NotFound(f"the record has no open review {body.review_id}")
        failed = [review.destination] if review.destination else failed
    for name in failed or [None]:  # the failed deliveries; else the one there is (or 400)
        deliveries.redeliver(g.principal.tenant_id, source, body.key, True, name)
    record = ks.service.lookup(g.principal.tenant_id, body.scope, body.key)
    return respond({"record": _record(record), "closed_reviews": []}, 200, record)


@bp.get("/report")
def report():
    require_operator(g.principal)
    q = _validate(schemas.ReportQuery, request.args.to_dict())
    ks = keystore()
    body = ks.reports.daily(g.principal.tenant_id, q.date, ks.service.clock())
    body["generated_at"] = rfc3339(body["generated_at"])
    return respond(body)
