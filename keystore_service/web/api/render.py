"""Everything that turns results into JSON responses (errors: web/errors.py)."""
from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import formatdate
from functools import lru_cache
from typing import Any, Optional

from flask import Response, g, request

from keystore_service import logs
from keystore_service.domain import versions
from keystore_service.domain.records import SECOND, Micros, Record
from keystore_service.storage.reviews import Review

log = logging.getLogger("keystore.api")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
JSON = "application/json"


def rfc3339(us: Optional[Micros]) -> Optional[str]:
    """UTC RFC 3339 with `Z`, always to the microsecond: 2026-11-30T02:40:14.123456Z."""
    if us is None:
        return None
    seconds, micros = divmod(us, SECOND)
    return f"{_rfc3339_second(seconds)}.{micros:06d}Z"


# A record carries four instants, a batch answer 1,000 records, and they share their seconds:
# formatting through datetime cost ~30 us a call, a quarter of a batch claim's time
# (bench/NOTES.md). The caches hold recent seconds' text, a few hundred KB at most.
@lru_cache(maxsize=4096)
def _rfc3339_second(seconds: int) -> str:
    return f"{_EPOCH + timedelta(seconds=seconds):%Y-%m-%dT%H:%M:%S}"


@lru_cache(maxsize=1024)
def _imf_second(seconds: int) -> str:
    return formatdate(seconds, usegmt=True)


def imf_fixdate(us: Micros) -> str:
    """The HTTP date of an instant, rounded down to the second."""
    return _imf_second(us // SECOND)


ReviewOf = Callable[[Record], Optional[Review]]


def review_json(v: Review) -> dict:
    """A review as docs/api.md lists it (without its record)."""
    return {"id": v.id, "kind": v.kind, "scope": v.scope, "key": v.key, "state": v.state,
            "opened_at": rfc3339(v.opened_at), "count": v.count, "resolution": v.resolution,
            "updated_at": rfc3339(v.updated_at), "resolved_at": rfc3339(v.resolved_at),
            "resolved_by": v.resolved_by, "original_fingerprint": v.original_fingerprint,
            "refused_fingerprints": v.refused,
            # a delivery_failed review's destination (a source may have several); else null
            "destination": v.destination or None}


def kept_json(kept: Optional[dict]) -> dict:
    """What a review keeps for a person to compare (operators only: never in a record as
    clients see it): {"kept": {"original": ..., "refused": ...}} or nothing."""
    return {"kept": kept} if kept else {}


def record_json(r: Record, review_of: Optional[ReviewOf] = None) -> dict:
    checkpoint = None
    if r.checkpoint_at is not None:
        checkpoint = {"step": r.checkpoint_step, "resource_id": r.checkpoint_resource_id,
                      "at": rfc3339(r.checkpoint_at)}
    return {
        "scope": r.scope, "key": r.key, "state": r.state, "fingerprint": r.fingerprint,
        "version": versions.show(r.version_kind, r.version), "attempt": r.attempt,
        "first_seen_at": rfc3339(r.first_seen_at), "last_seen_at": rfc3339(r.last_seen_at),
        "expires_at": rfc3339(r.expires_at), "lease_expires_at": rfc3339(r.lease_expires_at),
        "duplicate_count": r.duplicate_count, "checkpoint": checkpoint,
        "result": json.loads(r.result) if r.result is not None else None,
        "review": review_json(review) if review_of and (review := review_of(r)) else None,
    }


def respond(body: dict, status: int = 200, record: Optional[Record] = None,
            headers: Optional[dict] = None) -> Response:
    resp = Response(json.dumps(body, ensure_ascii=False, separators=(",", ":")), status,
                    mimetype=JSON)
    if record is not None:
        resp.headers["Idempotency-Expires"] = imf_fixdate(record.expires_at)
    if headers:
        resp.headers.update(headers)
    return resp


def current_request_id() -> str:
    """This request's id: the caller's X-Request-Id if it is a short printable word, else
    a new one (made once per request, and only when a log line or an error needs it)."""
    if "request_id" not in g:
        g.request_id = logs.request_id(request.headers.get("X-Request-Id"))
    return g.request_id


def validation_details(exc: Any) -> dict:
    """Pydantic errors as field + message: never the input value (it may be a payload)."""
    problems = []
    for e in exc.errors(include_input=False, include_url=False, include_context=False):
        field = ".".join(_field_path(e["loc"])) or "body"
        problem = {"field": field, "message": e["msg"]}
        if problem not in problems:  # one line per field, not one per union branch
            problems.append(problem)
    return {"errors": problems}


_PYDANTIC_TAGS = frozenset({"int", "str", "float", "bool", "none", "list", "dict"})


def _field_path(loc: tuple) -> list[str]:
    """The fields of an error's location, without pydantic's union-branch tags
    ("function-before[...]", "constrained-int", "str") that follow the field they are in."""
    path = []
    for part in loc:
        if isinstance(part, int):
            path.append(str(part))
        elif part.isidentifier() and part not in _PYDANTIC_TAGS:
            path.append(part)
        else:
            break
    return path
