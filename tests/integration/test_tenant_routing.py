"""Every statement that serves a request on a tenant's table filters by tenant_id.

That is the condition for single-shard routing on a distributed PostgreSQL (Citus, tables
distributed by tenant_id: docs/scaling.md): a statement that names its tenant runs on the one
shard that holds it; one that does not runs on every shard. Two checks, on PostgreSQL:

- every statement the stores have compiled (their `Sql` attributes, read off the live
  objects after the app is built) is checked, so a new statement without the filter fails
  here before any request runs it;
- every statement executed while a representative set of requests runs (claims, batch,
  completes, keys, reviews, sources, hooks ingest and forwarding) is captured at the
  driver's cursor and checked, which covers the statements built per call.

A statement passes when it has a tenant_id condition (`tenant_id = ...`, `= ANY`, `IN`, a
join on it), or is an INSERT whose rows carry tenant_id. Named below and nowhere else:
maintenance that spans tenants by design (Citus runs it on every shard), the look-ups that
find a request's tenant (they cannot name it yet), and GAPS: request statements that address
a row by its surrogate id after an earlier statement of the same request found it by
tenant_id. They are correct today but fan out on a distributed database; each is reported in
docs/scaling.md, and this list may only shrink (an entry that now filters must leave it).
"""
from __future__ import annotations

import re
import sys
import time

import psycopg
import pytest
from sqlalchemy import event

from keystore_service.app import create_app
from keystore_service.settings import Settings
from keystore_service.storage.sql import BatchSql, Sql
from keystore_service.storage.tables import metadata
from tests.conftest import truncate_pg
from tests.gateway.support import KEY, SECRET, Sink, register, signed
from tests.support import T0, FakeClock, Http

pytestmark = pytest.mark.postgres

TENANTS = {t.name for t in metadata.tables.values() if "tenant_id" in t.c}
# A tenant's rows in tables that have no tenant_id column of their own (they hang off a
# record or an event). Distributing them by tenant_id needs the column first (a migration,
# docs/scaling.md); until then they are not checked.
WITHOUT_COLUMN = {"attempts": "a record's ended attempts (record_id)",
                  "kept_payloads": "a record's kept payload (record_id)",
                  "hook_attempts": "an event's forwards (event_pk)",
                  "send_attempts": "a send's requests (send_id)"}
# Not a tenant's: reference tables on Citus (rate_limits: distributed by its token_id).
SHARED = {"tenants", "job_locks", "service_secrets", "sealing_check", "rate_limits",
          "lease_expiries", "alembic_version"}

MAINTENANCE = {
    "Maintenance.*": "the sweep and the reconciler: every tenant's expired records and stale "
                     "leases, in bounded batches",
    "Take.*": "the relay's fair take: due events of every source, round robin",
    "PauseSql.expired": "the relay's sweep: every tenant's operator pauses that ended by "
                        "themselves, to clear them (gateway/forwarding.end_pauses)",
    "HookStore._drop": "upkeep: bodies past their source's keep_body_seconds, every source",
    "SignIns._purge": "upkeep: sign-ins past their lifetime, every tenant",
    "CheckStore._sealed": "the sealing check: any one source's sealed secret, whichever "
                          "tenant's (at start and at the first seal)",
    "IssueStore._live": "the watchers: every tenant's live issues, to count or end them",
    "IssueStore._sources": "the watchers: every source's state and oldest queued event",
    "IssueStore._reviews": "the watchers: every tenant's open reviews, counted by scope",
    "IssueStore._destinations": "the watchers: every destination's failing run, with its "
                                "source's count of destinations",
    "IssueStore._failed": "the watchers: every tenant's open delivery_failed reviews, counted "
                          "by scope and destination",
    "RecordCheckStore._due": "the settlement pass: every tenant's stale plain claims in "
                             "scopes with a settlement, in bounded batches",
    "IssueStore._sends": "the watchers: every tenant's sends waiting for a person, counted by "
                         "connection",
    "AlertStore._all": "the daily report's run: every tenant's channels, to queue the report",
    "AlertStore._due": "the notices' outbox: due notices of every channel, to lease them",
    "AlertStore._counts": "the /metrics gauges: sent and failed notices, all tenants",
    "BulkStore._orphan": "the bulk watcher: any tenant's running job whose runner stopped",
    "ConnectionStore._by_any_id": "the sender's due sends of every tenant: a send's connection "
                                  "by its id when no tenant is given",
    "ScopeSettlementStore._all": "the reconciler's settlement pass: every tenant's scopes with "
                                 "a settlement",
    "SendStore._candidates": "the sender's fair take: due sends of every connection, in turn",
}
FINDS_TENANT = {
    "Accounts._by_hash": "a bearer token's hash is what names the tenant",
    "SignIns._state": "a session cookie's id hash is what names the tenant",
    "SignIns._delete": "signing out by the cookie's id hash",
    "SourceStore._by_ingest": "the ingest URL names the source, not its tenant",
}
# Correct today (the row was found by tenant_id earlier in the request, then addressed by
# its surrogate id), but each fans out to every shard on Citus until it gains a redundant
# tenant_id condition: statement -> what it goes by.
GAPS = {
    "RecordStore._by_id": "records.id", "RecordStore._add_counts": "records.id",
    "BatchSql.counts": "records.id", "ReviewStore._point": "records.id and reviews.record_id",
    "ReviewStore._refused": "reviews.id", "ReviewStore._get": "reviews.id",
    "ReviewStore._close_one": "reviews.id",
    "ReviewStore._close_kind": "reviews.record_id", "ReviewStore._open_of": "reviews.record_id",
    "SendStore._by_id": "sends.id", "SendStore._lease": "sends.id",
    "SendStore._one": "sends.record_id",
    "HookStore._by_id": "hook_events.id", "HookStore._of_record": "hook_events.record_id",
    "HookStore._settle": "hook_events.id", "HookStore._settled": "hook_events.id",
    "HookStore._settled_ended": "hook_events.id", "HookStore._redeliver": "hook_events.id",
    "HookStore._reset": "hook_events.id",
    "SourceStore._by_id": "hook_sources.id", "SourceStore._state": "hook_sources.id",
}

_TABLE = re.compile(r"\b(?:from|join|update|into)\s+\"?(\w+)")
# tenant_id compared with a value the statement is given (a join on it is not a filter)
_VALUE = r"(?:%\(\w+\)s|:\w+|\d+|cast\s*\(\s*%\(\w+\)s)"
_FILTER = re.compile(rf"\btenant_id\s*(?:=\s*(?:any\s*\(\s*)?|in\s*\(\s*){_VALUE}"
                     rf"|{_VALUE}(?:::\w+)?\s*=\s*(?:\w+\.)?tenant_id\b")
_INSERT = re.compile(r"\binsert into \"?(\w+)\"?\s*\(([^)]*)\)")
_WRITE = re.compile(r"\b(?:update|delete from) \"?(\w+)\"? (?:set|where)\b")  # not ON CONFLICT's
_ALIAS = re.compile(r"\b(?:from|join) \"?(\w+)\"? (?:as )?(?!where|join|on|left|inner)(\w+)")
_JOIN = re.compile(r"\b(\w+)\.tenant_id = (\w+)\.tenant_id\b")


def unrouted(sql: str) -> set[str]:
    """The tenant tables `sql` touches without filtering by tenant_id (empty when it is
    single-shard). Routed: a tenant_id condition on a value; the target of an INSERT whose
    columns carry tenant_id (Citus routes each row by it; ON CONFLICT DO UPDATE stays on
    the row's shard); a table joined on tenant_id to a routed one (the same row's tenant)."""
    sql = " ".join(sql.lower().split())
    touched = set(_TABLE.findall(sql)) & TENANTS
    if not touched or _FILTER.search(sql):
        return set()
    written = set(_WRITE.findall(sql))
    routed = {table for table, columns in _INSERT.findall(sql)
              if re.search(r"\btenant_id\b", columns) and table not in written}
    names = {alias: table for table, alias in _ALIAS.findall(sql)}
    pairs = [(names.get(a, a), names.get(b, b)) for a, b in _JOIN.findall(sql)]
    for _ in pairs:
        routed |= {b for a, b in pairs if a in routed} | {a for a, b in pairs if b in routed}
    return touched - routed


def _exempt(name: str) -> bool:
    cls = name.split(".")[0]
    return name in FINDS_TENANT or name in MAINTENANCE or f"{cls}.*" in MAINTENANCE


# --- the compiled statements of every store ------------------------------------------------

def compiled_statements(root: object) -> dict[str, list[str]]:
    """Class.attribute -> the SQL text(s) of the statements of every store reachable from
    `root` (this test's app's extensions; the stores of earlier tests, SQLite ones among
    them, may still be alive in the process and are not this app's): their Sql attributes,
    dicts of them, and BatchSql's plain texts by name."""
    found: dict[str, list[str]] = {}
    for obj in _service_objects(root):
        if not str(type(obj).__module__).startswith("keystore_service.storage"):
            continue
        for attr, value in getattr(obj, "__dict__", {}).items():
            if isinstance(obj, BatchSql) and attr == "text":
                pairs = list(value.items())
            else:
                pairs = [(attr, v) for v in (value.values() if isinstance(value, dict)
                                             else [value]) if isinstance(v, Sql)]
            for key, v in pairs:
                found.setdefault(f"{type(obj).__name__}.{key}", []).append(getattr(v, "text", v))
    return found


def _service_objects(root: object) -> list[object]:
    """Every object of keystore_service's own classes that `root` reaches through instance
    attributes, lists, tuples and dicts (and through slots)."""
    seen: set[int] = set()
    out: list[object] = []
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, (list, tuple, set, frozenset)):
            todo.extend(obj)
            continue
        if isinstance(obj, dict):
            todo.extend(obj.values())
            continue
        if not str(getattr(type(obj), "__module__", "")).startswith("keystore_service") \
                or isinstance(obj, type):
            continue
        out.append(obj)
        todo.extend(getattr(obj, "__dict__", {}).values())
        for slot in getattr(type(obj), "__slots__", ()):
            if hasattr(obj, slot):
                todo.append(getattr(obj, slot))
    return out


# --- a capture of every statement executed -------------------------------------------------

class Capture:
    """Every statement run on the engine's connections, named by the store method that
    built it (the first frame in keystore_service/storage/ outside db.py and sql.py)."""

    def __init__(self):
        self.seen: dict[str, set[str]] = {}
        self.names: dict[str, str] = {}  # text -> Class.attribute, from compiled_statements

    def install(self, engine) -> None:
        capture = self

        class Recording(psycopg.Cursor):
            def execute(self, query, params=None, **kw):
                capture.note(query if isinstance(query, str) else str(query))
                return super().execute(query, params, **kw)

        @event.listens_for(engine, "checkout")
        def _record(dbapi_conn, _rec, _proxy):
            dbapi_conn.cursor_factory = Recording

        engine.dispose()  # connections made before the listener are not reused

    def note(self, text: str) -> None:
        name = self.names.get(text)
        if name is None:
            frame = sys._getframe(2)
            while frame and not (
                    "keystore_service/storage/" in frame.f_code.co_filename
                    and not frame.f_code.co_filename.endswith(("/db.py", "/sql.py"))):
                frame = frame.f_back
            where = frame.f_code.co_filename.rsplit("/", 1)[1] if frame else "?"
            name = f"{where}:{frame.f_code.co_name}" if frame else "outside storage"
        self.seen.setdefault(name, set()).add(text)


@pytest.fixture
def served(pg_url):
    register()
    truncate_pg(pg_url)
    clock = FakeClock()
    app = create_app(Settings(database_url=pg_url, secret_key=KEY, token_cache_seconds=0),
                     clock)
    keystore = app.extensions["keystore"]
    capture = Capture()
    compiled = compiled_statements(app.extensions)
    capture.names = {t: name for name, texts in compiled.items() for t in texts}
    capture.install(keystore.database.engine)
    yield app, clock, capture, compiled
    keystore.database.engine.dispose()


def drive(app, clock) -> None:
    """The kinds of requests the HTTP tests make, each answered as they expect."""
    accounts = app.extensions["keystore"].accounts
    for tenant in ("acme", "globex"):
        accounts.create_tenant(tenant, T0)
    client, operator = (accounts.create_token("acme", role, None, T0)
                        for role in ("client", "operator"))
    api, op = Http(app.test_client(), client), Http(app.test_client(), operator)

    def ok(answer, *statuses):
        assert answer[0] in statuses if statuses else 200 <= answer[0] < 300, answer
        return answer[1]

    ref = {"scope": "orders", "key": "k1"}
    lease = ok(api.post("/v1/claim", {**ref, "payload": {"n": 1}, "keep_payload": True,
                                      "lease_seconds": 30}))["lease_token"]
    ok(api.post("/v1/claim", {**ref, "payload": {"n": 1}}), 409)  # in progress: counted
    ok(api.post("/v1/extend", {**ref, "lease_token": lease, "lease_seconds": 60,
                               "checkpoint": "charged", "resource_id": "ch_1"}))
    ok(api.post("/v1/complete", {**ref, "lease_token": lease, "state": "succeeded",
                                 "result": {"resource_id": "ch_1", "body": {"ok": True}}}))
    ok(api.post("/v1/claim", {**ref, "payload": {"n": 1}}))  # a replay
    ok(api.post("/v1/claim", {**ref, "payload": {"n": 2}, "keep_payload": True}), 409, 422)
    lease2 = ok(api.post("/v1/claim", {"scope": "orders", "key": "k2"}))["lease_token"]
    ok(api.post("/v1/release", {"scope": "orders", "key": "k2", "lease_token": lease2}))
    lease3 = ok(api.post("/v1/claim", {"scope": "orders", "key": "k3",
                                       "lease_seconds": 1}))["lease_token"]
    ok(api.post("/v1/claim", {"scope": "orders", "key": "k4", "lease_seconds": 1,
                              "on_stale": "retry"}))
    clock.advance(5)  # k3's lease runs out: the next claim takes it over
    ok(api.post("/v1/claim", {"scope": "orders", "key": "k3"}), 409)  # needs reconciliation
    ok(api.post("/v1/claim", {"scope": "orders", "key": "k4", "on_stale": "retry"}))
    ok(api.post("/v1/complete", {"scope": "orders", "key": "k3", "lease_token": lease3,
                                 "state": "failed"}), 200, 409, 410)
    items = [{"key": f"b{i}", "payload": {"i": i}} for i in range(3)] + [{"key": "k1"}]
    ok(api.post("/v1/claim/batch", {"scope": "orders", "items": items}))
    ok(api.post("/v1/claim/batch", {"scope": "orders", "items": items}))  # the repeats
    ok(api.get("/v1/keys", **ref))
    ok(api.get("/v1/whoami"))
    reviews = ok(op.get("/v1/reviews"))["reviews"]
    for review in reviews[:1]:
        ok(op.post("/v1/resolve", {"scope": review["scope"], "key": review["key"],
                                   "action": "dismiss"}), 200, 409)
    ok(op.post("/v1/expire", {"scope": "orders", "key": "k1"}))  # finished: expired now
    ok(op.get("/v1/report", date="2026-01-01"))

    sink = Sink(lambda n, r: 500 if n == 0 else 200)
    try:
        source = ok(op.post("/v1/sources", {"name": "shop", "provider": "testing",
                                            "secrets": [SECRET],
                                            "destination": {"url": sink.url}}), 201)["source"]
        ok(op.get("/v1/sources"))
        ok(op.get("/v1/sources/shop"))
        auth = {"Authorization": f"Bearer {operator}"}
        r = op.client.patch("/v1/sources/shop", json={"max_in_flight": 4}, headers=auth)
        assert r.status_code == 200, r.data
        path = "/hooks/" + source["ingest_url"].rsplit("/", 1)[1]
        body = b'{"id": "evt_1"}'
        for _ in range(2):  # accepted, then a duplicate
            r = op.client.post(path, data=body, headers=signed(body, "evt_1"))
            assert r.status_code in (200, 202), r.data
        forwarding = app.extensions["keystore"].gateway.forwarding
        for _ in range(2):  # a 500 (retry later), then delivered
            for job in forwarding.take("routing-test", 8):
                forwarding.settle(job, "routing-test", forwarding.forward(job))
            clock.advance(3600)
        ok(op.get("/v1/deliveries", event_id="evt_1"))
        ok(op.post("/v1/deliveries/redeliver", {"source": "shop", "event_id": "evt_1",
                                                "force": True}), 202)
        ok(op.post("/v1/sources/shop/resume", {}), 200, 409)
        _alerts_and_bulk(op, auth, sink.url)
        assert op.client.delete("/v1/sources/shop", headers=auth).status_code in (200, 204)
    finally:
        sink.close()


def _alerts_and_bulk(op, auth, url) -> None:
    """Issue 27's requests: a channel made, listed, changed, tested and deleted; a bulk dry
    run, and a job run to its end by its runner (a thread of the app), shown and cancelled;
    the issues listed."""
    def ok(answer, *statuses):
        assert answer[0] in statuses, answer
        return answer[1]

    ok(op.post("/v1/alert-channels", {"name": "ops", "kind": "webhook", "url": url}), 201)
    ok(op.get("/v1/alert-channels"), 200)
    ok(op.get("/v1/alert-channels/ops"), 200)
    r = op.client.patch("/v1/alert-channels/ops", json={"remind_after_seconds": 60},
                        headers=auth)
    assert r.status_code == 200, r.data
    ok(op.post("/v1/alert-channels/ops/test"), 202)
    ok(op.get("/v1/issues"), 200)
    dry = {"action": "redeliver", "filter": {"source": "shop"}, "dry_run": True}
    assert ok(op.post("/v1/deliveries/bulk", dry), 200)["matched"] == 1
    job = ok(op.post("/v1/deliveries/bulk", {"action": "redeliver", "force": True,
                                             "filter": {"source": "shop"}}), 202)["job"]
    deadline = time.monotonic() + 20
    while job["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
        job = ok(op.get(f"/v1/jobs/{job['id']}"), 200)["job"]
    assert job["state"] == "done", job
    ok(op.post(f"/v1/jobs/{job['id']}/cancel", {}), 409)  # finished: nothing to cancel
    assert op.client.delete("/v1/alert-channels/ops", headers=auth).status_code == 200


def test_unrouted_finds_what_a_shard_router_cannot_route():
    assert unrouted("SELECT * FROM records WHERE records.tenant_id = %(t)s AND key = %(k)s") \
        == set()
    assert unrouted("UPDATE records SET state = 'x' WHERE records.id = %(id)s") == {"records"}
    assert unrouted("INSERT INTO reviews (tenant_id, scope) VALUES (%(t)s, %(s)s)") == set()
    assert unrouted("DELETE FROM hook_events WHERE hook_events.id = %(id)s") == {"hook_events"}
    assert unrouted("SELECT value FROM service_secrets WHERE name = %(n)s") == set()
    assert unrouted("SELECT 1 FROM reviews JOIN records ON records.tenant_id = "
                    "reviews.tenant_id WHERE reviews.id = %(id)s") == {"records", "reviews"}
    assert unrouted("SELECT 1 FROM records WHERE tenant_id = ANY(%(t)s) AND id = 1") == set()
    assert unrouted("UPDATE records SET n = 1 FROM (SELECT id FROM records WHERE tenant_id "
                    "= :t) AS f WHERE records.id = f.id") == set()  # found in the statement


def test_the_named_tables_are_the_schema():
    """A new table must say which it is: a tenant's (tenant_id), a tenant's without the
    column (named, with its parent), or shared."""
    assert set(metadata.tables) == TENANTS | set(WITHOUT_COLUMN) | (SHARED - {"alembic_version"})
    assert not TENANTS & (set(WITHOUT_COLUMN) | SHARED)


def test_every_compiled_statement_routes_by_tenant_or_is_named(served):
    _app, _clock, _capture, compiled = served
    found = {name for name, texts in compiled.items() if any(unrouted(t) for t in texts)}
    bad = sorted(n for n in found - set(GAPS) if not _exempt(n))
    assert bad == [], f"statements on a tenant's table without a tenant_id filter: {bad}"
    assert sorted(set(GAPS) - found) == [], "these filter by tenant_id now: take them off GAPS"
    stale = [n for n in {**MAINTENANCE, **FINDS_TENANT} if not any(
        f == n or (n.endswith(".*") and f.startswith(n[:-1])) for f in found)]
    assert stale == [], f"named as exempt, yet none of their statements spans tenants: {stale}"
    assert len(compiled) > 60  # the stores were all found


def test_every_statement_a_request_runs_routes_by_tenant_or_is_named(served):
    app, clock, capture, _compiled = served
    drive(app, clock)
    bad = {name: next(t for t in texts if unrouted(t)) for name, texts in capture.seen.items()
           if any(unrouted(t) for t in texts) and name not in GAPS and not _exempt(name)}
    assert sorted(bad) == [], ("request statements on a tenant's table without a tenant_id "
                               f"filter: {bad}")
    ran = set(capture.seen)
    for name in ("records.py:claim_many", "records.py:_cas_and_history", "RecordStore._get",
                 "BatchSql.insert", "ReviewStore._open", "reviews.py:page",
                 "HookStore._claim_and_add", "HookStore._settled", "SourceStore._by_ingest",
                 "Accounts._by_hash", "AlertStore._add", "AlertStore._of_tenant",
                 "BulkStore._claim", "BulkStore._next", "BulkStore._finish"):
        assert name in ran, f"{name} did not run: drive() no longer covers it: {sorted(ran)}"
