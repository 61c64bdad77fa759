"""Every form and query value of the Webhooks section, sent with values at the edges of its
type, as tests/ui/test_inputs.py does for the rest of the page: a page, 400 where the value
cannot be used, never a 500, and nothing changed."""
from __future__ import annotations

import base64
import json

import pytest

from .hooks_support import create_source, deliver, delivery, hooks_settings, pump, sink
from .support import EDGES, assert_a_calm_page, query

__all__ = ["sink"]
GETS = {"/ui/hooks": {"anything": "x"},
        "/ui/hooks/deliveries": {"source": "shop", "state": "failed", "cursor": ""},
        "/ui/hooks/event": {"source": "shop", "event_id": "evt_1", "done": "redelivered"}}
# evt_q is queued: a redelivery whose fields pass is refused (409), so nothing can change
POSTS = {"/ui/hooks/redeliver": {"source": "shop", "event_id": "evt_q", "force": ""},
         "/ui/hooks/dismiss": {"source": "shop", "event_id": "evt_1", "review_id": "?"}}


@pytest.fixture
def ui_settings(database_url):
    return hooks_settings(database_url)


@pytest.fixture
def failed(app, browser, operator, tokens, sink):
    """acme's event evt_1 of source "shop", failed (a delivery_failed review open), its
    event evt_q queued, and ana signed in."""
    sink.answer = lambda n, r: 400
    shop = create_source(operator, tokens["ana"], sink.url)
    assert deliver(app.test_client(), shop) == 202
    assert pump(app) == ["failed"]
    assert deliver(app.test_client(), shop, b"{}", "evt_q") == 202
    browser.sign_in(tokens["ana"])
    browser.get("/ui/hooks")
    return browser


def unchanged(operator) -> None:
    assert delivery(operator)["state"] == "failed"
    assert delivery(operator, "evt_q")["state"] == "queued"
    status, body, _ = operator.get("/v1/reviews", kind="delivery_failed")
    assert len(body["reviews"]) == 1


def test_no_value_of_any_field_makes_a_server_error(failed, operator):
    client = failed.client
    (review,) = operator.get("/v1/reviews")[1]["reviews"]
    posts = {**POSTS, "/ui/hooks/dismiss": {**POSTS["/ui/hooks/dismiss"],
                                            "review_id": str(review["id"])}}  # the real one
    for path, fields in GETS.items():
        for name in fields:
            for label, edge in EDGES.items():
                resp = client.get(f"{path}?{query(fields, name, edge)}")
                assert_a_calm_page(resp, (path, name, label))
    for path, fields in posts.items():
        for name in [*fields, "csrf_token"]:
            for label, edge in EDGES.items():
                failed.get("/ui/hooks")
                form = {**fields, "csrf_token": failed.csrf}
                resp = client.post(path, data=query(form, name, edge),
                                   content_type="application/x-www-form-urlencoded")
                assert_a_calm_page(resp, (path, name, label))
    unchanged(operator)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_names_states_and_ids_are_checked_by_the_apis_rules(failed, operator):
    for source in ("Shop", "shop\n", "shop ", "s" * 65, "hook:shop", "sh/op", "ｓhop", "%"):
        resp = failed.get("/ui/hooks/deliveries", source=source)
        assert resp.status_code == 400 and "A source name is 1 to 64" in failed.html, source
        resp = failed.get("/ui/hooks/event", source=source, event_id="evt_1")
        assert resp.status_code == 400, source
    assert failed.get("/ui/hooks/deliveries", source="s" * 64).status_code == 200
    for state in ("FAILED", "failed ", "held", "accepted", "0"):
        resp = failed.get("/ui/hooks/deliveries", state=state)
        assert resp.status_code == 400 and "State is one of queued, delivering" in failed.html
    for event_id in ("", "a\nb", "a\x00", "x" * 513):
        resp = failed.get("/ui/hooks/event", source="shop", event_id=event_id)
        assert resp.status_code == 400 and "An event id is 1 to 512" in failed.html, event_id
    assert failed.get("/ui/hooks/event", source="shop", event_id="x" * 512).status_code == 404
    assert failed.get("/ui/hooks/event", source="nope", event_id="evt_1").status_code == 404
    for review_id in ("", "0", "-1", "²", "٢", "9223372036854775808", "1.0"):
        failed.get("/ui/hooks")
        resp = failed.post("/ui/hooks/dismiss", {"source": "shop", "event_id": "evt_1",
                                                 "review_id": review_id})
        assert resp.status_code == 400 and "Nothing was changed" in failed.html, review_id
    failed.get("/ui/hooks")
    resp = failed.post("/ui/hooks/dismiss", {"source": "shop", "event_id": "evt_1",
                                             "review_id": "9223372036854775807"})
    assert resp.status_code == 404
    unchanged(operator)


def b64(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_tampered_cursor_is_a_400_page(failed):
    for raw in ("[1e27, 2]", "[9223372036854775808, 1]", "[true, 1]", "[1, 2, 3]", "[1,2]",
                "[-1, 2]", '["1", 2]'):
        resp = failed.get("/ui/hooks/deliveries", cursor=b64(raw))
        assert resp.status_code == 400 and "not one this service gave out" in failed.html, raw
    for cursor in ("garbage", "A" * 57, "A" * 7, "a+b/c===", "AAAAAAAA\n"):
        assert failed.get("/ui/hooks/deliveries", cursor=cursor).status_code == 400, cursor
    assert failed.get("/ui/hooks/deliveries", cursor=b64(json.dumps([0, 0]))).status_code \
        == 200
