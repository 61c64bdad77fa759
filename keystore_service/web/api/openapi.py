"""/openapi.json, generated from the pydantic models in schemas.py (so it cannot drift)."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from keystore_service.web.api import (
    bulk_openapi,
    connection_openapi,
    connection_schemas,
    issue_schemas,
    issues_openapi,
    schemas,
    send_openapi,
    send_schemas,
    source_schemas,
)
from keystore_service.web.api import gateway_answers as ha
from keystore_service.web.api import gateway_schemas as hs

REF = "#/components/schemas/{model}"
_ERRORS = {"400": "invalid_request", "401": "unauthorized",
           "403": "forbidden (an operator call with a client token; a hook: scope)",
           "404": "not_found or expired", "413": "payload_too_large", "429": "rate_limited",
           "503": "unavailable"}
_EXPIRES = {"Idempotency-Expires": {"description": "IMF-fixdate of the record's expires_at",
                                    "schema": {"type": "string"}}}


def _json(model: type[BaseModel], description: str, headers: dict | None = None) -> dict:
    out: dict[str, Any] = {"description": description, "content": {"application/json": {
        "schema": {"$ref": REF.format(model=model.__name__)}}}}
    if headers:
        out["headers"] = headers
    return out


def _errors(*codes: str) -> dict:
    return {c: _json(schemas.ErrorResponse, _ERRORS[c]) for c in codes}


def _record_call(request: type[BaseModel], summary: str, *extra: tuple[str, str]) -> dict:
    responses = {"200": _json(schemas.RecordResponse, "the record", _EXPIRES),
                 **_errors("400", "401", "403", "404", "413", "429", "503")}
    for status, description in extra:
        responses[status] = _json(schemas.ErrorResponse, description, _EXPIRES)
    return {"post": {"summary": summary, "requestBody": {"required": True, "content": {
        "application/json": {"schema": {"$ref": REF.format(model=request.__name__)}}}},
        "responses": responses}}


def _claim() -> dict:
    claim = lambda d, h=None: _json(schemas.ClaimResponse, d, {**_EXPIRES, **(h or {})})
    retry = {"Retry-After": {"description": "seconds until the lease runs out",
                             "schema": {"type": "string"}}}
    return {"post": {
        "summary": "Claim (tenant, scope, key) before the side effect",
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": {"$ref": REF.format(model="ClaimRequest")}}}},
        "responses": {
            "201": claim("acquired: go and do the side effect"),
            "200": claim("replay: the stored result", {"Idempotent-Replayed": {
                "description": "true", "schema": {"type": "string"}}}),
            "409": claim("in_progress (with Retry-After) or needs_reconciliation", retry),
            "422": claim("fingerprint_mismatch: refused, not overwritten"),
            **_errors("400", "401", "403", "413", "429", "503")}}}


def _batch() -> dict:
    return {"post": {
        "summary": "Claim up to 1,000 keys of one scope in one transaction (polling overlap)",
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": {"$ref": REF.format(model="BatchClaimRequest")}}}},
        "responses": {"200": _json(schemas.BatchClaimResponse,
                                   "one result per item, in request order"),
                      **_errors("400", "401", "403", "413", "429", "503")}}}


def _query(model: type[BaseModel]) -> list[dict]:
    """Query parameters from a query model, with the same constraints it validates."""
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    params = []
    for name, prop in schema["properties"].items():
        prop = {k: v for k, v in prop.items() if k not in ("title", "default")}
        if "anyOf" in prop:  # Optional[X]: a query parameter is absent rather than null
            prop = next(p for p in prop["anyOf"] if p.get("type") != "null")
        params.append({"name": name, "in": "query", "required": name in required,
                       "schema": prop})
    return params


def _lookup() -> dict:
    return {"get": {"summary": "The record; with wait, until an in-progress one changes",
                    "parameters": _query(schemas.LookupQuery),
                    "responses": {"200": _json(schemas.RecordResponse, "the record", _EXPIRES),
                                  **_errors("400", "401", "404", "429", "503")}}}


def _operator_get(summary: str, model: type[BaseModel], query: type[BaseModel]) -> dict:
    return {"get": {"summary": summary, "parameters": _query(query),
                    "responses": {"200": _json(model, "ok"),
                                  **_errors("400", "401", "403", "429", "503")}}}


def _resolve() -> dict:
    responses = {"200": _json(schemas.ResolveResponse, "the record, and the reviews closed",
                              _EXPIRES),
                 **_errors("400", "401", "403", "404", "413", "429", "503"),
                 "409": _json(schemas.ErrorResponse, "already_completed", _EXPIRES)}
    return {"post": {"summary": "Resolve a record as a person decided (operator)",
                     "requestBody": {"required": True, "content": {"application/json": {
                         "schema": {"$ref": REF.format(model="ResolveRequest")}}}},
                     "responses": responses}}


def _plain(summary: str) -> dict:
    return {"get": {"summary": summary, "security": [],
                    "responses": {"200": _json(schemas.Health, "ok"),
                                  "503": _json(schemas.ErrorResponse, "unavailable")}}}


def document() -> dict:
    models = [*GATEWAY_MODELS, *issue_schemas.MODELS, *bulk_openapi.MODELS,
              *connection_schemas.MODELS, *send_schemas.MODELS,
              schemas.ClaimRequest, schemas.BatchClaimRequest, schemas.BatchClaimResponse,
              schemas.ResolveRequest, schemas.ResolveResponse, schemas.ReviewsResponse,
              schemas.ReportResponse, schemas.CompleteRequest, schemas.ReleaseRequest,
              schemas.ExtendRequest, schemas.ExpireRequest, schemas.ClaimResponse,
              schemas.RecordResponse, schemas.ErrorResponse, schemas.Health, schemas.WhoAmI]
    _, defs = models_json_schema([(m, "validation" if m.__name__.endswith("Request")
                                   else "serialization") for m in models], ref_template=REF)
    paths = {
        "/v1/claim": _claim(),
        "/v1/claim/batch": _batch(),
        "/v1/complete": _record_call(schemas.CompleteRequest, "Complete the attempt",
                                     ("409", "lease_lost or already_completed")),
        "/v1/release": _record_call(schemas.ReleaseRequest, "Give the attempt back",
                                    ("409", "lease_lost or already_completed")),
        "/v1/extend": _record_call(schemas.ExtendRequest, "Heartbeat and checkpoint",
                                   ("409", "lease_lost or already_completed")),
        "/v1/expire": _record_call(schemas.ExpireRequest, "End the window now (operator)",
                                   ("409", "in_progress: a lease is live")),
        "/v1/keys": _lookup(),
        "/v1/reviews": _operator_get("What needs a person, oldest first (operator)",
                                     schemas.ReviewsResponse, schemas.ReviewsQuery),
        "/v1/resolve": _resolve(),
        "/v1/report": _operator_get("The daily reconciliation report, per scope (operator)",
                                    schemas.ReportResponse, schemas.ReportQuery),
        "/v1/whoami": {"get": {"summary": "The token's tenant, role and name (credential tests)",
                               "responses": {"200": _json(schemas.WhoAmI, "ok"),
                                             **_errors("401", "429", "503")}}},
        **_gateway(),
        **issues_openapi.paths(_json, _errors, _body_of, _query),
        **bulk_openapi.paths(_json, _errors, _body_of),
        **connection_openapi.paths(_json, _errors, _body_of),
        **send_openapi.paths(_json, _errors, _body_of),
        "/healthz": _plain("The process is alive"),
        "/readyz": _plain("The database answers"),
    }
    _name_and_link(paths)
    components = defs.get("$defs", {})
    source_schemas.per_provider(components)
    return {"openapi": "3.1.0",
            "info": {"title": "Idempotency Key Store", "version": "1"},
            "paths": paths,
            "components": {"schemas": components,
                           "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
            "security": [{"bearer": []}]}


GATEWAY_MODELS = [hs.SourceCreate, hs.SourceChange, ha.SourceResponse, ha.SourcesResponse,
                  hs.Redeliver, ha.DeliveriesResponse, ha.DeliveryResponse, ha.IngestAnswer,
                  hs.Pause, hs.Resume, hs.Retry, ha.RetryAnswer]


def _body_of(model: type[BaseModel]) -> dict:
    return {"required": True, "content": {"application/json": {
        "schema": {"$ref": REF.format(model=model.__name__)}}}}


def _gateway() -> dict:
    """The inbound webhook gateway: sources and deliveries (operator), and the ingest URL."""
    op = _errors("400", "401", "403", "429", "503")
    return {**_sources(op), **_deliveries(op)}


def _sources(op: dict) -> dict:
    name = [{"name": "name", "in": "path", "required": True,
             "schema": {"type": "string", "pattern": "^[a-z0-9_-]{1,64}$"}}]
    one = {"200": _json(ha.SourceResponse, "the source (never its secrets)"), **op,
           "404": _json(schemas.ErrorResponse, "no such source")}
    return {
        "/v1/sources": {
            "post": {"summary": "Create a webhook source (operator)",
                     "requestBody": _body_of(hs.SourceCreate),
                     "responses": {"201": _json(ha.SourceResponse, "created, with its "
                                                "ingest_url"), **op, **_errors("413")}},
            "get": {"summary": "The tenant's webhook sources (operator)",
                    "responses": {"200": _json(ha.SourcesResponse, "ok"), **op}}},
        "/v1/sources/{name}": {
            "get": {"summary": "One source", "parameters": name, "responses": one},
            "patch": {"summary": "Change a source (rotate secrets, move the destination)",
                      "parameters": name, "requestBody": _body_of(hs.SourceChange),
                      "responses": {**one, **_errors("413")}},
            "delete": {"summary": "Disable a source: its ingest URL answers 404",
                       "parameters": name, "responses": one}},
        "/v1/sources/{name}/resume": {"post": {
            "summary": "End the source's pauses, an operator's and a destination's "
                       "Retry-After, or with a destination only that one's: its waiting "
                       "events are due at once (operator)",
            "parameters": name, "requestBody": {**_body_of(hs.Resume), "required": False},
            "responses": {**one, **_errors("413")}}},
        "/v1/sources/{name}/pause": {"post": {
            "summary": "Pause the source's forwarding (operator): events are still accepted, "
                       "none is forwarded, none fails; resume ends it",
            "parameters": name, "requestBody": {**_body_of(hs.Pause), "required": False},
            "responses": {**one, **_errors("413")}}},
    }


def _deliveries(op: dict) -> dict:
    return {
        "/v1/deliveries/retry": {"post": {
            "summary": "Retry now: a queued event, or every queued event of a source, is due "
                       "at once whatever its backoff (operator)",
            "requestBody": _body_of(hs.Retry),
            "responses": {"202": _json(ha.RetryAnswer, "due now"), **op, **_errors("413"),
                          "404": _json(schemas.ErrorResponse, "no such source or event"),
                          "409": _json(schemas.ErrorResponse, "the event is not queued: "
                                       "in_progress or already_completed, with its state")}}},
        "/v1/deliveries": {"get": {
            "summary": "Deliveries of the tenant's sources, newest first (operator)",
            "parameters": _query(hs.DeliveriesQuery),
            "responses": {"200": _json(ha.DeliveriesResponse, "ok"), **op}}},
        "/v1/deliveries/redeliver": {"post": {
            "summary": "Forward an event again under the same identity (operator)",
            "requestBody": _body_of(hs.Redeliver),
            "responses": {"202": _json(ha.DeliveryResponse, "queued again"), **op,
                          **_errors("413"),
                          "404": _json(schemas.ErrorResponse, "no such source or event"),
                          "409": _json(schemas.ErrorResponse, "in_progress, "
                                       "already_completed or body_dropped")}}},
        "/hooks/{ingest_id}": {"post": {
            "summary": "A provider's webhook (no bearer token: its signature is the "
                       "credential)", "security": [],
            "parameters": [{"name": "ingest_id", "in": "path", "required": True,
                            "schema": {"type": "string", "maxLength": 128}}],
            "requestBody": {"required": False, "content": {"*/*": {"schema": {}}}},
            "responses": {"202": _json(ha.IngestAnswer, "accepted (committed)"),
                          "200": _json(ha.IngestAnswer, "duplicate or held"),
                          "400": _json(schemas.ErrorResponse, "no event id"),
                          "401": _json(schemas.ErrorResponse, "invalid_signature"),
                          "404": _json(schemas.ErrorResponse, "no such source"),
                          **_errors("413", "429", "503")}}},
    }


OPERATION_IDS = {("/v1/claim", "post"): "claim", ("/v1/claim/batch", "post"): "claimBatch",
                 ("/v1/complete", "post"): "complete", ("/v1/release", "post"): "release",
                 ("/v1/extend", "post"): "extend", ("/v1/expire", "post"): "expire",
                 ("/v1/keys", "get"): "lookup", ("/v1/reviews", "get"): "listReviews",
                 ("/v1/resolve", "post"): "resolve", ("/v1/report", "get"): "report",
                 ("/v1/whoami", "get"): "whoami", ("/healthz", "get"): "healthz",
                 ("/v1/sources", "post"): "createSource", ("/v1/sources", "get"): "listSources",
                 ("/v1/sources/{name}", "get"): "showSource",
                 ("/v1/sources/{name}", "patch"): "changeSource",
                 ("/v1/sources/{name}", "delete"): "disableSource",
                 ("/v1/sources/{name}/resume", "post"): "resumeSource",
                 ("/v1/sources/{name}/pause", "post"): "pauseSource",
                 ("/v1/deliveries/retry", "post"): "retryNow",
                 ("/v1/deliveries", "get"): "listDeliveries",
                 ("/v1/deliveries/redeliver", "post"): "redeliver",
                 ("/hooks/{ingest_id}", "post"): "ingest",
                 ("/readyz", "get"): "readyz"}
_SAME_RECORD = {"scope": "$request.body#/scope", "key": "$request.body#/key"}
_HOLDER = {**_SAME_RECORD, "lease_token": "$response.body#/lease_token"}
_LOOKUP = {"query.scope": "$request.body#/scope", "query.key": "$request.body#/key"}


def _name_and_link(paths: dict) -> None:
    """operationIds, and OpenAPI links from a claim's answers to what a client does next
    with the same record (its lease token, for the holder's calls): a stateful fuzzer
    follows them to reach complete / release / extend with tokens the service really gave
    out, not only with made-up ones that answer 409 (tests/fuzz)."""
    for (path, method), name in OPERATION_IDS.items():
        paths[path][method]["operationId"] = name
    links = {
        "201": {"complete": {"operationId": "complete", "requestBody": _HOLDER},
                "release": {"operationId": "release", "requestBody": _HOLDER},
                "extend": {"operationId": "extend", "requestBody": _HOLDER},
                "lookup": {"operationId": "lookup", "parameters": _LOOKUP}},
        "200": {"lookup": {"operationId": "lookup", "parameters": _LOOKUP},
                "expire": {"operationId": "expire", "requestBody": _SAME_RECORD}},
        "409": {"lookup": {"operationId": "lookup", "parameters": _LOOKUP},
                "resolve": {"operationId": "resolve", "requestBody": _SAME_RECORD}},
        "422": {"resolve": {"operationId": "resolve", "requestBody": _SAME_RECORD}},
    }
    for status, found in links.items():
        paths["/v1/claim"]["post"]["responses"][status]["links"] = found
