"""POST /v1/send (issue 28): parse, call the gateway's Sending, render. A client's call (any
token of the tenant); the table of answers is gateway/sending.py's."""
from __future__ import annotations

from contextlib import nullcontext

from flask import Blueprint, g

from keystore_service import errors
from keystore_service.gateway.sending import SendAnswer, SendRequest
from keystore_service.web.api import parsing
from keystore_service.web.api.render import record_json, respond
from keystore_service.web.api.send_schemas import SendRequest as SendBody
from keystore_service.web.context import keystore

v1 = Blueprint("send_v1", __name__, url_prefix="/v1")


def send_request(body: SendBody) -> SendRequest:
    r = body.request
    return SendRequest(
        scope=body.scope, key=body.key, connection=body.connection, method=r.method,
        path=r.path, headers=dict(r.headers), json_body=r.json_body,
        has_json="json_body" in r.model_fields_set, body_base64=r.body_base64,
        payload=body.payload, has_payload=body.payload is not None,
        fingerprint=body.fingerprint, resource_id_pointer=body.resource_id_pointer,
        wait_seconds=body.wait_seconds)


@v1.post("/send")
def send():
    body = parsing.body(SendBody)
    ks = keystore()
    req = send_request(body)
    wait = req.wait_seconds
    try:  # waiting takes a seat (service/waiting.py); without one, the answer comes at once
        with ks.waits.seat(g.principal.token_id) if wait else nullcontext(False) as seated:
            got = ks.gateway.sending.send(g.principal.tenant_id, req, wait if seated else 0)
    except errors.KeystoreError as exc:
        if exc.outcome:
            ks.metrics.claim(body.scope, exc.outcome)
        raise
    ks.metrics.claim(body.scope, "replay" if got.replayed else "acquired")
    return _answer(got)


def _answer(got: SendAnswer):
    record = got.record
    out: dict = {"outcome": got.outcome}
    if got.outcome != "accepted":
        out["result"] = got.result
    out["record"] = record_json(record, keystore().service.open_review)
    headers = {"Idempotent-Replayed": "true"} if got.replayed else None
    return respond(out, got.status, record, headers)
