"""The reconciler, the sweeper, the daily report and /metrics, on both backends."""
from __future__ import annotations

import datetime as dt
import json
import threading
from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from keystore_service import errors
from keystore_service.app import create_app
from keystore_service.service.claims import Claim, system_clock
from keystore_service.settings import Settings
from keystore_service.storage.tables import attempts, records, reviews
from tests.support import SECOND, T0, FakeClock, Http, keystore_cli


def claim(ks, tenant_id, key, on_stale="reconcile", ttl=3600, lease=60, fp="fp", scope="s"):
    return ks.service.claim(tenant_id, Claim(scope, key, fp, ttl, lease, on_stale))


def count(ks, table, *where):
    with ks.database.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table).where(*where)).scalar()


def test_the_reconciler_moves_stale_leases_and_opens_reviews(ks, tenant_id, clock):
    held = {k: claim(ks, tenant_id, k, on_stale=p) for k, p in
            (("r1", "reconcile"), ("r2", "reconcile"), ("t1", "retry"))}
    claim(ks, tenant_id, "live", lease=600)
    claim(ks, tenant_id, "gone", ttl=30, lease=10)  # stale but expired: counts as absent
    clock.advance(60)
    done = ks.jobs.reconcile(batch=2)
    assert done == Counter({"needs_reconciliation": 2})
    assert ks.service.lookup(tenant_id, "s", "r1").state == "needs_reconciliation"
    # a `retry` lease is left to the next claim: its holder's token still works until then
    t1 = ks.service.lookup(tenant_id, "s", "t1")
    assert t1.state == "in_progress" and t1.lease_expires_at <= clock.now
    assert ks.service.lookup(tenant_id, "s", "live").state == "in_progress"
    assert count(ks, reviews, reviews.c.kind == "stale_lease", reviews.c.state == "open") == 2
    assert ks.jobs.reconcile() == Counter()  # handled once
    # the holder can still settle; the stale retry lease is taken by the next claim
    ks.service.complete(tenant_id, "s", "r1", held["r1"].lease_token, "succeeded", "{}")
    assert claim(ks, tenant_id, "t1", on_stale="retry").record.attempt == 2


def test_a_late_completion_under_retry_survives_the_reconciler(ks, tenant_id, clock):
    """Issue 13, item 2: claim with a 1 s lease under `retry`, the reconciler runs after the
    lease ran out, then the holder completes: accepted, and the next claim is a replay (the
    effect is not done twice)."""
    held = claim(ks, tenant_id, "slow", on_stale="retry", lease=1)
    clock.advance(1.3)
    ks.jobs.reconcile()
    done = ks.service.complete(tenant_id, "s", "slow", held.lease_token, "succeeded",
                               '{"resource_id":"INV-1"}', "INV-1")
    assert done.state == "succeeded" and done.attempt == 1
    again = claim(ks, tenant_id, "slow", on_stale="retry")
    assert again.outcome.value == "replay" and again.record.attempt == 1


def test_the_sweeper_purges_expired_records_in_batches(ks, tenant_id, clock):
    for n in range(25):
        c = claim(ks, tenant_id, f"done-{n}", ttl=10)
        ks.service.complete(tenant_id, "s", f"done-{n}", c.lease_token, "succeeded", "{}")
    claim(ks, tenant_id, "held", ttl=10, lease=600)  # a live lease outlives its expiry
    kept = claim(ks, tenant_id, "disputed", ttl=10)
    ks.service.complete(tenant_id, "s", "disputed", kept.lease_token, "succeeded", "{}")
    claim(ks, tenant_id, "young", ttl=3600)
    with pytest.raises(errors.FingerprintMismatch) as refused:
        claim(ks, tenant_id, "disputed", fp="other")
    assert refused.value.record.key == "disputed"  # the review it opened: the record waits
    clock.advance(10)
    progress = []
    assert ks.jobs.sweep(batch=10, progress=progress.append) == 25
    assert progress == [10, 20, 25]
    left = {r.key for r in _all(ks)}
    assert left == {"held", "disputed", "young"}
    assert count(ks, attempts) == 1  # cascaded with their records; "disputed"'s remains
    assert count(ks, reviews, reviews.c.record_id.is_(None)) == 0
    clock.advance(31 * 86_400)  # past the 30 days an unresolved record waits for a person
    assert ks.jobs.sweep() == 3
    assert _all(ks) == []
    # the review outlives its record, closed as purged (no orphan left open forever)
    assert count(ks, reviews, reviews.c.record_id.is_(None), reviews.c.state == "resolved",
                 reviews.c.resolution == "purged") == 1
    assert count(ks, reviews, reviews.c.state == "open") == 0


def _all(ks):
    with ks.database.engine.connect() as conn:
        return conn.execute(select(records)).all()


def test_job_locks_let_one_holder_at_a_time(ks, clock):
    assert ks.jobs.try_lock("reconcile", 30, holder="a")
    assert not ks.jobs.try_lock("reconcile", 30, holder="b")
    assert ks.jobs.try_lock("reconcile", 30, holder="a")  # renewed by its holder
    clock.advance(30)
    assert ks.jobs.try_lock("reconcile", 30, holder="b")


def test_the_daily_report(ks, tenant_id, clock):
    today = dt.datetime.fromtimestamp(T0 / SECOND, dt.UTC).date()
    a = claim(ks, tenant_id, "a", scope="invoice")
    ks.service.complete(tenant_id, "invoice", "a", a.lease_token, "succeeded", "{}", "INV-1")
    b = claim(ks, tenant_id, "b", scope="invoice")
    ks.service.complete(tenant_id, "invoice", "b", b.lease_token, "succeeded", "{}", "INV-1")
    c = claim(ks, tenant_id, "c", scope="invoice")
    ks.service.release(tenant_id, "invoice", "c", c.lease_token, "503 upstream")
    claim(ks, tenant_id, "c", scope="invoice")  # attempt 2, still running
    for _ in range(3):
        claim(ks, tenant_id, "a", scope="invoice")  # replays
    for fp in ("x", "y"):
        with pytest.raises(errors.FingerprintMismatch) as refused:
            claim(ks, tenant_id, "a", scope="invoice", fp=fp)
        assert (refused.value.record.key, refused.value.record.state) == ("a", "succeeded")
    d = claim(ks, tenant_id, "d", scope="mail")
    ks.service.complete(tenant_id, "mail", "d", d.lease_token, "failed", "{}")
    body = ks.reports.daily(tenant_id, today, clock.now)
    invoice = next(s for s in body["scopes"] if s["scope"] == "invoice")
    assert {k: invoice[k] for k in ("claimed", "succeeded", "failed", "released",
                                    "in_progress", "waiting_for_review",
                                    "duplicates_suppressed", "mismatches")} == {
        "claimed": 4, "succeeded": 2, "failed": 0, "released": 1, "in_progress": 1,
        "waiting_for_review": 1, "duplicates_suppressed": 3, "mismatches": 2}
    assert invoice["shared_resource_ids"] == [{"resource_id": "INV-1", "keys": ["a", "b"]}]
    mail = next(s for s in body["scopes"] if s["scope"] == "mail")
    assert (mail["claimed"], mail["failed"], mail["shared_resource_ids"]) == (1, 1, [])
    yesterday = ks.reports.daily(tenant_id, today - dt.timedelta(days=1), clock.now)
    assert all(s["claimed"] == 0 for s in yesterday["scopes"])


def test_metrics_move_by_the_expected_amounts(app, http, tokens):
    def scrape():
        text = http.client.get("/metrics").get_data(as_text=True)
        found = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                found[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return found
    before = scrape()
    lease = http.post("/v1/claim", {"scope": "m", "key": "k", "payload": 1})[1]["lease_token"]
    http.post("/v1/claim", {"scope": "m", "key": "k", "payload": 1})  # in progress
    http.post("/v1/complete", {"scope": "m", "key": "k", "lease_token": lease,
                               "state": "succeeded"})
    for _ in range(2):
        http.post("/v1/claim", {"scope": "m", "key": "k", "payload": 1})  # replays
    http.post("/v1/claim", {"scope": "m", "key": "k", "payload": 2})  # mismatch
    after = scrape()
    delta = lambda name, **labels: after.get((name, tuple(sorted(labels.items()))), 0) - \
        before.get((name, tuple(sorted(labels.items()))), 0)
    assert delta("keystore_claims_total", scope="m", outcome="acquired") == 1
    assert delta("keystore_claims_total", scope="m", outcome="replay") == 2
    assert delta("keystore_claims_total", scope="m", outcome="in_progress") == 1
    assert delta("keystore_claims_total", scope="m", outcome="fingerprint_mismatch") == 1
    assert delta("keystore_duplicates_suppressed_total", scope="m") == 3
    assert delta("keystore_fingerprint_mismatches_total", scope="m") == 1
    assert after[("keystore_open_reviews", (("kind", "fingerprint_mismatch"),))] == 1
    assert after[("keystore_open_reviews_by_age", (("age", "lt_1h"),
                                                   ("kind", "fingerprint_mismatch")))] == 1
    assert delta("keystore_request_duration_seconds_count", endpoint="/v1/claim") == 5

    # A batch counts every item by its outcome (summed per outcome, once per batch).
    before = scrape()
    http.post("/v1/claim/batch", {"scope": "mb", "items": [
        {"key": "a", "payload": 1}, {"key": "b", "payload": 1}, {"key": "a", "payload": 1},
        {"key": "a", "payload": 2}, {"key": "c", "payload": 1}]})
    after = scrape()
    assert delta("keystore_claims_total", scope="mb", outcome="acquired") == 3
    assert delta("keystore_claims_total", scope="mb", outcome="in_progress") == 1
    assert delta("keystore_claims_total", scope="mb", outcome="fingerprint_mismatch") == 1
    assert delta("keystore_duplicates_suppressed_total", scope="mb") == 1
    assert delta("keystore_fingerprint_mismatches_total", scope="mb") == 1


def test_the_sweeper_pauses_between_batches(ks, tenant_id, clock):
    for n in range(25):
        claim(ks, tenant_id, f"old-{n}", ttl=10, lease=5)
    clock.advance(10)
    pauses = []
    assert ks.jobs.sweep(batch=10, pause_ratio=2.0, sleep=pauses.append) == 25
    assert len(pauses) == 2 and all(p > 0 for p in pauses)  # after each full batch
    assert ks.jobs.sweep(batch=10, pause_ratio=0, sleep=pauses.append) == 0
    assert len(pauses) == 2


COUNTED = ("claimed", "succeeded", "failed", "released", "taken_over", "resolved",
           "duplicates_suppressed", "mismatches")


def counted(body: dict) -> dict:
    """The report's counted figures per scope (not the ones "as it stands now")."""
    return {s["scope"]: {k: s[k] for k in COUNTED} for s in body["scopes"]}


def test_the_daily_report_stays_as_it_was_after_the_sweep(ks, tenant_id, clock):
    today = dt.datetime.fromtimestamp(T0 / SECOND, dt.UTC).date()
    a = claim(ks, tenant_id, "a", scope="invoice")
    ks.service.complete(tenant_id, "invoice", "a", a.lease_token, "succeeded", "{}", "INV-1")
    for _ in range(3):
        claim(ks, tenant_id, "a", scope="invoice")  # replays
    c = claim(ks, tenant_id, "c", scope="invoice")
    ks.service.release(tenant_id, "invoice", "c", c.lease_token, "503 upstream")
    c2 = claim(ks, tenant_id, "c", scope="invoice")
    ks.service.complete(tenant_id, "invoice", "c", c2.lease_token, "failed", "{}")
    claim(ks, tenant_id, "r", scope="invoice", on_stale="retry", lease=10)
    clock.advance(10)
    claim(ks, tenant_id, "r", scope="invoice", on_stale="retry")  # takes over, still running
    claim(ks, tenant_id, "stale", scope="mail", lease=10)  # dies: goes to reconciliation
    with pytest.raises(errors.FingerprintMismatch):
        claim(ks, tenant_id, "a", scope="invoice", fp="other")  # a review: kept 30 days
    clock.advance(20)
    ks.jobs.reconcile()
    before = counted(ks.reports.daily(tenant_id, today, clock.now))
    assert before["invoice"] == {"claimed": 5, "succeeded": 1, "failed": 1, "released": 1,
                                 "taken_over": 1, "resolved": 0, "duplicates_suppressed": 3,
                                 "mismatches": 1}
    assert before["mail"]["claimed"] == 1

    clock.advance(3600)  # the same day still; everything expired
    assert ks.jobs.sweep() == 2  # "a" and "stale" wait for a person (open reviews)
    assert counted(ks.reports.daily(tenant_id, today, clock.now)) == before
    clock.advance(31 * 86_400)  # ... for 30 days at most
    assert ks.jobs.sweep() == 2
    assert _all(ks) == []
    assert counted(ks.reports.daily(tenant_id, today, clock.now)) == before
    assert dict(ks.reports.duplicates_per_day(tenant_id, 1, today)) == {today.isoformat(): 3}


def test_a_report_made_while_the_sweeper_purges_is_exact(ks, tenant_id, clock):
    today = dt.datetime.fromtimestamp(T0 / SECOND, dt.UTC).date()
    n = 240
    for i in range(n):
        c = claim(ks, tenant_id, f"k{i}", ttl=10)
        ks.service.complete(tenant_id, "s", f"k{i}", c.lease_token, "succeeded", "{}")
        claim(ks, tenant_id, f"k{i}", ttl=10)  # one replay each
    clock.advance(10)
    want = {"claimed": n, "succeeded": n, "failed": 0, "released": 0, "taken_over": 0,
            "resolved": 0, "duplicates_suppressed": n, "mismatches": 0}
    seen, done = [], threading.Event()

    def report_all_along():
        while not done.is_set():
            seen.append(counted(ks.reports.daily(tenant_id, today, clock.now))["s"])
    reporter = threading.Thread(target=report_all_along)
    reporter.start()
    try:
        assert ks.jobs.sweep(batch=7, pause_ratio=0) == n
    finally:
        done.set()
        reporter.join(60)
    seen.append(counted(ks.reports.daily(tenant_id, today, clock.now))["s"])
    assert len(seen) > 3 and all(s == want for s in seen), [s for s in seen if s != want][:3]


def test_lease_expiries_found_by_a_reconcile_from_cron_are_counted(database_url, tmp_path):
    """`keystore reconcile` in its own process (as cron runs it) counts on the same
    keystore_lease_expiries_total as a claim that finds a stale lease in the service."""
    past = FakeClock(system_clock() - 3600 * SECOND)  # leases that ran out an hour ago
    app = create_app(Settings(database_url=database_url), past)
    try:
        token = app.extensions["keystore"].accounts
        token.create_tenant("acme", past.now)
        http = Http(app.test_client(), token.create_token("acme", "client", None, past.now))
        for key in ("a", "b", "c"):
            assert http.post("/v1/claim", {"scope": "cron", "key": key,
                                           "lease_seconds": 10})[0] == 201
        before = scrape(http)
        past.advance(60)
        assert http.post("/v1/claim", {"scope": "cron", "key": "a"})[0] == 409  # found stale
        out = keystore_cli(database_url, "reconcile")
        assert json.loads(out.stdout) == {"needs_reconciliation": 2}
        after = scrape(http)
        key = ("keystore_lease_expiries_total", (("scope", "cron"),))
        assert after.get(key, 0) - before.get(key, 0) == 3
    finally:
        app.extensions["keystore"].database.engine.dispose()


def scrape(http) -> dict:
    text = http.client.get("/metrics").get_data(as_text=True)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}
