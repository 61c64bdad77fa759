"""The seeds' failure windows of a send (issue 28, "Tests and figures"), each against a real
`keystore serve`, its sender in a `keystore relay` process, and the scripted invoices API on
loopback (tests/support/downstream.py): the answer lost after the API committed, a timeout
after the API created the invoice (with and without an idempotency header, with and without a
check), 503 then success, a permanent 422, ten concurrent sends of one key, the relay
SIGKILLed between the API's answer and the record, and PostgreSQL restarted mid-send.

Every case counts the invoices the API created for the send's reference: exactly one, with
the record succeeded (its resource id the invoice's) or in review, or none and a review or
the API's own refusal; never two. The figures of every window go to
test-artifacts/faults/send_windows_<backend>.json (the closing note's counts).
"""
from __future__ import annotations

import threading

import pytest

from keystore_service.storage import migrate
from tests.faults.harness import report
from tests.faults.send_windows_support import (
    STALL_SECONDS,
    exactly_once_or_review,
    figures,
    said,
    start_stack,
)
from tests.support.downstream import Downstream, answer, drop, hold, stall

pytestmark = [pytest.mark.faults, pytest.mark.slow]
DEDUPE = "Idempotency-Key"
TALLY: dict[str, dict] = {}


@pytest.fixture
def stack(database_url, tmp_path):
    s = start_stack(database_url, tmp_path)
    yield s
    s.stop()


@pytest.fixture(scope="module", autouse=True)
def written():
    yield
    for backend in ("sqlite", "postgres"):
        mine = {k.split("/", 1)[1]: v for k, v in TALLY.items() if k.startswith(backend + "/")}
        if mine:
            report(f"send_windows_{backend}", mine)


def tally(backend: str, name: str, got: dict) -> dict:
    TALLY[f"{backend}/{name}"] = got
    assert exactly_once_or_review(got), got
    return got


def test_the_answer_lost_after_the_commit_is_replayed_by_a_retry_with_the_same_key(
        stack, backend):
    with Downstream(dedupe_header=DEDUPE) as api:
        api.script(drop(), n=1)
        name = stack.connect(api)
        status, body, _ = stack.send(name, "lost-1", wait=20)
        record = stack.settled("lost-1")
        got = tally(backend, "answer_lost_dedupe", figures(api, "lost-1", record,
                                                           [said(status, body)]))
    assert (status, body["outcome"]) == (201, "sent"), body
    assert got["invoices"] == 1 and got["posts"] == 2 and got["post_keys"] == ["invoice:lost-1"]
    assert (got["state"], got["resource_id"]) == ("succeeded", "in_1")


def test_the_answer_lost_after_the_commit_is_settled_by_the_check(stack, backend):
    with Downstream() as api:
        api.script(drop(), n=1)
        name = stack.connect(api, check=True)
        status, body, _ = stack.send(name, "lost-2", wait=20)
        record = stack.settled("lost-2")
        got = tally(backend, "answer_lost_check", figures(api, "lost-2", record,
                                                          [said(status, body)]))
    assert got["invoices"] == 1 and got["posts"] == 1 and got["checks"] >= 1  # no blind retry
    assert (got["state"], got["resource_id"]) == ("succeeded", "in_1"), body


@pytest.mark.parametrize("dedupe,check", [(True, False), (True, True), (False, True),
                                          (False, False)],
                         ids=["header", "header+check", "check", "neither"])
def test_a_timeout_after_the_api_created_the_invoice(stack, backend, dedupe, check):
    with Downstream(dedupe_header=DEDUPE if dedupe else None) as api:
        api.script(stall(STALL_SECONDS), n=1)
        name = stack.connect(api, check=check)
        key = f"timeout-{int(dedupe)}{int(check)}"
        status, body, _ = stack.send(name, key, wait=25)
        record = stack.settled(key)
        got = tally(backend, f"timeout_{'header' if dedupe else 'no_header'}_"
                    f"{'check' if check else 'no_check'}",
                    figures(api, key, record, [said(status, body)]))
    assert got["invoices"] == 1
    if dedupe:  # retried with the same key (409 while the first runs, then its replay)
        assert got["posts"] >= 2 and got["post_keys"] == [f"invoice:{key}"]
        assert got["checks"] == 0  # with an idempotency header the check is not needed
        assert (got["state"], got["resource_id"]) == ("succeeded", "in_1")
    elif check:  # asked, not sent again
        assert got["posts"] == 1 and got["checks"] >= 1
        assert (got["state"], got["resource_id"]) == ("succeeded", "in_1")
    else:  # never a blind retry: a person decides, told what happened
        assert got["posts"] == 1 and got["checks"] == 0
        assert (got["state"], got["review"]) == ("needs_reconciliation", "send_unknown")
        assert got["answers"] == ["409 needs_reconciliation"]  # as a claim's would be


def test_503_then_success(stack, backend):
    with Downstream() as api:
        api.script(answer(503), n=1)
        name = stack.connect(api)
        status, body, _ = stack.send(name, "busy-1", wait=25)
        record = stack.settled("busy-1")
        got = tally(backend, "503_then_success", figures(api, "busy-1", record,
                                                         [said(status, body)]))
    assert (status, body["outcome"]) == (201, "sent"), body
    assert got["invoices"] == 1 and got["posts"] == 2
    assert (got["state"], got["resource_id"]) == ("succeeded", "in_1")


def test_a_permanent_422_fails_and_is_never_sent_again(stack, backend):
    with Downstream(dedupe_header=DEDUPE) as api:
        api.script(answer(422), key="invoice:refused-1")
        name = stack.connect(api)
        first = stack.send(name, "refused-1", wait=20)
        again = stack.send(name, "refused-1", wait=20)
        record = stack.settled("refused-1")
        got = tally(backend, "permanent_422", figures(api, "refused-1", record,
                                                      [said(*first[:2]), said(*again[:2])]))
    assert (first[0], first[1]["outcome"], first[1]["result"]["status_code"]) == (
        200, "failed", 422), first[1]
    assert (again[0], again[1]["outcome"], again[2].get("Idempotent-Replayed")) == (
        200, "replay", "true"), again[1]
    assert got["invoices"] == 0 and got["posts"] == 1 and got["state"] == "failed"


def test_ten_concurrent_sends_of_one_key_make_one_request(stack, backend):
    with Downstream(dedupe_header=None) as api:  # no dedupe: a second request would show
        api.script(stall(0.5), n=1)  # the first is in flight while the others arrive
        name = stack.connect(api)
        answers: list = []
        gate = threading.Barrier(10)

        def one() -> None:
            gate.wait(10)
            status, body, _ = stack.send(name, "race-1", wait=10)
            answers.append(said(status, body))
        threads = [threading.Thread(target=one) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        record = stack.settled("race-1")
        got = tally(backend, "ten_concurrent", figures(api, "race-1", record,
                                                       sorted(answers)))
    assert len(answers) == 10
    assert got["invoices"] == 1 and got["posts"] == 1 and got["state"] == "succeeded"
    # The one that took the key waits for the API's answer if it found a seat (201 sent); ten
    # callers of one token share four seats (docs/api.md, "Limits"), so the taker may be one
    # without: it is answered at once (202 accepted) and the send goes on without it.
    takers = [a for a in answers if a in ("201 sent", "202 accepted")]
    assert len(takers) == 1, answers
    assert set(answers) <= {"201 sent", "202 accepted", "200 replay", "409 in_progress"}, answers


@pytest.mark.parametrize("dedupe", [True, False], ids=["header", "check"])
def test_the_relay_killed_between_the_apis_answer_and_the_record(stack, backend, dedupe):
    with Downstream(dedupe_header=DEDUPE if dedupe else None) as api:
        api.script(hold(), n=1)
        name = stack.connect(api, check=not dedupe)
        status, body, _ = stack.send(name, "killed-1", wait=0)
        assert api.held.wait(30), "the send did not reach the API"
        stack.relay.kill()  # the invoice exists; the relay dies before it hears so
        api.release()  # the answer goes to a dead socket
        stack.relay.start()
        record = stack.settled("killed-1")
        got = tally(backend, f"relay_killed_{'header' if dedupe else 'check'}",
                    figures(api, "killed-1", record, [said(status, body)]))
    assert status == 202 and got["invoices"] == 1
    assert (got["state"], got["resource_id"]) == ("succeeded", "in_1")
    if dedupe:  # the retry carried the same key, and the API replayed its invoice
        assert got["posts"] == 2 and got["post_keys"] == ["invoice:killed-1"]
    else:  # the check found it: not sent again
        assert got["posts"] == 1 and got["checks"] >= 1


def test_a_postgresql_restart_mid_send(private_pg, tmp_path):
    url = private_pg.url
    migrate.upgrade(url)
    stack = start_stack(url, tmp_path)
    try:
        with Downstream(dedupe_header=DEDUPE) as api:
            api.script(hold(), n=1)
            name = stack.connect(api)
            status, body, _ = stack.send(name, "restart-1", wait=0)
            assert api.held.wait(30), "the send did not reach the API"
            private_pg.stop_immediately()
            api.release()  # the API answers 201 while the database is down
            private_pg.start()
            record = stack.settled("restart-1")
            got = figures(api, "restart-1", record, [said(status, body)])
            TALLY["postgres/postgresql_restart"] = got
    finally:
        stack.stop()
    assert exactly_once_or_review(got), got
    assert got["invoices"] == 1 and got["post_keys"] == ["invoice:restart-1"]
    assert (got["state"], got["resource_id"]) == ("succeeded", "in_1")
