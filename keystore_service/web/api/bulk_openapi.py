"""/openapi.json's entries for the bulk actions (openapi.py adds them), from the models of
bulk_schemas.py."""
from __future__ import annotations

from collections.abc import Callable

from keystore_service.web.api import bulk_schemas as bs
from keystore_service.web.api import schemas

REF = "#/components/schemas/{model}"
MODELS = [bs.BulkRequest, bs.MatchedResponse, bs.JobResponse]


def paths(json_: Callable, errors_: Callable, body_of: Callable) -> dict:
    op = errors_("400", "401", "403", "429", "503")
    job_id = [{"name": "id", "in": "path", "required": True,
               "schema": {"type": "integer", "minimum": 1, "maximum": 2 ** 63 - 1}}]
    missing = {"404": json_(schemas.ErrorResponse, "no such job")}
    key = [{"name": "Idempotency-Key", "in": "header", "required": False,
            "schema": {"type": "string", "pattern": bs.KEY_PATTERN}}]
    return {
        "/v1/deliveries/bulk": {"post": {
            "summary": "Redeliver, retry or dismiss every event a filter matches: a dry run "
                       "counts, otherwise a job over the set fixed when it starts (operator)",
            "operationId": "bulkDeliveries", "parameters": key,
            "requestBody": body_of(bs.BulkRequest),
            "responses": {"200": {"description": "dry_run: how many match; or the job of an "
                                                 "Idempotency-Key seen before",
                                  "content": {"application/json": {"schema": {"oneOf": [
                                      {"$ref": REF.format(model=m.__name__)}
                                      for m in (bs.MatchedResponse, bs.JobResponse)]}}}},
                          "202": json_(bs.JobResponse, "the job, started"), **op,
                          **errors_("413"),
                          "422": json_(schemas.ErrorResponse, "fingerprint_mismatch: the "
                                       "Idempotency-Key was used for another request")}}},
        "/v1/jobs/{id}": {"get": {
            "summary": "A bulk job and its progress (operator)", "operationId": "showJob",
            "parameters": job_id,
            "responses": {"200": json_(bs.JobResponse, "the job"), **op, **missing}}},
        "/v1/jobs/{id}/cancel": {"post": {
            "summary": "Stop a running bulk job before its next event (operator)",
            "operationId": "cancelJob", "parameters": job_id,
            "responses": {"200": json_(bs.JobResponse, "the job"), **op, **missing,
                          "409": json_(schemas.ErrorResponse,
                                       "already_completed: it ended already")}}},
    }
