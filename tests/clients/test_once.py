"""The exactly-once helper against the real service on both backends: concurrency, transient
errors, unknown outcomes (an exception, a SIGKILL of the calling process) and the lease kept
alive in the background. Side effects go to the effect sink, which counts them."""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from keystore_client import InProgress, KeyStore, NeedsReconciliation, OperationFailed

from .conftest import HERE


class SinkBusy(Exception):
    """The downstream said 'try again later' before doing anything: a transient failure."""


def post_effect(sink, effect, body) -> dict:
    r = requests.post(f"{sink.url}/effects/{effect}", json=body, timeout=10)
    if r.status_code in (429, 503):
        raise SinkBusy(r.status_code)
    r.raise_for_status()
    return r.json()


def test_16_concurrent_callers_run_the_body_once_and_the_others_wait_or_try_later(
        service, scope, sink, effect):
    """The service waits for a duplicate (`wait_seconds`) while it has a waiting seat for
    the token (2 per worker here); a duplicate without one is told to try later at once
    (InProgress), and its next call gets the result. Each duplicate's claim is counted once,
    waited or not (the client's old claim / poll / claim-again loop counted every round)."""
    ks = KeyStore(service.url, service.token)
    started = threading.Barrier(16)
    ran = []

    @ks.exactly_once(scope, key=lambda order: f"order-{order}", wait=30)
    def create_invoice(order: int) -> dict:
        ran.append(order)
        time.sleep(0.5)  # long enough that the others arrive while it runs
        return post_effect(sink, effect, {"order": order})

    def caller(_: int):
        started.wait(timeout=30)
        try:
            return create_invoice(7)
        except InProgress as exc:
            return exc

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(caller, range(16)))
    answered = [r for r in results if not isinstance(r, InProgress)]
    assert sink.count(effect) == 1 and ran == [7]
    # the first, and the duplicates that waited; not necessarily any: a duplicate whose claim
    # races the first one's insert is answered in_progress at once (the key store checks for a
    # holder before its claim, not after), and that is still "try later", never a second run
    assert answered.count({"id": f"{effect}-1"}) == len(answered) >= 1
    record = ks.lookup(scope, "order-7")
    assert record.state == "succeeded" and record.attempt == 1
    assert record.duplicate_count == 15  # every other caller's one claim, counted once
    later = [create_invoice(7) for r in results if isinstance(r, InProgress)]
    assert later == [{"id": f"{effect}-1"}] * (16 - len(answered))  # trying later: the result
    assert sink.count(effect) == 1
    ks.close()


def test_a_transient_error_releases_and_the_retry_succeeds_once(ks, scope, sink, effect):
    sink.fail_next(effect, 2, status=503)

    @ks.exactly_once(scope, key="invoice-1", transient=SinkBusy)
    def create_invoice() -> dict:
        return post_effect(sink, effect, {"invoice": 1})

    assert create_invoice() == {"id": f"{effect}-1"}
    assert create_invoice() == {"id": f"{effect}-1"}  # a later call: replayed
    assert sink.count(effect) == 1
    record = ks.lookup(scope, "invoice-1")
    assert record.state == "succeeded" and record.attempt == 3  # two released attempts


def test_context_manager_transient_release_then_next_run_acquires(ks, scope, sink, effect):
    sink.fail_next(effect, 1)
    with pytest.raises(SinkBusy):
        with ks.once(scope, "k", transient=(SinkBusy,)) as op:
            post_effect(sink, effect, {})
    assert op.released_by is not None and ks.lookup(scope, "k").state == "released"

    with ks.once(scope, "k", transient=(SinkBusy,)) as op:
        assert not op.replayed and op.attempt == 2
        made = post_effect(sink, effect, {})
        op.succeed(resource_id=made["id"], status_code=201)
    with ks.once(scope, "k") as again:
        assert again.replayed and again.result.resource_id == f"{effect}-1"
    assert sink.count(effect) == 1


def test_an_unmarked_exception_is_an_unknown_outcome_left_to_reconciliation(ks, scope):
    with pytest.raises(TimeoutError):
        with ks.once(scope, "k", lease_seconds=1) as op:
            raise TimeoutError("the downstream did not answer: did it create the invoice?")
    assert op.released_by is None
    record = ks.lookup(scope, "k")
    assert record.state == "in_progress"  # not released: nobody may run it blindly again
    with pytest.raises(NeedsReconciliation):
        ks.claim(scope, "k", wait=10)  # waits out the lease, then a person must decide


def test_the_lease_is_extended_while_a_long_body_runs(ks, scope):
    with ks.once(scope, "k", lease_seconds=2) as op:
        deadline = time.monotonic() + 3.5  # longer than the lease it started with
        while time.monotonic() < deadline:
            with pytest.raises(InProgress):  # never needs_reconciliation: the lease is live
                ks.claim(scope, "k")
            time.sleep(0.25)
        op.checkpoint("invoice_created", resource_id="INV-42")
    assert op.keeper.beats >= 2 and op.keeper.lost is None
    record = ks.lookup(scope, "k")
    assert record.state == "succeeded" and record.attempt == 1
    assert record.checkpoint.resource_id == "INV-42"


def test_a_recorded_failure_is_replayed_as_operation_failed(ks, scope):
    with ks.once(scope, "k") as op:
        op.fail(status_code=422, body={"error": "customer unknown"})

    @ks.exactly_once(scope, key="k")
    def never_runs() -> None:
        raise AssertionError("the body of a finished operation ran")

    with pytest.raises(OperationFailed) as info:
        never_runs()
    assert info.value.record.result.body == {"error": "customer unknown"}


def test_sigkill_mid_body_leaves_the_key_to_reconciliation_not_a_second_run(
        service, ks, scope, sink, effect):
    child = subprocess.Popen(
        [sys.executable, str(HERE / "helper_child.py"), service.url, service.token, scope,
         "invoice-9", f"{sink.url}/effects/{effect}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        sink.wait_for(effect, 1)  # the body did its side effect and now hangs
        child.send_signal(signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)

    @ks.exactly_once(scope, key="invoice-9", wait=15)
    def create_invoice() -> dict:
        return post_effect(sink, effect, {"invoice": 9})

    with pytest.raises(NeedsReconciliation) as info:
        create_invoice()  # waits while the dead holder's lease runs out, then is refused
    assert info.value.record.state == "needs_reconciliation"
    assert sink.count(effect) == 1  # the body never ran a second time
    assert ks.lookup(scope, "invoice-9").attempt == 1
