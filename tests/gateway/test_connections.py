"""Connections and scopes' settlements through the API (issue 28, both backends): create,
list, show, change and delete a connection; its header values in no answer, no log line
and no column but the sealed one; a base URL under the destination rules (every spelling
test_destination_rules refuses for a source); bad headers, rates, checks, pointers and
paths each 400 with nothing changed; a connection with live sends cannot be deleted; a
scope's settlement names one of the tenant's own connections and goes with it."""
from __future__ import annotations

import logging
import threading

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import insert, select, update

from keystore_service import errors
from keystore_service.gateway.connections import ConnectionBroken
from keystore_service.storage.send_tables import connections, sends
from keystore_service.storage.tables import records

from .support import SPELLINGS

SECRET = "sk_live_Zq81nUfVb0"  # a header value: in no answer, no log, no plain column
CHECK = {"method": "GET", "path": "/invoices?reference={reference}",
         "found": {"pointer": "/data/0"}, "resource_id": "/data/0/id", "absent": "/data"}
BASE = "http://127.0.0.1:9/api/v1"


def body(**over):
    return {"name": "billing", "base_url": BASE,
            "headers": {"Authorization": f"Bearer {SECRET}", "X-Tenant": "t1"},
            "idempotency_header": "Idempotency-Key", **over}


def call(gw, method, path, json=None, token=...):
    r = getattr(gw.client, method)(path, json=json, headers=gw._auth(token))
    return r.status_code, r.get_json(silent=True), r.get_data(as_text=True)


def rows(gw_app):
    with gw_app.extensions["keystore"].database.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(connections).order_by(connections.c.id))]


def test_create_list_show_change_delete(gw):
    status, made, _ = call(gw, "post", "/v1/connections", body(rate={"per_second": 5},
                                                               check=CHECK))
    assert status == 201, made
    c = made["connection"]
    assert c["name"] == "billing" and c["base_url"] == BASE
    assert c["headers"] == ["Authorization", "X-Tenant"]
    assert c["idempotency_header"] == "Idempotency-Key"
    assert (c["timeout_seconds"], c["retry_window_seconds"], c["max_in_flight"]) == \
        (10, 86_400, 4)
    assert c["rate"] == {"per_second": 5} and c["check"] == CHECK
    assert c["created_at"].endswith("Z")
    assert call(gw, "get", "/v1/connections")[1] == {"connections": [c]}
    assert call(gw, "get", "/v1/connections/billing")[1] == {"connection": c}

    status, changed, _ = call(gw, "patch", "/v1/connections/billing", {
        "timeout_seconds": 3, "rate": None, "check": None, "idempotency_header": None,
        "max_in_flight": None, "headers": {"X-Api-Key": "k2"}})
    assert status == 200, changed
    c2 = changed["connection"]
    assert (c2["timeout_seconds"], c2["rate"], c2["check"], c2["idempotency_header"]) == \
        (3, None, None, None)
    assert c2["max_in_flight"] == 4  # null leaves a field that cannot be none as it is
    assert c2["headers"] == ["X-Api-Key"] and c2["base_url"] == BASE

    status, gone, _ = call(gw, "delete", "/v1/connections/billing")
    assert status == 200 and gone["connection"]["name"] == "billing"
    assert call(gw, "get", "/v1/connections/billing")[0] == 404
    assert call(gw, "get", "/v1/connections")[1] == {"connections": []}
    assert call(gw, "post", "/v1/connections", body())[0] == 201  # the name is free again


def test_header_values_are_in_no_answer_no_log_and_only_sealed(gw, gw_app, caplog):
    caplog.set_level(logging.DEBUG)
    answers = [call(gw, "post", "/v1/connections", body())[2],
               call(gw, "get", "/v1/connections")[2],
               call(gw, "get", "/v1/connections/billing")[2],
               call(gw, "patch", "/v1/connections/billing",
                    {"headers": {"Authorization": f"Bearer {SECRET}2"}})[2],
               call(gw, "post", "/v1/connections", body())[2],  # the taken name's 400
               call(gw, "post", "/v1/connections", body(
                   name="other", headers={"Authorization": f"{SECRET}\r\nX: y"}))[2],
               call(gw, "put", "/v1/scopes/orders/settlement", {
                   "connection": "billing", "check": CHECK, "on_absent": "review"})[2],
               call(gw, "delete", "/v1/connections/billing")[2]]
    assert all(SECRET not in a for a in answers)
    assert SECRET not in caplog.text
    conns = gw_app.extensions["keystore"].gateway.connections
    call(gw, "post", "/v1/connections", body())
    (row,) = rows(gw_app)
    assert not any(SECRET in str(v) for v in row)
    (made,) = conns.list(row[1])
    assert conns.headers(made) == {"Authorization": f"Bearer {SECRET}", "X-Tenant": "t1"}


@pytest.mark.parametrize("url", SPELLINGS)
def test_a_refused_base_url_is_400_at_create_and_patch(gw, gw_app, url):
    url = url.format(port="9")
    status, answer, _ = call(gw, "post", "/v1/connections", body(base_url=url))
    assert status == 400, answer
    assert answer["error"]["code"] == "invalid_request"
    assert answer["error"]["details"] == {"field": "base_url"}
    assert rows(gw_app) == []
    call(gw, "post", "/v1/connections", body())
    before = rows(gw_app)
    status, answer, _ = call(gw, "patch", "/v1/connections/billing", {"base_url": url})
    assert status == 400 and answer["error"]["details"] == {"field": "base_url"}
    assert rows(gw_app) == before


BAD = [
    # base URLs the schema or the rules refuse
    {"base_url": "ftp://127.0.0.1/"}, {"base_url": "http://user:pw@127.0.0.1/"},
    {"base_url": "http://127.0.0.1/a#frag"}, {"base_url": ""},
    # headers
    {"headers": {"Host": "x"}}, {"headers": {"content-length": "1"}},
    {"headers": {"Transfer-Encoding": "chunked"}}, {"headers": {"CONNECTION": "close"}},
    {"headers": {"idempotency-key": "x"}},  # the idempotency header itself, in any case
    {"headers": {"X-A": "1", "x-a": "2"}}, {"headers": {"X-A": "a\r\nX-Evil: 1"}},
    {"headers": {"X-A": "a\nb"}}, {"headers": {"X-A": "\x00"}}, {"headers": {"X-A": "\x85"}},
    {"headers": {"Bad Name": "1"}}, {"headers": {"": "1"}}, {"headers": {"X-A": "v" * 4097}},
    {"headers": {f"X-{i}": "1" for i in range(33)}}, {"headers": ["Authorization"]},
    {"idempotency_header": "Host"}, {"idempotency_header": "Idempotency Key"},
    {"idempotency_header": "x" * 65},
    # numbers
    {"timeout_seconds": 0}, {"timeout_seconds": 61}, {"timeout_seconds": "10"},
    {"retry_window_seconds": 9}, {"max_in_flight": 0}, {"max_in_flight": 257},
    # rates
    {"rate": {}}, {"rate": {"per_second": 0}}, {"rate": {"per_minute": 10_001}},
    {"rate": {"per_second": 1, "per_minute": 1}}, {"rate": {"per_hour": 1}},
    {"rate": {"per_second": True}}, {"rate": {"per_second": 1.5}}, {"rate": 5},
    # checks
    {"check": {**CHECK, "method": "POST"}}, {"check": {**CHECK, "path": "invoices"}},
    {"check": {**CHECK, "path": "//evil.example/x"}}, {"check": {**CHECK, "path": "/a/../b"}},
    {"check": {**CHECK, "path": "/a/%2e%2E/b"}}, {"check": {**CHECK, "path": "/a%2Fb"}},
    {"check": {**CHECK, "path": "/a/./b"}}, {"check": {**CHECK, "path": "/a\\b"}},
    {"check": {**CHECK, "path": "/a b"}}, {"check": {**CHECK, "path": "/a\r\n"}},
    {"check": {**CHECK, "path": "/a#b"}}, {"check": {**CHECK, "path": "/{id}"}},
    {"check": {**CHECK, "path": "/{key"}}, {"check": {**CHECK, "path": "/" + "a" * 2048}},
    {"check": {**CHECK, "path": "https://x/"}},
    {"check": {**CHECK, "absent_status": [404]}},  # both ways of telling absence
    {"check": {k: v for k, v in CHECK.items() if k != "absent"}},  # neither
    {"check": {**CHECK, "absent": None, "absent_status": [200]}},
    {"check": {**CHECK, "absent": None, "absent_status": []}},
    {"check": {k: v for k, v in CHECK.items() if k != "found"}},
    {"check": {**CHECK, "extra": 1}},
    # pointers
    {"check": {**CHECK, "found": {"pointer": "data"}}},
    {"check": {**CHECK, "found": {"pointer": "/a~2"}}},
    {"check": {**CHECK, "found": {"pointer": "/" + "a" * 256}}},
    {"check": {**CHECK, "resource_id": "id"}}, {"check": {**CHECK, "absent": "/a~"}},
    {"check": {**CHECK, "found": {"pointer": "/a\x01"}}},
]


@pytest.mark.parametrize("bad", BAD)
def test_bad_input_is_400_and_changes_nothing(gw, gw_app, bad):
    status, answer, _ = call(gw, "post", "/v1/connections", body(**bad))
    assert status == 400, answer
    assert answer["error"]["code"] == "invalid_request"
    assert rows(gw_app) == []
    assert call(gw, "post", "/v1/connections", body())[0] == 201
    before = rows(gw_app)
    status, answer, _ = call(gw, "patch", "/v1/connections/billing", bad)
    assert status == 400, answer
    assert rows(gw_app) == before


@pytest.mark.parametrize("name,ok", [("a", True), ("a" * 64, True), ("a-b_9", True),
                                     ("a" * 65, False), ("", False), ("Billing", False),
                                     ("a.b", False), ("é", False), ("a\x00", False),
                                     (7, False)])
def test_name_edges(gw, gw_app, name, ok):
    status, answer, _ = call(gw, "post", "/v1/connections", body(name=name))
    assert status == (201 if ok else 400), answer
    assert len(rows(gw_app)) == (1 if ok else 0)
    if ok:
        assert call(gw, "get", f"/v1/connections/{name}")[1]["connection"]["name"] == name
        assert call(gw, "post", "/v1/connections", body(name=name))[0] == 400  # taken


@pytest.mark.parametrize("name", ["nope", "a" * 65, "%00", "A", "..", "a%2Fb"])
def test_unknown_names_are_404(gw, name):
    call(gw, "post", "/v1/connections", body())
    for method, json in (("get", None), ("patch", {"timeout_seconds": 5}), ("delete", None)):
        status, answer, _ = call(gw, method, f"/v1/connections/{name}", json)
        assert status == 404 and answer["error"]["code"] == "not_found"


def test_the_name_does_not_change_and_a_client_may_not_manage(gw, op):
    call(gw, "post", "/v1/connections", body())
    assert call(gw, "patch", "/v1/connections/billing", {"name": "x"})[0] == 400
    for method, path, json in (("post", "/v1/connections", body(name="c2")),
                               ("get", "/v1/connections", None),
                               ("get", "/v1/connections/billing", None),
                               ("delete", "/v1/connections/billing", None),
                               ("get", "/v1/scopes/orders/settlement", None)):
        status, answer, _ = call(gw, method, path, json, token=op["client"])
        assert status == 403 and answer["error"]["code"] == "forbidden"
    assert call(gw, "get", "/v1/connections/billing")[0] == 200


def _live_send(gw_app, connection_name: str) -> int:
    """A real record and a queued send of it on the connection (as POST /v1/send writes)."""
    with gw_app.extensions["keystore"].database.engine.begin() as conn:
        c = conn.execute(select(connections).where(
            connections.c.name == connection_name)).one()
        tenant_id = c.tenant_id
        record_id = conn.execute(insert(records).values(
            tenant_id=tenant_id, scope="orders", key="k1", state="in_progress",
            fingerprint="f", attempt=1, incarnation=1, lease_token_hash="h",
            lease_acquired_at=1, lease_expires_at=2, on_stale="reconcile", first_seen_at=1,
            last_seen_at=1, expires_at=10 ** 15, duplicate_count=0)
            .returning(records.c.id)).scalar_one()
        return conn.execute(insert(sends).values(
            tenant_id=tenant_id, connection_id=c.id, connection_name=c.name,
            record_id=record_id, incarnation=1, reference="orders:k1", method="POST",
            path="/invoices", sealed="x", state="queued", attempts=0, unknown=0,
            check_tries=0, created_at=1, window_end=10 ** 15, next_attempt_at=1)
            .returning(sends.c.id)).scalar_one()


@pytest.mark.parametrize("state,live", [("queued", True), ("sending", True),
                                        ("checking", True), ("succeeded", False),
                                        ("failed", False), ("unresolved", False)])
def test_a_connection_with_live_sends_cannot_be_deleted(gw, gw_app, state, live):
    call(gw, "post", "/v1/connections", body())
    send_id = _live_send(gw_app, "billing")
    with gw_app.extensions["keystore"].database.engine.begin() as conn:
        conn.execute(update(sends).where(sends.c.id == send_id).values(state=state))
    status, answer, _ = call(gw, "delete", "/v1/connections/billing")
    if live:
        assert status == 409, answer
        assert answer["error"]["code"] == "in_progress"
        assert answer["error"]["details"] == {"sends": 1}
        assert call(gw, "get", "/v1/connections/billing")[0] == 200
    else:
        assert status == 200, answer
        assert call(gw, "get", "/v1/connections/billing")[0] == 404
        with gw_app.extensions["keystore"].database.engine.connect() as conn:
            assert conn.execute(select(sends.c.connection_id)).scalar_one() is None


def test_a_scope_settlement_is_put_shown_replaced_and_deleted(gw):
    call(gw, "post", "/v1/connections", body())
    url = "/v1/scopes/orders.v2:eu/settlement"
    assert call(gw, "get", url)[0] == 404
    status, put, _ = call(gw, "put", url, {"connection": "billing", "check": CHECK,
                                           "on_absent": "release"})
    assert status == 200, put
    s = put["settlement"]
    assert (s["scope"], s["connection"], s["check"], s["on_absent"]) == \
        ("orders.v2:eu", "billing", CHECK, "release")
    assert call(gw, "get", url)[1] == put
    other = {**CHECK, "absent": None, "absent_status": [404, 410],
             "found": {"pointer": "/status", "equals": "paid"}}
    status, again, _ = call(gw, "put", url, {"connection": "billing", "check": other,
                                             "on_absent": "review"})
    assert status == 200 and again["settlement"]["on_absent"] == "review"
    assert again["settlement"]["check"] == {
        "method": "GET", "path": CHECK["path"], "found": {"pointer": "/status",
                                                          "equals": "paid"},
        "resource_id": "/data/0/id", "absent_status": [404, 410]}
    assert again["settlement"]["created_at"] == s["created_at"]
    status, gone, _ = call(gw, "delete", url)
    assert status == 200 and gone["settlement"]["on_absent"] == "review"
    assert call(gw, "get", url)[0] == 404
    assert call(gw, "delete", url)[0] == 404


@pytest.mark.parametrize("scope,put,field", [
    ("hook:shop", {"connection": "billing", "check": CHECK, "on_absent": "release"},
     "scope"),
    ("orders", {"connection": "nope", "check": CHECK, "on_absent": "release"}, "connection"),
    ("orders", {"connection": "billing", "check": CHECK, "on_absent": "retry"}, None),
    ("orders", {"connection": "billing", "check": {**CHECK, "path": "/../x"},
                "on_absent": "release"}, None),
    ("orders", {"connection": "billing", "on_absent": "release"}, None),
    ("a" * 129, {"connection": "billing", "check": CHECK, "on_absent": "release"}, "scope"),
    ("or ders", {"connection": "billing", "check": CHECK, "on_absent": "release"}, "scope"),
])
def test_a_bad_settlement_is_400_and_puts_nothing(gw, scope, put, field):
    call(gw, "post", "/v1/connections", body())
    status, answer, _ = call(gw, "put", f"/v1/scopes/{scope}/settlement", put)
    assert status == 400, answer
    if field:
        assert answer["error"]["details"]["field"] == field
    assert call(gw, "get", "/v1/scopes/orders/settlement")[0] == 404


def test_a_settlement_goes_with_its_connection(gw):
    call(gw, "post", "/v1/connections", body())
    call(gw, "put", "/v1/scopes/orders/settlement", {"connection": "billing", "check": CHECK,
                                                      "on_absent": "release"})
    assert call(gw, "delete", "/v1/connections/billing")[0] == 200
    assert call(gw, "get", "/v1/scopes/orders/settlement")[0] == 404


def test_the_stores_on_their_own(gw_app, op):
    ks = gw_app.extensions["keystore"]
    conns, tenant_id = ks.gateway.connections, ks.accounts.tenant_id("acme")
    other = ks.accounts.tenant_id("globex")
    made = conns.create(tenant_id, body(check=CHECK))
    assert conns.store.by_id(made.id) == made == conns.store.by_id(made.id, tenant_id=tenant_id)
    assert conns.store.by_id(made.id, tenant_id=other) is None  # another tenant's id: none
    assert conns.store.get(other, "billing") is None and conns.store.list(other) == []
    assert conns.store.update(other, "billing", {"timeout_seconds": 3}, 1) is None
    assert conns.store.delete(other, "billing") is False
    assert conns.store.live_sends(made) == 0
    put = conns.settlements.put(tenant_id, "orders", made.id, CHECK, "review", 5)
    conns.settlements.put(other, "orders", made.id, CHECK, "release", 6)  # its own scope
    again = conns.settlements.put(tenant_id, "orders", made.id, {"x": 1}, "release", 9)
    assert (again.check, again.on_absent, again.created_at, again.updated_at) == \
        ({"x": 1}, "release", put.created_at, 9)
    assert [(s.tenant_id, s.scope) for s in conns.settlements.scopes_with_settlement()] == \
        sorted([(tenant_id, "orders"), (other, "orders")])
    assert conns.settlements.delete(tenant_id, "orders") is True
    assert conns.settlements.delete(tenant_id, "orders") is False
    assert conns.settlements.get(other, "orders").on_absent == "release"


def test_two_creates_of_one_name_make_one(gw_app, op):
    ks = gw_app.extensions["keystore"]
    conns, tenant_id = ks.gateway.connections, ks.accounts.tenant_id("acme")
    barrier, outcomes = threading.Barrier(4), []

    def create(n):
        barrier.wait(10)
        try:
            conns.create(tenant_id, body(timeout_seconds=n + 1))
            outcomes.append("made")
        except errors.InvalidRequest as exc:
            outcomes.append(exc.details["field"])

    threads = [threading.Thread(target=create, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes) == ["made", "name", "name", "name"]
    assert len(conns.list(tenant_id)) == 1


def test_headers_no_key_opens_are_never_sent_without(gw, gw_app):
    call(gw, "post", "/v1/connections", body())
    ks = gw_app.extensions["keystore"]
    with ks.database.engine.begin() as conn:
        conn.execute(update(connections).values(
            sealed=Fernet(Fernet.generate_key()).encrypt(b"{}").decode()))
    conns = ks.gateway.connections
    (broken,) = conns.list(ks.accounts.tenant_id("acme"))
    assert not conns.opens(broken)
    with pytest.raises(ConnectionBroken) as raised:
        conns.headers(broken)
    assert raised.value.status == 503 and raised.value.details["reason"] == "connection_broken"
    status, shown, _ = call(gw, "get", "/v1/connections/billing")  # still shown, by its names
    assert status == 200 and shown["connection"]["headers"] == ["Authorization", "X-Tenant"]
    status, _, _ = call(gw, "patch", "/v1/connections/billing",
                        {"headers": {"Authorization": "Bearer new"}})
    assert status == 200
    (mended,) = conns.list(ks.accounts.tenant_id("acme"))
    assert conns.headers(mended) == {"Authorization": "Bearer new"}
