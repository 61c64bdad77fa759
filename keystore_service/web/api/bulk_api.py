"""The bulk actions' HTTP endpoints: POST /v1/deliveries/bulk (a dry run, or a job),
GET /v1/jobs/<id>, POST /v1/jobs/<id>/cancel (operator role). Parse, call the gateway's
Bulk, render; nothing else lives here."""
from __future__ import annotations

import json
import re

from flask import Blueprint, g, request, url_for

from keystore_service import errors
from keystore_service.service.auth import require_operator
from keystore_service.storage.bulk import Job
from keystore_service.web.api import bulk_schemas, parsing
from keystore_service.web.api.render import respond, rfc3339
from keystore_service.web.context import keystore

bp = Blueprint("bulk_v1", __name__, url_prefix="/v1")
_KEY = re.compile(bulk_schemas.KEY_PATTERN)
MAX_JOB_ID = 2**63 - 1


def _bulk():
    return keystore().gateway.bulk


def idempotency_key() -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not _KEY.fullmatch(key):
        raise errors.InvalidRequest("the Idempotency-Key header is 1-255 visible ASCII "
                                    "characters", details={"field": "Idempotency-Key"})
    return key


@bp.post("/deliveries/bulk")
def bulk():
    require_operator(g.principal)
    body = parsing.body(bulk_schemas.BulkRequest)
    f = body.filter.as_filter()
    if body.dry_run:
        return respond({"matched": _bulk().dry_run(g.principal.tenant_id, f)})
    job, created = _bulk().start(g.principal, body.action, f, body.filter.shown(), body.force,
                                 idempotency_key())
    if created:
        return respond({"job": job_json(job)}, 202)
    return respond({"job": job_json(job)}, 200, headers={"Idempotent-Replayed": "true"})


def _job_id(text: str) -> int:
    if not re.fullmatch("[0-9]{1,19}", text) or int(text) > MAX_JOB_ID:
        raise errors.NotFound("no such job")
    return int(text)


@bp.get("/jobs/<job_id>")
def show_job(job_id: str):
    require_operator(g.principal)
    return respond({"job": job_json(_bulk().get(g.principal.tenant_id, _job_id(job_id)))})


@bp.post("/jobs/<job_id>/cancel")
def cancel_job(job_id: str):
    require_operator(g.principal)
    job = _bulk().cancel(g.principal.tenant_id, _job_id(job_id))
    return respond({"job": job_json(job)})


def job_json(job: Job) -> dict:
    return {"id": job.id, "action": job.action, "filter": json.loads(job.filter),
            "force": bool(job.force), "state": job.state, "matched": job.matched, "done": job.done,
            "skipped": job.skipped, "started_at": rfc3339(job.started_at),
            "finished_at": rfc3339(job.finished_at),
            "url": (keystore().settings.public_url or request.host_url).rstrip("/")
            + url_for("ui.hook_job", job_id=job.id)}
