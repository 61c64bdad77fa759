"""Each delivery that fails for good has its own delivery_failed review, and each destination
its own delivery_failing issue (issue 29, "Routing: several destinations": a delivery has its
own review and issue; migration 0024). Both backends, real sinks on loopback, the relay's
take and settle on the test clock.

Before 0024 an event had one delivery_failed review (its first failed delivery's), a second
destination failing for good opened nothing, and the watchers read only a source's first
destination: a second destination failing for hours told nobody."""
from __future__ import annotations

import json

from .bulk_support import wait_for
from .support import SECRET, deliver, pump


def _source(gw, sinks, name="shop", **extra) -> dict:
    status, answer, _ = gw.post("/v1/sources", {
        "name": name, "provider": "testing", "secrets": [SECRET], "destinations": [
            {"name": "billing", "url": sinks[0].url}, {"name": "crm", "url": sinks[1].url}],
        **extra})
    assert status == 201, answer
    return answer["source"]


def _send(gw, source: dict, event_id: str) -> None:
    status, answer, _ = deliver(gw, source, json.dumps({"id": event_id}).encode(),
                                event_id=event_id)
    assert status == 202, answer


def _record(gw, event_id: str) -> dict:
    return gw.get("/v1/keys", scope="hook:shop", key=event_id)[1]["record"]


def _reviews(gw) -> dict[str, dict]:
    status, body, _ = gw.get("/v1/reviews", kind="delivery_failed")
    assert status == 200, body
    return {r["destination"]: r for r in body["reviews"]}


def _states(gw, event_id: str) -> dict[str, str]:
    body = gw.get("/v1/deliveries", event_id=event_id)[1]
    return {d["destination"]: d["state"] for d in body["deliveries"]}


def _redeliver(gw, event_id: str, destination: str) -> None:
    status, body, _ = gw.post("/v1/deliveries/redeliver", {
        "source": "shop", "event_id": event_id, "destination": destination})
    assert status == 202, body


def test_each_failed_delivery_has_its_own_review_and_the_record_fails_until_both_deliver(
        gw, sinks, forwarding):
    for s in sinks:
        s.answer = lambda n, r: 400 if n == 0 else 200  # refused once, for good
    _send(gw, _source(gw, sinks), "ev1")
    assert sorted(pump(forwarding)) == ["failed", "failed"]
    reviews = _reviews(gw)
    assert sorted(reviews) == ["billing", "crm"]
    assert all(r["key"] == "ev1" and r["state"] == "open" for r in reviews.values())
    assert _record(gw, "ev1")["state"] == "failed"
    # crm again: its review closes, billing's stays, and the record stays failed (billing
    # still is), also once crm delivered
    _redeliver(gw, "ev1", "crm")
    assert sorted(_reviews(gw)) == ["billing"]
    assert _record(gw, "ev1")["state"] == "failed"
    assert pump(forwarding) == ["delivered"]
    assert _states(gw, "ev1") == {"billing": "failed", "crm": "delivered"}
    assert _record(gw, "ev1")["state"] == "failed"
    # billing again: now nothing else is failed, so the record waits for it, then succeeds
    _redeliver(gw, "ev1", "billing")
    assert _record(gw, "ev1")["state"] == "in_progress"
    assert pump(forwarding) == ["delivered"]
    assert _record(gw, "ev1")["state"] == "succeeded"
    assert _reviews(gw) == {}
    assert [len(s.requests) for s in sinks] == [2, 2]


def test_a_second_delivery_failing_after_the_record_failed_opens_its_own_review(
        gw, sinks, forwarding, clock):
    """billing fails for good first (the record fails); crm retries, then fails for good
    too: it still gets a review of its own, where the record's end used to open none."""
    sinks[0].answer = lambda n, r: 400
    sinks[1].answer = lambda n, r: 500 if n == 0 else 422
    _send(gw, _source(gw, sinks), "ev1")
    assert sorted(pump(forwarding)) == ["failed", "retry"]
    assert sorted(_reviews(gw)) == ["billing"]
    clock.advance(1.01)
    assert pump(forwarding) == ["failed"]
    reviews = _reviews(gw)
    assert sorted(reviews) == ["billing", "crm"]
    assert reviews["crm"]["record"]["state"] == "failed"


def test_resolving_one_review_with_redeliver_redelivers_its_delivery_only(gw, sinks,
                                                                        forwarding):
    for s in sinks:
        s.answer = lambda n, r: 400 if n == 0 else 200
    _send(gw, _source(gw, sinks), "ev1")
    pump(forwarding)
    crm = _reviews(gw)["crm"]
    status, body, _ = gw.post("/v1/resolve", {"scope": "hook:shop", "key": "ev1",
                                             "action": "redeliver", "review_id": crm["id"]})
    assert status == 200, body
    assert _states(gw, "ev1") == {"billing": "failed", "crm": "queued"}
    assert sorted(_reviews(gw)) == ["billing"]
    status, body, _ = gw.post("/v1/resolve", {"scope": "hook:shop", "key": "ev1",
                                             "action": "redeliver", "review_id": crm["id"]})
    assert status == 404  # that review is closed: nothing is redelivered twice
    # a dismiss of billing's review leaves billing failed and closes only that review
    billing = _reviews(gw)["billing"]
    status, body, _ = gw.post("/v1/resolve", {"scope": "hook:shop", "key": "ev1",
                                             "action": "dismiss", "review_id": billing["id"]})
    assert status == 200, body
    assert _reviews(gw) == {} and _states(gw, "ev1")["billing"] == "failed"


def _issues(gw) -> dict[str, dict]:
    status, body, _ = gw.get("/v1/issues", kind="delivery_failing")
    assert status == 200, body
    return {i["subject"]: i for i in body["issues"]}


def test_a_failing_second_destination_opens_an_issue_of_its_own(gw_app, gw, sinks,
                                                                 forwarding, clock):
    """crm's forwards fail (500) for alert_after_seconds: an issue `shop/crm` opens while
    billing delivers; it resolves once crm answers again. A source with one destination
    keeps the v1.1 subject, its name."""
    issues = gw_app.extensions["keystore"].gateway.issues
    sinks[1].answer = lambda n, r: 500 if n < 3 else 200
    _send(gw, _source(gw, sinks, alert_after_seconds=10), "ev1")
    assert sorted(pump(forwarding)) == ["delivered", "retry"]
    issues.watch()
    assert _issues(gw) == {}  # failing for 0 s of its 10
    clock.advance(11)
    assert pump(forwarding) == ["retry"]
    assert issues.watch()["opened"] == 1
    (issue,) = _issues(gw).values()
    assert issue["subject"] == "shop/crm" and "destination crm" in issue["detail"]
    assert "HTTP 500" in issue["detail"]
    clock.advance(30)
    assert pump(forwarding) == ["retry"]
    clock.advance(60)
    assert pump(forwarding) == ["delivered"]
    assert issues.watch()["resolved"] == 1
    assert _issues(gw)["shop/crm"]["state"] == "resolved"


def test_failed_deliveries_count_on_their_own_destinations_issue(gw_app, gw, sinks,
                                                                 forwarding):
    issues = gw_app.extensions["keystore"].gateway.issues
    sinks[1].answer = lambda n, r: 400  # crm refuses every event for good
    source = _source(gw, sinks)
    for n in range(3):
        _send(gw, source, f"ev{n}")
    while pump(forwarding):
        pass
    issues.watch()
    found = _issues(gw)
    assert list(found) == ["shop/crm"]  # billing delivered: no issue for it
    assert found["shop/crm"]["count"] == 3
    assert "3 event(s) failed for good" in found["shop/crm"]["detail"]
    status, body, _ = gw.post("/v1/deliveries/bulk", {
        "action": "dismiss", "filter": {"source": "shop", "destination": "crm",
                                        "state": "failed"}})
    assert status == 202, body
    assert wait_for(gw, body["job"]["id"])["done"] == 3
    assert _reviews(gw) == {}
    assert issues.watch()["resolved"] == 1


def test_a_single_destination_sources_issue_keeps_its_name_as_subject(gw_app, gw, sinks,
                                                                      forwarding):
    issues = gw_app.extensions["keystore"].gateway.issues
    sinks[0].answer = lambda n, r: 400
    status, answer, _ = gw.post("/v1/sources", {
        "name": "shop", "provider": "testing", "secrets": [SECRET],
        "destination": {"url": sinks[0].url}})
    assert status == 201, answer
    _send(gw, answer["source"], "ev1")
    assert pump(forwarding) == ["failed"]
    assert _reviews(gw)["default"]["key"] == "ev1"
    issues.watch()
    assert list(_issues(gw)) == ["shop"]
