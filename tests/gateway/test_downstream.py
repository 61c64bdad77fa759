"""The scripted downstream API (tests/support/downstream.py) does what the failure-window
tests take it to do: it creates, dedupes and replays as Stripe does, and each fault leaves
the client in the window it names, with the invoices counted. Real HTTP on loopback."""
from __future__ import annotations

import http.client
import json
import threading
import time

import pytest

from tests.support.downstream import Downstream, answer, drop, hold, refuse, stall


@pytest.fixture
def api():
    with Downstream() as d:
        yield d


@pytest.fixture
def deduping():
    with Downstream(dedupe_header="Idempotency-Key") as d:
        yield d


def post(d: Downstream, body: dict, key=None, timeout: float = 5, path="/invoices"):
    """(status, answer, headers) of one POST; the exception's type name if there was none."""
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=timeout)
    headers = {"Content-Type": "application/json", **({"Idempotency-Key": key} if key else {})}
    try:
        conn.request("POST", path, json.dumps(body), headers)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read()), dict(resp.getheaders())
    except (OSError, http.client.HTTPException) as exc:
        return type(exc).__name__, None, {}
    finally:
        conn.close()


def get(d: Downstream, path: str):
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def test_creates_and_finds_by_reference_and_by_id(api):
    status, body, _ = post(api, {"reference": "acme:k1", "amount": 1250})
    assert (status, body) == (201, {"reference": "acme:k1", "amount": 1250,
                                    "id": "in_1", "object": "invoice"})
    post(api, {"reference": "acme:k2"}, path="/api/v2/invoices")  # a base URL's path
    assert get(api, "/invoices?reference=acme%3Ak1") == (200, {"data": [body]})
    assert get(api, "/invoices?reference=acme:nothing") == (200, {"data": []})
    assert get(api, "/invoices/in_1") == (200, body)
    assert get(api, "/invoices/in_9")[0] == 404
    assert post(api, {}, path="/elsewhere")[0] == 404
    assert api.created() == 2 and api.keys() == {"acme:k1": 1, "acme:k2": 1}
    assert api.requests(method="GET") == 4


def test_without_dedupe_every_post_creates(api):
    for _ in range(3):
        assert post(api, {"reference": "r"}, key="same")[0] == 201
    assert api.created("same") == 3 and api.requests("same") == 3


def test_dedupe_replays_the_first_answer_and_refuses_another_body(deduping):
    first = post(deduping, {"amount": 1}, key="acme:k1")
    again = post(deduping, {"amount": 1}, key="acme:k1")
    assert first[0] == again[0] == 201 and first[1] == again[1]
    assert again[2].get("Idempotent-Replayed") == "true"
    assert post(deduping, {"amount": 2}, key="acme:k1")[0] == 400
    assert post(deduping, {"amount": 1}, key="acme:k2")[1]["id"] == "in_2"
    assert deduping.created("acme:k1") == 1 and deduping.requests("acme:k1") == 3
    assert [s.outcome for s in deduping.requests_seen("acme:k1")] == [
        "created", "replayed", "mismatch"]


def test_scripted_statuses_by_number_and_by_key(api):
    api.script(answer(503), n=1)
    api.script([answer(422), None], key="k2")
    api.script(answer(500, create=True), n=4)
    assert post(api, {"reference": "k1"})[0] == 503
    assert post(api, {"reference": "k1"})[0] == 201
    assert post(api, {}, key="k2")[0] == 422
    assert post(api, {}, key="k2")[0] == 500  # request 4: created, then 500
    assert post(api, {}, key="k2")[0] == 201
    assert api.created("k1") == 1 and api.created("k2") == 2 and api.requests() == 5


def test_drop_creates_and_answers_nothing_then_a_deduped_retry_replays(deduping):
    deduping.script(drop(), n=1)
    assert post(deduping, {"a": 1}, key="k")[0] in {"RemoteDisconnected", "ConnectionResetError"}
    assert deduping.created("k") == 1
    status, body, headers = post(deduping, {"a": 1}, key="k")
    assert (status, body["id"], headers.get("Idempotent-Replayed")) == (201, "in_1", "true")
    assert deduping.created() == 1


def test_stall_creates_and_answers_after_the_clients_timeout(deduping):
    deduping.script(stall(1.5), n=1)
    started = time.monotonic()
    assert post(deduping, {"a": 1}, key="k", timeout=0.3)[0] in {"TimeoutError", "timeout"}
    assert time.monotonic() - started < 1.0 and deduping.created("k") == 1
    assert post(deduping, {"a": 1}, key="k")[0] == 409  # the first still runs
    time.sleep(1.5)
    assert post(deduping, {"a": 1}, key="k")[1]["id"] == "in_1"  # now kept, replayed
    assert deduping.created() == 1


def test_hold_waits_for_release_and_close_wakes_it(api):
    api.script(hold(), n=1)
    got = []
    asking = threading.Thread(target=lambda: got.append(post(api, {"a": 1}, timeout=10)))
    asking.start()
    assert api.held.wait(5) and api.created() == 1 and not got
    api.release()
    asking.join(5)
    assert got[0][0] == 201
    api.script(hold(), n=2)
    asking = threading.Thread(target=lambda: got.append(post(api, {"a": 1}, timeout=10)),
                              daemon=True)
    asking.start()
    api.held.clear()
    api.close()  # bounded, with a request held: it wakes it
    asking.join(5)
    assert not asking.is_alive()


def test_refuse_resets_without_creating_and_down_refuses_connections(api):
    api.script(refuse(), n=1)
    assert post(api, {"a": 1})[0] in {"ConnectionResetError", "RemoteDisconnected",
                                      "BrokenPipeError"}
    assert api.created() == 0 and api.requests() == 1
    api.down()
    assert post(api, {"a": 1})[0] == "ConnectionRefusedError"
    api.up()
    assert post(api, {"a": 1})[0] == 201 and api.requests() == 2


def test_concurrent_requests_are_counted_once_each(deduping):
    threads = [threading.Thread(target=post, args=(deduping, {"a": 1}, "k"))
               for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert deduping.requests("k") == 10 and deduping.created("k") == 1
    assert deduping.keys() == {"k": 1}


def test_a_stalled_check_and_a_failing_one(api):
    post(api, {"reference": "r"})
    api.script(answer(500), n=1, method="GET")
    api.script(stall(0.5), key="r", method="GET")
    assert get(api, "/invoices?reference=r")[0] == 500
    started = time.monotonic()
    assert get(api, "/invoices?reference=r")[1]["data"][0]["id"] == "in_1"
    assert time.monotonic() - started >= 0.5
