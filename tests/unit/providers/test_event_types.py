"""Each provider's event type (docs/webhooks/providers.md, "Event types"), and the attacker's
pass over it: a type never refuses a delivery and never raises; one that is not a string of
1-128 code points without control, surrogate or format characters is recorded as none."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from keystore_service.gateway.providers import (MAX_EVENT_TYPE_CHARS, checked_event_type,
                                                provider)

from .support import MALFORMED, inbound

GENERIC = {"signature": None, "event_id": {"header": "X-Id"}}


def type_of(name, headers, body, config=None):
    return provider(name).event_type(inbound(headers, body), config or {})


def test_stripe_and_standard_webhooks_take_the_bodys_type():
    for name in ("stripe", "standard"):
        assert type_of(name, {}, b'{"id": "evt_1", "type": "invoice.paid"}') == "invoice.paid"
        assert type_of(name, {}, b'{"id": "evt_1"}') is None


def test_github_joins_the_event_header_and_the_bodys_action():
    body = json.dumps({"action": "opened", "issue": {}}).encode()
    assert type_of("github", {"X-GitHub-Event": "issues"}, body) == "issues.opened"
    assert type_of("github", {"X-GitHub-Event": "push"}, b'{"ref": "main"}') == "push"
    assert type_of("github", {"X-GitHub-Event": "push"}, b'{"action": 3}') == "push"
    assert type_of("github", {}, body) is None
    assert type_of("github", {"X-GitHub-Event": "ping"}, b"not json") == "ping"


def test_shopify_takes_its_topic_header():
    assert type_of("shopify", {"X-Shopify-Topic": "orders/create"}, b"{}") == "orders/create"
    assert type_of("shopify", {}, b"{}") is None


def test_slack_takes_the_inner_events_type_else_the_bodys():
    body = json.dumps({"type": "event_callback", "event": {"type": "app_mention"}}).encode()
    assert type_of("slack", {}, body) == "app_mention"
    assert type_of("slack", {}, b'{"type": "event_callback", "event": "x"}') == "event_callback"
    assert type_of("slack", {}, b'{"type": "event_callback", "event": {"type": 5}}') == \
        "event_callback"


def test_generic_takes_a_configured_header_or_pointer_else_none():
    by_header = {**GENERIC, "event_type": {"header": "X-Kind"}}
    assert type_of("generic", {"X-Kind": "week.closed"}, b"{}", by_header) == "week.closed"
    by_pointer = {**GENERIC, "event_type": {"json": "/meta/kind"}}
    body = b'{"meta": {"kind": "timesheet.submitted"}}'
    assert type_of("generic", {}, body, by_pointer) == "timesheet.submitted"
    assert type_of("generic", {}, b'{"meta": {"kind": 7}}', by_pointer) is None
    assert type_of("generic", {}, b'[1]', by_pointer) is None
    assert type_of("generic", {"X-Kind": "a"}, b"{}", GENERIC) is None  # no rule: none


@pytest.mark.parametrize("rule", [{"header": "bad header"}, {"json": "no-slash"},
                                  {"json": ""}, {"header": "a", "json": "/b"}, [], "x",
                                  {"json": "/a\x00"}, {"jsonx": "/a"}])
def test_generic_refuses_an_unusable_event_type_rule(rule):
    with pytest.raises(ValueError):
        provider("generic").validate_config({**GENERIC, "event_type": rule})


def test_a_type_over_the_bound_or_with_control_characters_is_none():
    assert checked_event_type("a" * MAX_EVENT_TYPE_CHARS) == "a" * MAX_EVENT_TYPE_CHARS
    for bad in ("a" * (MAX_EVENT_TYPE_CHARS + 1), "", "a\x00b", "a\r\nb", "a\x1bb",
                "a\u202eb", "\ud800", "a\u200bb", 5, None, ["a"], {"a": 1}, True):
        assert checked_event_type(bad) is None, repr(bad)
    assert checked_event_type("東京.予約") == "東京.予約"  # any letters are fine


@pytest.mark.parametrize("value", MALFORMED)
def test_no_malformed_header_or_body_raises(value):
    for name in ("github", "shopify", "slack", "stripe", "standard", "generic"):
        for headers, body in (({"X-GitHub-Event": value, "X-Shopify-Topic": value,
                                "X-Kind": value}, b"{}"),
                              ({}, json.dumps({"type": value, "action": value}).encode()),
                              ({}, value.encode("utf-8", "surrogatepass"))):
            got = type_of(name, headers, body, {**GENERIC, "event_type": {"header": "X-Kind"}})
            assert got is None or checked_event_type(got) == got


@given(st.binary(max_size=200))
def test_any_body_gives_a_type_or_none(body):
    for name in ("stripe", "slack", "standard", "github"):
        got = type_of(name, {"X-GitHub-Event": "push"}, body)
        assert got is None or checked_event_type(got) == got


def test_a_deep_body_gives_none():
    deep = b"[" * 100_000 + b"]" * 100_000
    assert type_of("stripe", {}, deep) is None
