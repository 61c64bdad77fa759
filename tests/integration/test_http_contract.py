"""The HTTP layer of docs/api.md: status codes, bodies, headers, error envelopes, roles."""
from __future__ import annotations

from email.utils import parsedate_to_datetime

import jsonschema
import pytest

from keystore_service.web.api.openapi import document
from tests.support import SECOND

CLAIM = {"scope": "create_invoice", "key": "evt_881", "payload": {"amount": 1250}}
SPEC = document()


def conforms(body: dict, model: str) -> None:
    schema = {"$ref": f"#/components/schemas/{model}", "components": SPEC["components"]}
    jsonschema.validate(body, schema)


def acquire(http, **over):
    status, body, _ = http.post("/v1/claim", {**CLAIM, **over})
    assert status == 201, body
    return body


def test_acquired_is_201_with_a_lease_token_and_the_record(http, clock):
    status, body, headers = http.post("/v1/claim", CLAIM)
    assert status == 201 and body["outcome"] == "acquired" and body["attempt"] == 1
    assert body["lease_token"].startswith("lt_")
    record = body["record"]
    assert record["state"] == "in_progress" and record["fingerprint"].startswith("sha256:")
    assert record["first_seen_at"].endswith("Z") and record["review"] is None
    expires = parsedate_to_datetime(headers["Idempotency-Expires"])
    assert int(expires.timestamp()) == (clock.now + 72 * 3600 * SECOND) // SECOND
    conforms(body, "ClaimResponse")


def test_replay_is_200_with_the_header_and_the_stored_result(http):
    lease = acquire(http)["lease_token"]
    result = {"resource_id": "INV-42", "status_code": 201, "body": {"number": "42"}}
    status, body, _ = http.post("/v1/complete", {**_ref(), "lease_token": lease,
                                                  "state": "succeeded", "result": result})
    assert status == 200 and body["record"]["result"] == result
    conforms(body, "RecordResponse")
    status, body, headers = http.post("/v1/claim", CLAIM)
    assert status == 200 and body["outcome"] == "replay"
    assert headers["Idempotent-Replayed"] == "true" and "Idempotency-Expires" in headers
    assert body["record"]["result"] == result and "lease_token" not in body
    conforms(body, "ClaimResponse")


def test_mismatch_is_422_with_outcome_record_and_error(http):
    acquire(http)
    status, body, headers = http.post("/v1/claim", {**CLAIM, "payload": {"amount": 9999}})
    assert status == 422 and body["outcome"] == "fingerprint_mismatch"
    assert body["error"]["code"] == "fingerprint_mismatch" and body["record"]
    assert "Idempotency-Expires" in headers
    conforms(body, "ClaimResponse")


def test_in_progress_is_409_with_retry_after(http, clock):
    acquire(http, lease_seconds=30)
    clock.advance(10.2)
    status, body, headers = http.post("/v1/claim", CLAIM)
    assert status == 409 and body["outcome"] == "in_progress"
    assert headers["Retry-After"] == "20" and body["error"]["details"]["retry_after_seconds"] == 20
    conforms(body, "ClaimResponse")


def test_needs_reconciliation_is_409(http, clock):
    acquire(http, lease_seconds=30)
    clock.advance(30)
    status, body, _ = http.post("/v1/claim", CLAIM)
    assert status == 409 and body["outcome"] == "needs_reconciliation"
    assert body["error"]["code"] == "needs_reconciliation"
    assert body["record"]["state"] == "needs_reconciliation"


def test_release_extend_lookup_and_expire_over_http(http, tokens, clock):
    lease = acquire(http)["lease_token"]
    status, body, _ = http.post("/v1/extend", {**_ref(), "lease_token": lease,
                                                "lease_seconds": 600, "checkpoint": "created",
                                                "resource_id": "INV-42"})
    assert status == 200 and body["record"]["checkpoint"]["resource_id"] == "INV-42"
    status, body, _ = http.post("/v1/release", {**_ref(), "lease_token": lease,
                                                 "reason": "upstream 503"})
    assert status == 200 and body["record"]["state"] == "released"
    status, body, headers = http.get("/v1/keys", **_ref())
    assert status == 200 and body["record"]["state"] == "released"
    assert "Idempotency-Expires" in headers
    status, body, _ = http.post("/v1/expire", _ref())
    assert status == 403 and body["error"]["code"] == "forbidden"
    status, body, _ = http.post("/v1/expire", _ref(), token=tokens["acme_operator"])
    assert status == 200 and body["record"]["expires_at"] == _iso(clock.now)
    status, body, _ = http.get("/v1/keys", **_ref())
    assert status == 404 and body["error"]["code"] == "expired"


def test_holder_errors_are_409_and_404(http):
    status, body, _ = http.post("/v1/complete", {**_ref(), "lease_token": "lt_x",
                                                  "state": "succeeded"})
    assert status == 404 and body["error"]["code"] == "not_found"
    lease = acquire(http)["lease_token"]
    status, body, _ = http.post("/v1/complete", {**_ref(), "lease_token": "lt_x",
                                                  "state": "succeeded"})
    assert status == 409 and body["error"]["code"] == "lease_lost"
    ok = {**_ref(), "lease_token": lease, "state": "succeeded"}
    assert http.post("/v1/complete", ok)[0] == 200
    assert http.post("/v1/complete", ok)[0] == 200  # idempotent
    status, body, _ = http.post("/v1/complete", {**ok, "state": "failed"})
    assert status == 409 and body["error"]["code"] == "already_completed"
    status, body, _ = http.post("/v1/extend", {**_ref(), "lease_token": lease,
                                                "lease_seconds": 5})
    assert status == 409 and body["error"]["code"] == "already_completed"


def test_lookup_waits_for_an_in_progress_record(http, app):
    acquire(http)
    status, body, _ = http.get("/v1/keys", wait="1", **_ref())
    assert status == 200 and body["record"]["state"] == "in_progress"
    for bad in ("0", "31", "x"):
        status, body, _ = http.get("/v1/keys", wait=bad, **_ref())
        assert status == 400 and body["error"]["code"] == "invalid_request"


def test_service_endpoints_need_no_token(http):
    assert http.get("/healthz", token=None)[0] == 200
    assert http.get("/readyz", token=None)[0] == 200
    status, body, _ = http.get("/openapi.json", token=None)
    assert status == 200 and body["openapi"].startswith("3.")


def test_unknown_routes_and_methods_use_the_envelope(http):
    status, body, _ = http.get("/v1/nothing")
    assert status == 404 and body["error"]["code"] == "not_found"
    status, body, headers = http.get("/v1/claim")
    assert status == 405 and body["error"]["code"] == "method_not_allowed"
    assert "POST" in headers["Allow"]


@pytest.mark.parametrize("token", [None, "", "ks_wrong", "x" * 300])
def test_without_a_valid_token_it_is_401(http, token):
    status, body, _ = http.post("/v1/claim", CLAIM, token=token)
    assert status == 401 and body["error"]["code"] == "unauthorized"


@pytest.mark.parametrize("path", ["/v1/nothing", "/v1", "/v1/v1/claim", "/v1/claim"])
@pytest.mark.parametrize("token", [None, "ks_wrong"])
def test_the_token_is_checked_before_the_path_is_routed(http, path, token):
    """A mistyped base URL (…/v1/v1/claim) with a wrong token must not look like an
    accepted token: 401 for unknown paths and wrong methods alike (contract v1.1)."""
    status, body, _ = http.get(path, token=token)
    assert status == 401 and body["error"]["code"] == "unauthorized"


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_the_auth_scheme_is_case_insensitive(app, tokens, scheme):
    r = app.test_client().get("/v1/whoami",
                              headers={"Authorization": f"{scheme} {tokens['acme']}"})
    assert r.status_code == 200, r.get_json()


@pytest.mark.parametrize("header", ["Basic abc", "Bearer", "Bearerks_x", "Token ks_x"])
def test_other_schemes_are_401(app, tokens, header):
    r = app.test_client().get("/v1/whoami", headers={"Authorization": header})
    assert r.status_code == 401


def test_whoami_names_the_tenant_role_and_token(http, tokens):
    status, body, _ = http.get("/v1/whoami")
    assert status == 200 and body == {"tenant": "acme", "role": "client", "token": "client-1"}
    conforms(body, "WhoAmI")
    status, body, _ = http.get("/v1/whoami", token=tokens["acme_operator"])
    assert body == {"tenant": "acme", "role": "operator", "token": "operator-1"}
    status, body, _ = http.get("/v1/whoami", token=tokens["globex"])
    assert body["tenant"] == "globex"


def test_a_revoked_token_stops_working(app, tokens):
    from keystore_service.app import create_app
    from keystore_service.settings import Settings
    ks = app.extensions["keystore"]
    ks.accounts.revoke_token("acme", "client-1", 0)
    fresh = create_app(Settings(database_url=str(ks.settings.database_url)))
    r = fresh.test_client().post("/v1/claim", json=CLAIM,
                                 headers={"Authorization": f"Bearer {tokens['acme']}"})
    assert r.status_code == 401
    fresh.extensions["keystore"].database.engine.dispose()


def _ref():
    return {"scope": CLAIM["scope"], "key": CLAIM["key"]}


def _iso(us: int) -> str:
    from keystore_service.web.api.render import rfc3339
    return rfc3339(us)


def test_readyz_is_503_when_the_database_does_not_answer():
    from keystore_service.app import create_app
    from keystore_service.settings import Settings
    app = create_app(Settings(database_url="postgresql://nobody@127.0.0.1:1/none"))
    r = app.test_client().get("/readyz")
    assert r.status_code == 503 and r.get_json()["error"]["code"] == "unavailable"
    assert r.headers["Retry-After"] == "1"
    r = app.test_client().post("/v1/claim", json={"scope": "s", "key": "k"},
                               headers={"Authorization": "Bearer ks_x"})
    assert r.status_code == 503  # the token cannot be checked: unavailable, not 401


def test_the_bench_noop_endpoint_exists_only_behind_its_flag(database_url):
    from keystore_service.app import create_app
    from keystore_service.settings import Settings
    off = create_app(Settings(database_url=database_url))
    assert off.test_client().post("/bench/noop", json={"a": 1}).status_code == 404
    on = create_app(Settings(database_url=database_url, bench_noop=True))
    r = on.test_client().post("/bench/noop", json={"a": 1, "b": 2})
    assert r.status_code == 200 and r.get_json() == {"ok": True, "fields": 2}
    for app in (off, on):
        app.extensions["keystore"].database.engine.dispose()
