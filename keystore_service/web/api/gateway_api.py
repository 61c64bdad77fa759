"""The gateway's HTTP endpoints: POST /hooks/<ingest_id> (no bearer token: the provider's
signature is the credential), and the operators' /v1/sources and /v1/deliveries. Parse, call
the gateway, render; nothing else lives here."""
from __future__ import annotations

from typing import Optional

from flask import Blueprint, current_app, g, request

from keystore_service import errors
from keystore_service.domain import versions
from keystore_service.domain.deliveries import DeliveryState
from keystore_service.gateway.deliveries import Delivery
from keystore_service.gateway.sources import Paused, Shown
from keystore_service.storage.sources import Source
from keystore_service.service.auth import require_operator
from keystore_service.web.api import bodies, gateway_schemas, parsing
from keystore_service.web.api.render import respond, rfc3339
from keystore_service.web.context import keystore

inbound = Blueprint("hooks_in", __name__)
v1 = Blueprint("hooks_v1", __name__, url_prefix="/v1")
MAX_INGEST_ID = 128  # ours are 43 characters; anything much longer is not one of ours


def _ks():
    return keystore().gateway


# --- POST /hooks/<ingest_id> --------------------------------------------------------------

@inbound.post("/hooks/<ingest_id>")
def ingest(ingest_id: str):
    ks = _ks()
    if len(ingest_id) > MAX_INGEST_ID or not ingest_id.isascii():
        raise errors.NotFound("no such webhook source")
    opened = ks.ingest.source(ingest_id)  # 404 before the body is read
    # The source's rate is taken after the signature is checked (Ingest.accept), so the
    # body is read first: junk must not spend a signed sender's rate (issue 25, item 5).
    bodies.buffer_chunked(request.environ, current_app.config["MAX_CONTENT_LENGTH"])
    body = request.get_data(cache=False)  # 413 past the limit
    answer = ks.ingest.accept(opened, list(request.headers.items()), body)
    headers = {"Idempotent-Replayed": "true"} if answer.replayed else None
    return respond(answer.body, answer.status, headers=headers)


# --- sources ------------------------------------------------------------------------------

@v1.post("/sources")
def create_source():
    require_operator(g.principal)
    shown = _ks().sources.create(g.principal.tenant_id, parsing.body(gateway_schemas.SourceCreate))
    return respond({"source": source_json(shown)}, 201)


@v1.get("/sources")
def list_sources():
    require_operator(g.principal)
    return respond({"sources": [source_json(s) for s in _ks().sources.all(
        g.principal.tenant_id)]})


@v1.get("/sources/<name>")
def show_source(name: str):
    require_operator(g.principal)
    return respond({"source": source_json(_ks().sources.get(g.principal.tenant_id, name))})


@v1.patch("/sources/<name>")
def change_source(name: str):
    require_operator(g.principal)
    shown = _ks().sources.change(g.principal.tenant_id, name,
                                 parsing.body(gateway_schemas.SourceChange))
    return respond({"source": source_json(shown)})


@v1.post("/sources/<name>/resume")
def resume_source(name: str):
    require_operator(g.principal)
    body = parsing.body(gateway_schemas.Resume) if request.get_data(cache=True) else \
        gateway_schemas.Resume()  # no body: every destination
    shown = _ks().sources.resume(g.principal.tenant_id, name, body.destination)
    _ks().wake()  # this process's relay at once; the others at their next sweep (1 s)
    return respond({"source": source_json(shown)})


@v1.post("/sources/<name>/pause")
def pause_source(name: str):
    require_operator(g.principal)
    body = parsing.body(gateway_schemas.Pause) if request.get_data(cache=True) else \
        gateway_schemas.Pause()  # no body: paused until resumed, no reason
    until = versions.parse(body.until)[1] if body.until is not None else None
    shown = _ks().sources.pause(g.principal.tenant_id, name, until, body.reason,
                                body.destination)
    return respond({"source": source_json(shown)})


@v1.delete("/sources/<name>")
def disable_source(name: str):
    require_operator(g.principal)
    return respond({"source": source_json(_ks().sources.disable(g.principal.tenant_id,
                                                                  name))})


def ingest_url(ingest_id: str) -> str:
    base = keystore().settings.public_url or request.host_url
    return base.rstrip("/") + "/hooks/" + ingest_id


def destination_json(view: Source, header_names: list[str], has_secret: Optional[bool]
                     ) -> dict:
    forward = view.forward
    return {"url": view.destination_url, "header_names": header_names,
            "has_secret": has_secret, "timeout_seconds": view.timeout_seconds,
            "rate": forward.get("rate"),  # its normal form, or null
            "retry_statuses": forward.get("retry_statuses", []),
            "delivered_header": forward.get("delivered_header"),
            "filter": forward.get("filter"),  # its normal form, or null
            "ordering": forward.get("ordering")}


def source_json(shown: Shown) -> dict:
    s, q = shown.source, shown.queue
    options = s.options
    return {
        "name": s.name, "provider": s.provider, "state": s.state,
        "health": shown.health,  # "broken": no configured key opens its secrets
        "ingest_url": ingest_url(shown.ingest_id) if shown.ingest_id is not None else None,
        "destination": destination_json(s, shown.header_names, shown.has_destination_secret),
        "destinations": [destination_json(t.view, t.header_names, t.has_secret) | {
            "name": t.view.destination_name, "max_in_flight": t.view.max_in_flight,
            "health": t.health, "paused_until": rfc3339(t.view.paused_until),
            "paused": paused_json(t.paused),
            "last_error": t.view.last_error, "last_error_at": rfc3339(t.view.last_error_at)}
            for t in shown.destinations],
        "signature": options.get("signature"), "event_id": options.get("event_id"),
        "event_type": options.get("event_type"),
        "secrets": shown.secret_count, "ttl_seconds": s.ttl_seconds,
        "retry_window_seconds": s.retry_window_seconds, "max_in_flight": s.max_in_flight,
        "keep_body_seconds": s.keep_body_seconds, "max_pause_seconds": s.max_pause_seconds,
        "alert_after_seconds": s.alert_after_seconds,
        "backlog_alert_seconds": s.backlog_alert_seconds,
        "created_at": rfc3339(s.created_at),
        "updated_at": rfc3339(s.updated_at), "paused_until": rfc3339(s.paused_until),
        "last_error": s.last_error, "last_error_at": rfc3339(s.last_error_at),
        "paused": paused_json(shown.paused),
        "queue": {"queued": q.queued, "delivering": q.delivering, "held": q.held,
                  "failed": q.failed, "oldest_queued_at": rfc3339(q.oldest_queued_at),
                  "next_attempt_at": rfc3339(q.next_attempt_at)},
    }


def paused_json(paused: Optional[Paused]) -> Optional[dict]:
    if paused is None:
        return None
    return {"by": paused.by, "until": rfc3339(paused.until), "reason": paused.reason}


# --- deliveries ---------------------------------------------------------------------------

@v1.get("/deliveries")
def list_deliveries():
    require_operator(g.principal)
    q = parsing.validate(gateway_schemas.DeliveriesQuery, request.args.to_dict())
    page, cursor = _ks().deliveries.list(g.principal.tenant_id, q.source, q.state, q.event_id,
                                         q.limit, q.cursor, q.event_type, q.destination)
    return respond({"deliveries": [delivery_json(d) for d in page], "next_cursor": cursor})


@v1.post("/deliveries/redeliver")
def redeliver():
    require_operator(g.principal)
    body = parsing.body(gateway_schemas.Redeliver)
    done = _ks().deliveries.redeliver(g.principal.tenant_id, body.source, body.event_id,
                                      body.force, body.destination)
    return respond({"delivery": delivery_json(done)}, 202)


@v1.post("/deliveries/retry")
def retry_now():
    require_operator(g.principal)
    body = parsing.body(gateway_schemas.Retry)
    due = _ks().deliveries.retry(g.principal.tenant_id, body.source, body.event_id,
                                 body.destination)
    return respond({"due": due}, 202)


def delivery_json(d: Delivery) -> dict:
    e = d.event
    return {"source": d.source, "event_id": e.event_id, "state": e.state,
            "received_at": rfc3339(e.received_at), "event_type": e.event_type,
            "next_attempt_at": rfc3339(e.next_attempt_at) if e.state == DeliveryState.QUEUED else None,
            "delivered_at": rfc3339(e.delivered_at),
            "attempts": [{k: v for k, v in {"at": rfc3339(a.at), "status_code": a.status_code,
                                            "error": a.error, "duration_ms": a.duration_ms
                                            }.items() if v is not None or k == "duration_ms"}
                         for a in d.attempts],
            "attempt_count": e.attempts, "body_kept": e.body is not None,
            "waiting_on": d.waiting_on, "destination": d.destination}
