"""Settlement by asking the destination (issue 28): a check's run against a real HTTP server
on 127.0.0.1 and its verdicts, then the reconciler's pass over plain claims in a scope with
a settlement whose lease ran out (both backends): found settles the record without a person
(review resolved settled_by_check, with its audit row), absent releases it or leaves the
review with the answer, three unclear runs leave the review with the answers attached."""
from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from keystore_service.domain.sends import Verdict
from keystore_service.gateway.settlement import Settlement
from keystore_service.gateway.settlement_pass import SettlementLoop, SettlementPass
from keystore_service.service.claims import Claim
from keystore_service.storage.send_tables import record_checks, sends
from keystore_service.storage.tables import resolutions, reviews
from tests.gateway.check_server import CHECK, INVOICE, CheckServer, answering


@pytest.fixture
def api():
    server = CheckServer()
    yield server
    server.close()


@pytest.fixture
def checker(ks):
    return ks.gateway.checker


@pytest.fixture
def make(ks, tenant_id):
    """A connection of acme's (its headers sealed as the API would seal them)."""
    made = iter(range(100))

    def connection(base_url, timeout_seconds=1):
        return ks.gateway.connections.create(tenant_id, {
            "name": f"billing{next(made)}", "base_url": base_url,
            "headers": {"Authorization": "Bearer sk_test"},
            "timeout_seconds": timeout_seconds})
    return connection


# --- a check's run and its verdict ------------------------------------------------------------

def test_the_path_is_rendered_encoded_and_appended_to_the_base_path(api, checker, make):
    run = checker.run(make(api.base), CHECK, "pay", "a/b c?é")
    assert run.verdict is Verdict.FOUND and run.resource_id == "in_42"
    sent = api.requests[0]
    assert sent["path"] == "/api/invoices?reference=pay%3Aa%2Fb%20c%3F%C3%A9"
    assert sent["headers"]["Authorization"] == "Bearer sk_test"
    assert json.loads(run.answer) == {"data": [INVOICE]}
    other = checker.run(make(api.base.rstrip("/")), {**CHECK, "path": "/i/{key}/{scope}"},
                        "pay", "{scope}")
    assert other.status == 200 and api.requests[1]["path"] == "/api/i/%7Bscope%7D/pay"


@pytest.mark.parametrize("found, body, verdict, rid", [
    ({"pointer": "/status", "equals": "paid"}, INVOICE, "found", "in_42"),
    ({"pointer": "/status", "equals": "paid"}, {**INVOICE, "status": "draft"}, "unclear", None),
    ({"pointer": "/n", "equals": 1}, {"id": 7, "n": 1.0}, "found", "7"),
    ({"pointer": "/n", "equals": 1}, {"id": 7, "n": True}, "unclear", None),
    ({"pointer": "/id"}, {"id": None}, "found", None),  # exists; a null is no resource id
    ({"pointer": "/id"}, {"other": 1}, "unclear", None),
])
def test_found_and_found_with_equals(api, checker, make, found, body, verdict, rid):
    answering(api, 200, body)
    run = checker.run(make(api.base), {"path": "/invoices/{key}", "found": found,
                                          "resource_id": "/id", "absent_status": [404]},
                      "pay", "k1")
    assert (run.verdict.value, run.resource_id) == (verdict, rid)


def test_absent_by_status_and_by_an_empty_list(api, checker, make):
    answering(api, 404, {"error": "no such invoice"})
    run = checker.run(make(api.base), {**CHECK, "absent_status": [404, 410]}, "pay", "k")
    assert (run.verdict, run.status, run.resource_id) == (Verdict.ABSENT, 404, None)
    answering(api, 200, {"data": []})
    assert checker.run(make(api.base), CHECK, "pay", "k").verdict is Verdict.ABSENT
    answering(api, 404, {})  # a 404 the check did not name is not absent
    assert checker.run(make(api.base), CHECK, "pay", "k").verdict is Verdict.UNCLEAR


@pytest.mark.parametrize("status, body, wait, why", [
    (500, {"error": "down"}, 0, "status 500"),
    (200, b"<html>maintenance</html>", 0, "the answer is not JSON"),
    (200, b'{"data": NaN}', 0, "the answer is not JSON"),
    (200, b"\xff\xfe", 0, "the answer is not JSON"),
    (200, {"data": [INVOICE]}, 2.5, "timeout"),
    (302, b"", 0, "status 302"),
])
def test_unclear_answers(api, checker, make, status, body, wait, why):
    answering(api, status, body, wait)
    started = time.monotonic()
    run = checker.run(make(api.base), CHECK, "pay", "k")
    assert (run.verdict, run.error, run.resource_id) == (Verdict.UNCLEAR, why, None)
    assert time.monotonic() - started < 2.0  # the connection's 1 s timeout ends it


def test_no_answer_at_all_is_unclear(checker, make):
    run = checker.run(make("http://127.0.0.1:9/"), CHECK, "pay", "k")  # nothing listens
    assert run.verdict is Verdict.UNCLEAR and run.status is None and run.error


def test_the_answer_kept_is_at_most_1_kib_of_the_64_kib_judged(api, checker, make):
    body = {"data": [{"id": "x", "pad": "é" * 30_000}]}  # 60 KB in UTF-8
    answering(api, 200, json.dumps(body, ensure_ascii=False).encode())
    run = checker.run(make(api.base), CHECK, "pay", "k")
    assert run.verdict is Verdict.FOUND and run.resource_id == "x"
    assert len(run.answer.encode()) <= 1024 + 2  # a character cut in two: one U+FFFD
    answering(api, 200, {"data": [{"id": "x", "pad": "a" * 70_000}]})  # cut at 64 KiB
    run = checker.run(make(api.base), CHECK, "pay", "k")
    assert (run.verdict, run.error) == (Verdict.UNCLEAR, "the answer is not JSON")


# --- the reconciler's pass over plain claims ---------------------------------------------------

@dataclass
class World:
    ks: object
    tenant_id: int
    api: CheckServer
    clock: object
    passes: SettlementPass
    settlement: Settlement
    connection: object

    def claim(self, key, scope="pay", lease=30):
        return self.ks.service.claim(self.tenant_id, Claim(scope, key, "fp", 3600, lease,
                                                           "reconcile"))

    def stale(self, *keys, scope="pay"):
        for k in keys:
            self.claim(k, scope)
        self.clock.advance(31)
        self.ks.jobs.reconcile()

    def record(self, key, scope="pay"):
        return self.ks.service.lookup(self.tenant_id, scope, key)

    def rows(self, table, *where):
        with self.ks.database.engine.connect() as c:
            return c.execute(select(table).where(*where)).mappings().all()


def settle_in(ks, tenant_id, scope, connection, on_absent="release", check=CHECK):
    ks.gateway.connections.settle_scope(tenant_id, scope, connection.name, check, on_absent)


@pytest.fixture
def world(ks, tenant_id, api, clock, make):
    connection = make(api.base)
    settle_in(ks, tenant_id, "pay", connection)
    return World(ks, tenant_id, api, clock, ks.gateway.settlement_pass, ks.gateway.settlement,
                 connection)


def test_a_stale_plain_claim_is_settled_by_the_check_without_a_person(world):
    world.stale("k1")
    assert world.record("k1").state == "needs_reconciliation"
    assert world.passes.run() == Counter({"found": 1})
    record = world.record("k1")
    assert (record.state, record.result_resource_id) == ("succeeded", "in_42")
    result = json.loads(record.result)
    assert (result["status_code"], result["resource_id"]) == (200, "in_42")
    assert json.loads(result["body"]) == {"data": [INVOICE]}
    review, = world.rows(reviews, reviews.c.record_id == record.id)
    assert (review["state"], review["resolution"], review["resolved_by"]) == (
        "resolved", "settled_by_check", "check")
    audit, = world.rows(resolutions, resolutions.c.record_id == record.id)
    assert (audit["action"], audit["actor"], audit["review_id"]) == (
        "settled_by_check", "check", review["id"])
    after = json.loads(audit["after"])
    assert after["state"] == "succeeded" and after["check"]["verdict"] == "found"
    assert "in_42" in after["check"]["answer"]
    assert json.loads(audit["before"])["state"] == "needs_reconciliation"
    assert world.api.requests[0]["path"] == "/api/invoices?reference=pay%3Ak1"
    assert world.passes.run() == Counter()  # settled: never asked again
    assert len(world.api.requests) == 1
    trail = world.ks.oversight.audit_trail(world.tenant_id, "pay", "k1")
    assert trail[0].action == "settled_by_check" and trail[0].after["check"]["status_code"] == 200


def test_absent_with_release_releases_the_claim(world):
    world.stale("k2")
    answering(world.api, 200, {"data": []})
    assert world.passes.run() == Counter({"released": 1})
    assert world.record("k2").state == "released"
    review, = world.rows(reviews, reviews.c.record_id == world.record("k2").id)
    assert (review["resolution"], review["resolved_by"]) == ("released_by_check", "check")
    audit, = world.rows(resolutions, resolutions.c.key == "k2")
    assert audit["action"] == "released_by_check"
    again = world.claim("k2")  # the effect never happened: the key may be claimed again
    assert again.record.state == "in_progress" and again.lease_token


def test_absent_with_review_leaves_the_review_with_the_answer(world):
    settle_in(world.ks, world.tenant_id, "mail", world.connection, on_absent="review",
              check={**CHECK, "absent_status": [404]})
    world.stale("m1", scope="mail")
    answering(world.api, 404, {"error": "none"})
    assert world.passes.run() == Counter({"absent_review": 1})
    record = world.record("m1", scope="mail")
    assert record.state == "needs_reconciliation"
    review, = world.rows(reviews, reviews.c.record_id == record.id)
    assert review["state"] == "open"
    kept = json.loads(review["kept"])["checks"]
    assert [(k["verdict"], k["status_code"]) for k in kept] == [("absent", 404)]
    assert world.passes.run() == Counter()  # ruled out: not asked again


def test_three_unclear_answers_leave_the_review_with_the_answers(world):
    world.stale("k3")
    answers = iter([(500, b'{"error": "down"}', 0), (200, b"<html>", 0),
                    (200, b"{}", 2.5)])  # a 5xx, not JSON, a timeout
    world.api.answer = lambda path: next(answers)
    assert world.passes.run() == Counter({"unclear": 1})
    assert world.passes.run() == Counter()  # not due yet: 30 s after the first
    world.clock.advance(30)
    assert world.passes.run() == Counter({"unclear": 1})
    world.clock.advance(59)
    assert world.passes.run() == Counter()  # 60 s after the second
    world.clock.advance(1)
    assert world.passes.run() == Counter({"unresolved": 1})
    assert len(world.api.requests) == 3
    record = world.record("k3")
    assert record.state == "needs_reconciliation"
    review, = world.rows(reviews, reviews.c.record_id == record.id)
    assert review["state"] == "open" and review["kind"] == "stale_lease"
    kept = json.loads(review["kept"])["checks"]
    assert [(k["status_code"], k["error"]) for k in kept] == [
        (500, "status 500"), (200, "the answer is not JSON"), (None, "timeout")]
    world.clock.advance(3600)
    assert world.passes.run() == Counter() and len(world.api.requests) == 3
    assert len(world.rows(record_checks, record_checks.c.record_id == record.id)) == 3
    assert world.rows(resolutions, resolutions.c.key == "k3") == []


def test_only_plain_stale_claims_of_scopes_with_a_settlement_are_asked(world):
    world.claim("live", lease=3600)  # its lease runs
    world.stale("other", scope="no-settlement")
    assert world.record("other", scope="no-settlement").state == "needs_reconciliation"
    assert world.passes.run() == Counter() and world.api.requests == []


def test_two_passes_at_once_settle_a_record_once(world):
    world.stale(*[f"r{i}" for i in range(6)])
    world.api.answer = lambda path: (200, json.dumps({"data": [INVOICE]}).encode(), 0.05)
    world.passes.lock = None  # no job lock: both ask, the compare-and-set decides
    results: list[Counter] = []
    threads = [threading.Thread(target=lambda: results.append(world.passes.run()))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sum(results, Counter())["found"] == 6
    for i in range(6):
        assert world.record(f"r{i}").state == "succeeded"
        assert len(world.rows(resolutions, resolutions.c.key == f"r{i}")) == 1


def _add_unresolved_send(world, key):
    """A send of `key` waiting for a person, as the sender leaves one (its record claimed in
    the same scope, the send unresolved, its send_unknown review open)."""
    record = world.claim(key).record
    ks, now = world.ks, world.clock.now
    with ks.service.records.transaction() as cur:
        cur.execute(str(sends.insert().values(
            tenant_id=record.tenant_id, connection_id=world.connection.id,
            connection_name=world.connection.name, record_id=record.id, incarnation=1,
            reference=f"pay:{key}", method="POST", path="/invoices", state="unresolved",
            attempts=1, unknown=1, check_tries=3, created_at=now, window_end=now,
            next_attempt_at=now).compile(ks.database.engine,
                                         compile_kwargs={"literal_binds": True})))
        ks.service.reviews.open_or_count(cur, record, "send_unknown", now)
    return record


def test_the_report_the_issue_and_the_metric_tell_what_the_checks_did(world):
    def by_key(path):
        if "k1" in path:
            return 200, json.dumps({"data": [INVOICE]}).encode(), 0
        return (200, b'{"data": []}', 0) if "k2" in path else (500, b"{}", 0)
    world.api.answer = by_key
    labels = {"tenant": "acme", "scope": "pay"}
    before = {o: REGISTRY.get_sample_value("keystore_settlements_total",
                                           {**labels, "outcome": o}) or 0
              for o in ("found", "absent", "unresolved")}
    world.stale("k1", "k2", "k3")
    assert world.passes.run() == Counter({"found": 1, "released": 1, "unclear": 1})
    record = _add_unresolved_send(world, "s1")
    issues = world.ks.gateway.issues
    issues.watch()
    issue, = [i for i in issues.page(world.tenant_id, "open", "send_unresolved")]
    assert (issue.subject, issue.count) == (world.connection.name, 1)
    day = dt.datetime.fromtimestamp(world.clock.now / 1e6, dt.UTC).date()
    pay, = [s for s in world.ks.reports.daily(world.tenant_id, day, world.clock.now)["scopes"]
            if s["scope"] == "pay"]
    assert {k: pay[k] for k in ("sent", "settled_found", "settled_absent",
                                "waiting_for_person")} == {
        "sent": 1, "settled_found": 1, "settled_absent": 1, "waiting_for_person": 2}
    text = world.ks.gateway.alerts.report(world.tenant_id, day.isoformat(), world.clock.now)
    assert "sent 1, settled by check 1 found / 1 absent, waiting for a person 2" in text
    after = {o: REGISTRY.get_sample_value("keystore_settlements_total",
                                          {**labels, "outcome": o}) or 0
             for o in ("found", "absent", "unresolved")}
    assert {o: after[o] - before[o] for o in after} == {"found": 1, "absent": 1,
                                                        "unresolved": 0}
    with world.ks.service.records.transaction() as cur:  # a person settles the send
        world.ks.service.reviews.close(cur, record.id, "mark_succeeded", world.clock.now, "ann")
    issues.watch()
    assert issues.page(world.tenant_id, "open", "send_unresolved") == []
    assert [i.state for i in issues.page(world.tenant_id, None, "send_unresolved")] == [
        "resolved"]


def test_the_loop_beside_the_relay_settles_by_itself(world):
    world.stale("loop1")
    loop = SettlementLoop(world.passes, alive=lambda: True, every=0.05).start()
    try:
        deadline = time.monotonic() + 10
        while world.record("loop1").state != "succeeded" and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        loop.stop()
    assert world.record("loop1").state == "succeeded"
    assert not loop._thread.is_alive()
