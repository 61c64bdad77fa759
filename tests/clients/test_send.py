"""`KeyStore.send` against the real service (both backends) and a real downstream API on
127.0.0.1: the key store makes the request once per (scope, key), with the connection's
credentials and `Idempotency-Key: <scope>:<key>`, and the client maps each answer of
POST /v1/send to its type (docs/outcomes.md, "A send's answers")."""
from __future__ import annotations

import time

import pytest
import requests
from keystore_client import (
    FingerprintMismatch,
    InProgress,
    KeyStore,
    NeedsReconciliation,
    NotFound,
    OutcomeUnknown,
    RetryPolicy,
    Sent,
)

from .downstream import Downstream
from .faults import FaultProxy

SECRET = "Bearer downstream-secret-7f3a"


@pytest.fixture(scope="module")
def api():
    with Downstream() as d:
        yield d


def connect(service, api, name: str, **extra) -> str:
    """A connection of tenant "clients" to the downstream, made by its operator."""
    body = {"name": name, "base_url": f"{api.url}/v2", "headers": {"Authorization": SECRET},
            "idempotency_header": "Idempotency-Key", "timeout_seconds": 5, **extra}
    answer = requests.post(f"{service.url}/v1/connections", json=body, timeout=10,
                           headers={"Authorization": f"Bearer {service.operator_token}"})
    assert answer.status_code == 201, answer.text
    return name


@pytest.fixture
def billing(service, api, scope) -> str:
    return connect(service, api, f"billing-{scope}")


def test_a_send_is_made_once_and_its_repeat_replays_the_answer(ks, api, billing, scope):
    order = {"customer": "acme", "total": 1250}
    first = ks.send(scope, "order-1", billing, method="POST", path=f"/{scope}/invoices",
                    json=order, payload=order, resource_id_pointer="/id")
    assert isinstance(first, Sent) and first.outcome == "sent"
    assert first.succeeded and not first.replayed and not first.refused
    assert (first.result.status_code, first.resource_id) == (201, "invoices-1")
    assert first.result.body == {"id": "invoices-1"}
    assert first.record.state == "succeeded" and first.record.result.resource_id == "invoices-1"

    again = ks.send(scope, "order-1", billing, {"method": "POST", "path": f"/{scope}/invoices",
                                                "json": order}, payload=order,
                    resource_id_pointer="/id")
    assert again.outcome == "replay" and again.replayed and again.succeeded
    assert again.result == first.result

    [got] = api.requests_to(f"/v2/{scope}/invoices")  # once, for both calls
    assert got.method == "POST" and got.json() == order
    assert got.headers["idempotency-key"] == f"{scope}:order-1"
    assert got.headers["authorization"] == SECRET


def test_a_permanent_refusal_is_failed_and_replayed_as_such(ks, api, billing, scope):
    path = f"/{scope}/invoices"
    api.script(f"/v2{path}", 422, {"error": "total must be positive"})
    refused = ks.send(scope, "order-2", billing, path=path, json={"total": -1},
                      payload={"total": -1})
    assert refused.outcome == "failed" and refused.refused and not refused.succeeded
    assert refused.result.status_code == 422
    assert refused.result.body == {"error": "total must be positive"}
    assert refused.record.state == "failed"

    again = ks.send(scope, "order-2", billing, path=path, json={"total": -1},
                    payload={"total": -1})
    assert again.outcome == "replay" and again.refused and again.result == refused.result
    assert len(api.requests_to(f"/v2{path}")) == 1  # never retried


def test_another_payload_under_the_same_key_is_a_mismatch(ks, api, billing, scope):
    path = f"/{scope}/invoices"
    ks.send(scope, "order-3", billing, path=path, json={"total": 5}, payload={"total": 5})
    with pytest.raises(FingerprintMismatch) as info:
        ks.send(scope, "order-3", billing, path=path, json={"total": 6}, payload={"total": 6})
    assert info.value.status == 422 and info.value.record.state == "succeeded"
    assert len(api.requests_to(f"/v2{path}")) == 1


def test_a_slow_api_is_accepted_then_in_progress_then_replayed(ks, api, billing, scope):
    path = f"/{scope}/slow"
    api.script(f"/v2{path}", 201, {"id": "slow-1"}, delay=3.0)
    accepted = ks.send(scope, "order-4", billing, path=path, json={}, payload={"n": 4},
                       resource_id_pointer="/id", wait_seconds=0)
    assert accepted.outcome == "accepted" and accepted.pending and accepted.result is None
    api.wait_for(f"/v2{path}", 1)  # the relay is making it now
    with pytest.raises(InProgress) as info:
        ks.send(scope, "order-4", billing, path=path, json={}, payload={"n": 4}, wait_seconds=0)
    assert info.value.retry_after is not None and info.value.retry_after >= 0

    record = ks.lookup(scope, "order-4", wait=15)
    assert record.state == "succeeded" and record.result.resource_id == "slow-1"
    replay = ks.send(scope, "order-4", billing, path=path, json={}, payload={"n": 4})
    assert replay.outcome == "replay" and replay.resource_id == "slow-1"
    assert len(api.requests_to(f"/v2{path}")) == 1


def test_an_unknown_outcome_without_a_way_to_confirm_it_needs_a_person(
        ks, service, api, scope):
    """A 500 from an API that has no idempotency header and no check: the key store cannot
    know whether it acted, so neither the send nor its repeat sends again."""
    blind = connect(service, api, f"blind-{scope}", idempotency_header=None)
    path = f"/{scope}/blind"
    api.script(f"/v2{path}", 500, {"error": "oops"})
    with pytest.raises(NeedsReconciliation) as info:
        ks.send(scope, "b-1", blind, path=path, json={}, payload={})
    assert info.value.status == 409 and info.value.record.state == "needs_reconciliation"
    with pytest.raises(NeedsReconciliation):
        ks.send(scope, "b-1", blind, path=path, json={}, payload={})
    [got] = api.requests_to(f"/v2{path}")
    assert "idempotency-key" not in got.headers


def test_raw_bytes_go_out_as_they_are(ks, api, billing, scope):
    path = f"/{scope}/files"
    raw = b"\x00\x01 not json \xff"
    sent = ks.send(scope, "file-1", billing, method="put", path=path, body=raw,
                   headers={"Content-Type": "application/octet-stream"}, fingerprint="f1")
    assert sent.outcome == "sent"
    [got] = api.requests_to(f"/v2{path}")
    assert (got.method, got.body) == ("PUT", raw)
    assert got.headers["content-type"] == "application/octet-stream"


def test_an_unknown_connection_is_not_found(ks, scope):
    with pytest.raises(NotFound) as info:
        ks.send(scope, "k", f"nowhere-{scope}", path="/x", json={})
    assert "no connection named" in info.value.message


@pytest.mark.parametrize("call", [
    dict(path="x"),  # not relative to the base URL
    dict(path="/x", method="GET"),  # a send changes something
    dict(path="/x", json={}, body=b"x"),
    dict(path="/x", wait_seconds=31),
    dict(request={"method": "POST", "path": "/x"}, path="/y"),
    dict(request={"method": "POST", "path": "/x", "jsn": {}}),
])
def test_what_the_service_would_refuse_is_refused_before_any_request(service, call):
    dead = KeyStore("http://127.0.0.1:9", service.token, retry=RetryPolicy.never())
    with pytest.raises(ValueError):
        dead.send("s", "k", "billing", **call)


def test_a_lost_answer_is_not_repeated_and_sending_again_answers_what_it_did(
        service, api, billing, scope):
    proxy = FaultProxy(service.url).start()
    try:
        ks = KeyStore(proxy.url, service.token,
                      retry=RetryPolicy(tries=5, base_delay=0.05, max_delay=0.2, budget=10))
        proxy.drop_answer("/v1/send")
        with pytest.raises(OutcomeUnknown):
            ks.send(scope, "lost-1", billing, path=f"/{scope}/lost", json={}, payload={})
        assert proxy.seen["/v1/send"] == 1  # not repeated by the client
        api.wait_for(f"/v2/{scope}/lost", 1)
        deadline = time.monotonic() + 15
        while True:  # bounded: the first send settles within the downstream's answer
            try:
                again = ks.send(scope, "lost-1", billing, path=f"/{scope}/lost", json={},
                                payload={})
                break
            except InProgress:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert again.outcome == "replay" and again.succeeded
        assert len(api.requests_to(f"/v2/{scope}/lost")) == 1
    finally:
        proxy.stop()


def test_503_from_the_service_is_retried(service, api, billing, scope):
    proxy = FaultProxy(service.url).start()
    try:
        ks = KeyStore(proxy.url, service.token,
                      retry=RetryPolicy(tries=3, base_delay=0.05, max_delay=0.1, budget=10))
        proxy.answer("/v1/send", 503, {"Retry-After": "0", "Content-Type": "application/json"},
                     b'{"error":{"code":"unavailable","message":"db down","details":{}}}')
        sent = ks.send(scope, "busy-1", billing, path=f"/{scope}/busy", json={}, payload={})
        assert sent.outcome == "sent" and proxy.seen["/v1/send"] == 2
        assert len(api.requests_to(f"/v2/{scope}/busy")) == 1
    finally:
        proxy.stop()
