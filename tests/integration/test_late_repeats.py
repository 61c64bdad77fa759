"""Contract v1.1 late repeats, on both backends: a finished key that comes back after its
window with its old fingerprint is detected (the seeds: "verify that ... reconciliation
detect an unsafe repeat"), whether the sweeper purged the record (its trace) or not yet."""
from __future__ import annotations

import pytest
from sqlalchemy import func, select

from keystore_service.storage.tables import late_repeats, late_traces
from tests.support import SECOND

REF = {"scope": "invoice", "key": "evt-1"}
TTL = 3600
WINDOW = 90 * 86_400  # the default late_repeat_window_seconds


def first_run(http, payload=None, resource="INV-1"):
    status, claimed, _ = http.post("/v1/claim", {**REF, "payload": payload or {"n": 1},
                                                 "ttl_seconds": TTL})
    assert status == 201
    http.post("/v1/complete", {**REF, "lease_token": claimed["lease_token"],
                               "state": "succeeded", "result": {"resource_id": resource}})
    return claimed["record"]


def rows(app, table) -> int:
    with app.extensions["keystore"].database.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar()


@pytest.mark.parametrize("swept", [True, False])
def test_at_exactly_the_expiry_instant_a_late_repeat_is_acquired_and_marked(app, http, clock,
                                                                           swept):
    first = first_run(http)
    clock.advance(TTL)  # exactly at expires_at: expired, counts as absent
    if swept:
        app.extensions["keystore"].jobs.sweep()
        assert rows(app, late_traces) == 1
    status, body, _ = http.post("/v1/claim", {**REF, "payload": {"n": 1}})
    assert status == 201 and body["outcome"] == "acquired" and body["attempt"] == 1
    assert body["late_repeat"] == {"first_seen_at": first["first_seen_at"],
                                   "expired_at": first["expires_at"], "resource_id": "INV-1"}
    assert rows(app, late_repeats) == 1


def test_a_different_payload_after_expiry_is_a_legitimate_reissue(app, http, clock):
    first_run(http)
    clock.advance(TTL)
    app.extensions["keystore"].jobs.sweep()
    status, body, _ = http.post("/v1/claim", {**REF, "payload": {"n": 2}})
    assert status == 201 and "late_repeat" not in body
    assert rows(app, late_repeats) == 0


def test_after_the_traces_own_window_it_is_not_a_late_repeat(app, http, clock):
    first_run(http)
    clock.advance(TTL)
    app.extensions["keystore"].jobs.sweep()
    clock.advance(WINDOW - 1e-6)  # one microsecond before the trace's window ends
    assert "late_repeat" in http.post("/v1/claim", {**REF, "payload": {"n": 1}})[1]
    clock.advance(TTL + 1)
    app.extensions["keystore"].jobs.sweep()  # the new record goes; its trace replaces the old
    clock.advance(WINDOW)  # now past the newer trace's window too
    app.extensions["keystore"].jobs.sweep()
    assert rows(app, late_traces) == 0  # purged after their window
    status, body, _ = http.post("/v1/claim", {**REF, "payload": {"n": 1}})
    assert status == 201 and "late_repeat" not in body


def test_review_holds_it_for_a_person_and_release_lets_it_through(app, http, clock, tokens):
    first_run(http)
    clock.advance(TTL + 5)
    app.extensions["keystore"].jobs.sweep()
    status, body, _ = http.post("/v1/claim", {**REF, "payload": {"n": 1},
                                              "on_late_repeat": "review"})
    assert status == 409 and body["outcome"] == "needs_reconciliation"
    assert body["error"]["details"]["late_repeat"]["resource_id"] == "INV-1"
    assert body["record"]["review"]["kind"] == "late_repeat"
    # repeats are held too, until a person decides
    assert http.post("/v1/claim", {**REF, "payload": {"n": 1}})[0] == 409
    status, _, _ = http.post("/v1/resolve", {**REF, "action": "release"},
                             token=tokens["acme_operator"])
    assert status == 200
    status, body, _ = http.post("/v1/claim", {**REF, "payload": {"n": 1}})
    assert status == 201 and body["attempt"] == 2 and "late_repeat" not in body


def test_no_fingerprint_no_late_repeat_and_off_when_the_window_is_zero(database_url, clock):
    from keystore_service.app import create_app
    from keystore_service.settings import Settings
    from tests.conftest import TEST_KEY
    from tests.support import T0, Http
    app = create_app(Settings(database_url=database_url, secret_key=TEST_KEY,
                              late_repeat_window_seconds=0), clock)
    try:
        ks = app.extensions["keystore"]
        ks.accounts.create_tenant("acme", T0)
        http = Http(app.test_client(), ks.accounts.create_token("acme", "client", None, T0))
        first_run(http)
        clock.advance(TTL)
        ks.jobs.sweep()
        assert rows(app, late_traces) == 0
        assert "late_repeat" not in http.post("/v1/claim", {**REF, "payload": {"n": 1}})[1]
    finally:
        app.extensions["keystore"].database.engine.dispose()
    _ = SECOND


def test_the_daily_report_counts_late_repeats_beyond_the_records(app, http, clock, tokens):
    first_run(http)
    clock.advance(TTL)
    app.extensions["keystore"].jobs.sweep()
    http.post("/v1/claim", {**REF, "payload": {"n": 1}})
    import datetime as dt
    day = dt.datetime.fromtimestamp(clock.now / 1e6, dt.UTC).date().isoformat()
    status, body, _ = http.get("/v1/report", date=day, token=tokens["acme_operator"])
    assert status == 200
    (row,) = [s for s in body["scopes"] if s["scope"] == "invoice"]
    assert row["late_repeats"] == 1
