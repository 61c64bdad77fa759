"""The Webhooks section's counts and words, through Flask's test client on both backends:
each source's held events and its next forward (issue 25's new user found neither), the
forwards of an event named apart from a claim's attempts, and the deliveries list saying
truly how many forwards it shows."""
from __future__ import annotations

import json
import re
from datetime import datetime

import pytest

from .hooks_support import (
    BODY,
    ana,
    create_source,
    deliver,
    delivery,
    hooks_settings,
    pump,
    shop,
    sink,
    text,
)

__all__ = ["ana", "shop", "sink"]


@pytest.fixture
def ui_settings(database_url):
    return hooks_settings(database_url)


def source_row(html: str, name: str) -> str:
    (row,) = [text(r) for r in re.findall(r"<tr>.*?</tr>", html, re.S)
              if f">{name}</a>" in r]
    return row


def shown(rfc3339: str) -> str:
    """An API time as the page writes it (to the second)."""
    at = datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
    return f"{at:%Y-%m-%d %H:%M:%S} UTC"


def test_each_source_shows_its_held_events_and_its_next_forward(app, ana, operator, tokens,
                                                                 shop, sink, clock):
    create_source(operator, tokens["ana"], "http://127.0.0.1:9/idle", name="idle")
    client = app.test_client()
    sink.answer = lambda n, r: 200 if n < 2 else 500
    for event_id in ("evt_1", "evt_2"):
        assert deliver(client, shop, json.dumps({"id": event_id}).encode(), event_id) == 202
    assert pump(app) == ["delivered", "delivered"]
    for event_id in ("evt_1", "evt_2"):  # changed bodies under known ids: held, not queued
        assert deliver(client, shop, json.dumps({"id": event_id, "x": 1}).encode(),
                       event_id) == 200
    assert deliver(client, shop, BODY, "evt_3") == 202
    assert pump(app) == ["retry"]  # a 500: tried again within the first backoff (<= 1 s)
    next_at = delivery(operator, "evt_3")["next_attempt_at"]
    assert next_at is not None

    assert ana.get("/ui/hooks").status_code == 200
    header = text(re.search(r"<thead>.*?</thead>", ana.html, re.S).group())
    assert "Failed Held Oldest queued Next forward Last error" in header
    row = source_row(ana.html, "shop")
    assert f" 1 0 0 2 waiting 0 s {shown(next_at)} " in row, row
    held_link = '<a href="/ui/?kind=fingerprint_mismatch&amp;scope=hook:shop" title='
    assert re.search(re.escape(held_link) + r'"[^"]*">2</a>', ana.html)  # to the review queue
    assert " 0 0 0 0 — — — ok Pause… " in source_row(ana.html, "idle")  # health, pause

    clock.advance(5)  # past the backoff: the relay takes it at its next round
    ana.get("/ui/hooks")
    assert f"{shown(next_at)} due now" in source_row(ana.html, "shop")

    # a dismissed held body is no longer held; a delivered event leaves no next forward
    ana.get("/ui/hooks/event", source="shop", event_id="evt_1")
    review_id = re.search(r'name="review_id" value="(\d+)"', ana.html).group(1)
    ana.post("/ui/hooks/dismiss", {"source": "shop", "event_id": "evt_1", "review_id": review_id})
    sink.answer = lambda n, r: 200
    assert pump(app) == ["delivered"]
    ana.get("/ui/hooks")
    row = source_row(ana.html, "shop")
    assert " 0 0 0 1 — — " in row, row


def test_an_events_forwards_are_not_called_attempts(app, ana, operator, tokens, shop, sink,
                                                    clock):
    """The event's page, the deliveries list and the record's page of a webhook event say
    "forwards" for the tries to reach the destination ("attempt" is a claim's, which the
    record's page shows), and the lists say how many they show, not that only those are
    kept (every forward is kept; pages show the newest)."""
    client = app.test_client()
    sink.answer = lambda n, r: 500 if n < 7 else 200
    assert deliver(client, shop) == 202
    for _ in range(8):
        pump(app)
        clock.advance(700)  # past any backoff (at most 600 s)
    assert delivery(operator)["state"] == "delivered"
    ana.sign_in(tokens["ana"])  # the clock ran past the page's idle timeout

    ana.get("/ui/hooks/deliveries", source="shop")
    page = text(ana.html)
    assert "Forwards" in page and "Attempts" not in page
    assert "8 forwards in all; the newest 3 are shown here, the newest 20 on the event's " \
           "page." in page
    assert "are kept" not in page

    ana.get("/ui/hooks/event", source="shop", event_id="evt_1")
    page = text(ana.html)
    assert "Forwards 8" in page  # the delivery's count
    assert re.search(r"<h2 id=\"forwards-h\">Forwards</h2>", ana.html)
    rest = page.replace("Keystore-Attempt", "")
    assert "attempt" not in rest.lower(), re.findall(r".{60}attempt.{20}", rest, re.I)
    assert "are kept" not in page

    ana.get("/ui/record", scope="hook:shop", key="evt_1")
    assert "its delivery, forwards and body" in text(ana.html)


def test_the_sign_in_page_names_the_command_as_installed(browser):
    """The README's quick start installs into .venv: the command that runs as written from
    the service's folder is .venv/bin/keystore."""
    browser.get("/ui/signin")
    assert ".venv/bin/keystore token create --tenant NAME --role operator --name YOUR-NAME" \
        in text(browser.html)


def test_a_paused_sources_next_forward_is_the_end_of_its_pause(app, ana, operator, shop, sink,
                                                               clock):
    """An event queued while its source is paused goes out when the pause ends, not at its
    own next_attempt_at (which is already past): the page says the later of the two."""
    client = app.test_client()
    sink.answer = lambda n, r: (429, {"Retry-After": "120"})
    assert deliver(client, shop, BODY, "evt_1") == 202
    assert pump(app) == ["retry"]  # the 429 pauses the source for 120 s
    assert deliver(client, shop, json.dumps({"id": "evt_2"}).encode(), "evt_2") == 202
    ana.get("/ui/hooks")
    row = source_row(ana.html, "shop")
    assert "2027-01-15 08:02:00 UTC in 2 min, after the pause" in row, row
