"""Bulk actions (docs/api.md, "Bulk actions") through the API on both backends: the dry run
counts what the filter matches, a job acts on each event by its single operation (a
redelivery keeps the event's identity), its set is fixed when it starts, a repeated
Idempotency-Key answers the same job also under concurrent requests, cancel stops it between
events, and a job whose runner stopped is finished by another runner."""
from __future__ import annotations

import threading
import time

import pytest

from keystore_service import bootstrap
from keystore_service.domain.bulk import Filter
from keystore_service.settings import Settings
from keystore_service.storage.bulk_tables import bulk_job_items, bulk_jobs
from tests.support import Http

from .bulk_support import bulk, events, failed_source, wait_for
from .support import KEY, Sink, count, create_source, pump


def operator(ks, op):
    return ks.auth.authenticate("Bearer " + op["operator"])


@pytest.fixture
def refusing():
    s = Sink(lambda n, r: 400)
    yield s
    s.close()


def matched(gw, **f) -> int:
    status, body, _ = bulk(gw, {"action": "redeliver", "filter": f, "dry_run": True})
    assert status == 200, body
    return body["matched"]


def test_the_dry_run_counts_by_each_filter(gw, gw_app, forwarding, refusing, sink, clock):
    failed_source(gw, forwarding, refusing.url, 3)
    other = create_source(gw, gw.token, sink.url, name="crm")
    events(gw, other, 2, kind="contact.created", first=10)
    assert matched(gw) == 5
    assert matched(gw, source="shop") == 3 and matched(gw, source="nope") == 0
    assert matched(gw, state="failed") == 3 and matched(gw, state="queued") == 2
    assert matched(gw, event_type="contact.*") == 2 and matched(gw, event_type="*") == 5
    assert matched(gw, last_error="HTTP 4*") == 3 and matched(gw, last_error="timeout") == 0
    assert matched(gw, destination="default", source="crm") == 2
    assert gw.get("/v1/deliveries")[1]["deliveries"][0]["received_at"]
    assert matched(gw, received_after="2000-01-01T00:00:00Z") == 5
    assert matched(gw, received_before="2000-01-01T00:00:00Z") == 0
    assert count(gw_app, bulk_jobs) == 0  # a dry run starts nothing


def test_a_bulk_redelivery_keeps_each_events_identity(gw, forwarding, refusing):
    failed_source(gw, forwarding, refusing.url, 3)
    status, body, _ = bulk(gw, {"action": "redeliver", "filter": {"state": "failed"}})
    assert status == 202 and body["job"]["matched"] == 3, body
    job = wait_for(gw, body["job"]["id"])
    assert (job["state"], job["done"], job["skipped"]) == ("done", 3, 0)
    assert job["url"].endswith(f"/ui/hooks/jobs/{job['id']}") and job["finished_at"]
    assert {d["state"] for d in gw.get("/v1/deliveries")[1]["deliveries"]} == {"queued"}
    refusing.requests.clear()
    pump(forwarding)
    assert sorted(r["headers"]["Idempotency-Key"] for r in refusing.requests) == \
        ["ev0", "ev1", "ev2"]
    assert {r["headers"]["Keystore-Attempt"] for r in refusing.requests} == {"2"}
    # nothing failed now is queued or delivered: a second job skips every event
    status, body, _ = bulk(gw, {"action": "redeliver", "filter": {"source": "shop"}})
    assert wait_for(gw, body["job"]["id"])["done"] == 3  # failed again, redelivered again


def test_dismiss_closes_each_failed_events_review(gw, forwarding, refusing):
    failed_source(gw, forwarding, refusing.url, 2)
    assert len(gw.get("/v1/reviews", kind="delivery_failed")[1]["reviews"]) == 2
    status, body, _ = bulk(gw, {"action": "dismiss", "filter": {}})
    job = wait_for(gw, body["job"]["id"])
    assert (job["done"], job["skipped"]) == (2, 0)
    assert gw.get("/v1/reviews", kind="delivery_failed")[1]["reviews"] == []
    assert {d["state"] for d in gw.get("/v1/deliveries")[1]["deliveries"]} == {"failed"}
    status, body, _ = bulk(gw, {"action": "dismiss", "filter": {}})
    assert wait_for(gw, body["job"]["id"])["skipped"] == 2  # no review left to close


def test_the_set_is_fixed_when_the_job_starts(gw, gw_app, forwarding, refusing, op):
    source = failed_source(gw, forwarding, refusing.url, 3)
    ks = gw_app.extensions["keystore"]
    job, created = ks.gateway.bulk.start(operator(ks, op), "redeliver", Filter(source="shop"),
                                         {"source": "shop"}, False, None, background=False)
    assert created and job.matched == 3
    events(gw, source, 2, first=50)  # accepted after the start: not in the job
    assert ks.gateway.bulk.run(job) == "done"
    done = ks.gateway.bulk.get(job.tenant_id, job.id)
    assert (done.matched, done.done, done.skipped) == (3, 3, 0)
    assert count(gw_app, bulk_job_items) == 3
    assert matched(gw, source="shop") == 5


def test_cancel_stops_the_job_between_events(gw, gw_app, forwarding, refusing, op):
    failed_source(gw, forwarding, refusing.url, 5)
    ks = gw_app.extensions["keystore"]
    job, _ = ks.gateway.bulk.start(operator(ks, op), "redeliver", Filter(), {}, False, None,
                                   background=False)
    assert ks.gateway.bulk.run(job, limit=2) == "running"
    status, body, _ = gw.post(f"/v1/jobs/{job.id}/cancel")
    assert status == 200 and body["job"]["state"] == "cancelled", body
    assert ks.gateway.bulk.run(job) is None  # nothing runs a cancelled job
    status, body, _ = gw.get(f"/v1/jobs/{job.id}")
    assert (body["job"]["done"], body["job"]["skipped"]) == (2, 0)
    assert body["job"]["finished_at"]
    assert gw.post(f"/v1/jobs/{job.id}/cancel")[0] == 200  # again: as it is
    status, body, _ = bulk(gw, {"action": "retry", "filter": {"source": "nope"}})
    assert wait_for(gw, body["job"]["id"])["state"] == "done"
    status, err, _ = gw.post(f"/v1/jobs/{body['job']['id']}/cancel")
    assert status == 409 and err["error"]["code"] == "already_completed"


def test_a_paced_job_acts_on_at_most_its_events_a_second(gw, gw_app, forwarding, refusing,
                                                        op):
    failed_source(gw, forwarding, refusing.url, 5)
    ks = gw_app.extensions["keystore"]
    ks.gateway.bulk.pause = 1 / 20  # KEYSTORE_BULK_EVENTS_PER_SECOND=20
    job, _ = ks.gateway.bulk.start(operator(ks, op), "redeliver", Filter(), {}, False, None,
                                   background=False)
    started = time.monotonic()
    assert ks.gateway.bulk.run(job) == "done"
    assert time.monotonic() - started >= 5 / 20 * 0.9  # five events at 20 a second
    assert Settings(bulk_events_per_second=20).bulk_events_per_second == 20


def test_a_job_whose_runner_stopped_is_finished_by_another(gw, gw_app, forwarding, refusing,
                                                          op, database_url, clock):
    failed_source(gw, forwarding, refusing.url, 4)
    ks = gw_app.extensions["keystore"]
    job, _ = ks.gateway.bulk.start(operator(ks, op), "redeliver", Filter(), {}, False, None,
                                   background=False)
    assert ks.gateway.bulk.run(job, limit=1) == "running"  # its runner stops (dies)
    other = bootstrap.build(Settings(database_url=database_url, secret_key=KEY), clock)
    try:
        other.gateway.bulk.holder = "another-process"
        assert other.gateway.bulk.resume_one() is None  # the first runner's lease is live
        clock.advance(31)
        assert other.gateway.bulk.resume_one() == job.id
    finally:
        other.database.engine.dispose()
    status, body, _ = gw.get(f"/v1/jobs/{job.id}")
    assert (body["job"]["state"], body["job"]["done"]) == ("done", 4)
    assert ks.gateway.bulk.run(job) is None  # the first runner, back: nothing to do


def test_the_same_idempotency_key_answers_the_same_job_under_concurrency(gw, gw_app, op,
                                                                        forwarding, refusing):
    failed_source(gw, forwarding, refusing.url, 3)
    answers, barrier = [], threading.Barrier(8)
    body = {"action": "redeliver", "filter": {"state": "failed"}}

    def send():
        http = Http(gw_app.test_client(), op["operator"])
        barrier.wait()
        answers.append(bulk(http, body, key="bulk-2026-12-02"))
    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(a[0] for a in answers) == [200] * 7 + [202], [a[1] for a in answers]
    assert len({a[1]["job"]["id"] for a in answers}) == 1
    assert all(a[2].get("Idempotent-Replayed") == "true" for a in answers if a[0] == 200)
    assert count(gw_app, bulk_jobs) == 1
    job = wait_for(gw, answers[0][1]["job"]["id"])
    assert job["done"] == 3  # one run: each event redelivered once
    status, err, _ = bulk(gw, {**body, "force": True}, key="bulk-2026-12-02")
    assert status == 422 and err["error"]["code"] == "fingerprint_mismatch"
    status, again, _ = bulk(gw, body, key="bulk-2026-12-02")
    assert status == 200 and again["job"]["id"] == job["id"]
    # another tenant's same key is its own
    status, other, _ = gw.post("/v1/deliveries/bulk", body, token=op["globex"],
                               headers={"Idempotency-Key": "bulk-2026-12-02"})
    assert status == 202 and other["job"]["id"] != job["id"] and other["job"]["matched"] == 0


def test_a_bulk_retry_makes_each_queued_event_due_now(gw, forwarding):
    answers = Sink(lambda n, r: 500 if n < 2 else 200)  # both wait on a backoff, then taken
    try:
        source = create_source(gw, gw.token, answers.url)
        events(gw, source, 2)
        assert pump(forwarding) == ["retry", "retry"]
        assert pump(forwarding) == []  # each waits on its backoff
        status, body, _ = bulk(gw, {"action": "retry", "filter": {"state": "queued"}})
        job = wait_for(gw, body["job"]["id"])
        assert (job["done"], job["skipped"]) == (2, 0)
        assert sorted(pump(forwarding)) == ["delivered", "delivered"]  # due at once
        assert [r["headers"]["Keystore-Attempt"] for r in answers.requests[2:]] == ["2", "2"]
        status, body, _ = bulk(gw, {"action": "retry", "filter": {}})
        assert wait_for(gw, body["job"]["id"])["skipped"] == 2  # delivered: not queued
    finally:
        answers.close()
