"""An operator's pause and resume naming one destination (issue 29: "A manual pause or resume
may name a destination; without one it applies to all of the source's"), on both backends,
against real sinks: the named destination holds its deliveries while the others go on; its
paused time is added to its own deliveries' retry windows only; a pause of the whole source
leaves a destination paused earlier its own beginning; each destination shows its own pause;
a name the source does not have is 404 and changes nothing."""
from __future__ import annotations

import json

from sqlalchemy import select

from keystore_service.storage.route_tables import hook_destinations
from keystore_service.storage.tables import hook_events

from .support import SECRET, at, attempt_all, cli, deliver, pump

E, D = hook_events.c, hook_destinations.c
SECOND = 1_000_000
WINDOW = 60


def two(gw, sinks, **extra) -> dict:
    status, answer, _ = gw.post("/v1/sources", {
        "name": "shop", "provider": "testing", "secrets": [SECRET], "destinations": [
            {"name": "billing", "url": sinks[0].url}, {"name": "crm", "url": sinks[1].url}],
        **extra})
    assert status == 201, answer
    return answer["source"]


def send(gw, source, event_id):
    body = json.dumps({"id": event_id, "type": "invoice.paid"}).encode()
    assert deliver(gw, source, body, event_id=event_id)[0] == 202


def states(gw, event_id) -> dict[str, str]:
    return {d["destination"]: d["state"]
            for d in gw.get("/v1/deliveries", event_id=event_id)[1]["deliveries"]}


def pauses(gw) -> dict:
    source = gw.get("/v1/sources/shop")[1]["source"]
    return {d["name"]: d["paused"] for d in source["destinations"]} | {"": source["paused"]}


def windows(gw_app, event_id) -> dict[str, int]:
    """Each delivery's retry window start, by its destination's name."""
    ks = gw_app.extensions["keystore"]
    with ks.database.engine.connect() as c:
        rows = c.execute(select(D.name, E.window_start).join(
            hook_destinations, D.id == E.destination_id).where(E.event_id == event_id))
        return dict(rows.all())


def test_a_pause_naming_one_destination_holds_only_it(gw, sinks, forwarding):
    source = two(gw, sinks)
    status, body, _ = gw.post("/v1/sources/shop/pause", {"destination": "crm",
                                                          "reason": "crm migration"})
    assert status == 200, body
    paused = {d["name"]: d["paused"] for d in body["source"]["destinations"]}
    assert paused == {"billing": None, "crm": {"by": "operator", "until": None,
                                               "reason": "crm migration"}}
    assert body["source"]["paused"] is None  # the source's is its first destination's
    send(gw, source, "ev1")
    assert pump(forwarding) == ["delivered"]  # billing's only
    assert states(gw, "ev1") == {"billing": "delivered", "crm": "queued"}
    assert [len(s.requests) for s in sinks] == [1, 0]

    status, body, _ = gw.post("/v1/sources/shop/resume", {"destination": "billing"})
    assert status == 200 and pauses(gw)["crm"]["by"] == "operator"  # not crm's
    assert pump(forwarding) == []
    status, body, _ = gw.post("/v1/sources/shop/resume", {"destination": "crm"})
    assert status == 200 and set(pauses(gw).values()) == {None}
    assert pump(forwarding) == ["delivered"]
    assert [len(s.requests) for s in sinks] == [1, 1]


def test_its_paused_time_moves_only_its_own_windows(gw, sinks, forwarding, clock, gw_app):
    sinks[0].answer = sinks[1].answer = lambda n, r: 500
    source = two(gw, sinks, retry_window_seconds=WINDOW, ttl_seconds=WINDOW + 86_400)
    send(gw, source, "ev1")
    assert sorted(pump(forwarding)) == ["retry", "retry"]
    accepted = windows(gw_app, "ev1")
    assert gw.post("/v1/sources/shop/pause", {"destination": "crm"})[0] == 200
    clock.advance(600)  # ten times the window, crm paused
    assert gw.post("/v1/sources/shop/resume", {"destination": "crm"})[0] == 200
    moved = windows(gw_app, "ev1")
    assert moved["billing"] == accepted["billing"]
    assert moved["crm"] == accepted["crm"] + 600 * SECOND
    # billing's window is over (its delivery fails); crm's still runs (a retry)
    assert sorted(attempt_all(forwarding)) == ["failed", "retry"]
    assert states(gw, "ev1") == {"billing": "failed", "crm": "queued"}


def test_a_whole_pause_keeps_an_earlier_ones_beginning_and_ends_each(gw, sinks, forwarding,
                                                                     clock, gw_app):
    sinks[0].answer = sinks[1].answer = lambda n, r: 500
    source = two(gw, sinks, retry_window_seconds=WINDOW, ttl_seconds=WINDOW + 86_400)
    send(gw, source, "ev1")
    assert sorted(pump(forwarding)) == ["retry", "retry"]
    accepted = windows(gw_app, "ev1")
    assert gw.post("/v1/sources/shop/pause", {"destination": "crm"})[0] == 200
    clock.advance(100)
    assert gw.post("/v1/sources/shop/pause", {"reason": "all of it"})[0] == 200
    assert {p["reason"] for p in pauses(gw).values()} == {"all of it"}
    clock.advance(50)
    assert gw.post("/v1/sources/shop/resume", {})[0] == 200  # every destination's
    assert set(pauses(gw).values()) == {None}
    moved = windows(gw_app, "ev1")
    assert moved == {"billing": accepted["billing"] + 50 * SECOND,
                     "crm": accepted["crm"] + 150 * SECOND}


def test_a_destinations_pause_with_an_end_is_cleared_by_the_sweep(gw, sinks, forwarding,
                                                                  clock, gw_app):
    source = two(gw, sinks)
    status, _, _ = gw.post("/v1/sources/shop/pause", {"destination": "crm",
                                                      "until": at(clock.now + 30 * SECOND)})
    assert status == 200
    send(gw, source, "ev1")
    assert attempt_all(forwarding) == ["delivered"]
    clock.advance(31)
    assert forwarding.end_pauses() == 1 and forwarding.end_pauses() == 0
    assert pump(forwarding) == ["delivered"]
    assert states(gw, "ev1") == {"billing": "delivered", "crm": "delivered"}


def test_a_name_the_source_lacks_is_404_and_a_bad_one_400(gw, sinks, op):
    two(gw, sinks)
    for path in ("pause", "resume"):
        status, body, _ = gw.post(f"/v1/sources/shop/{path}", {"destination": "nobody"})
        assert status == 404 and body["error"]["details"] == {"field": "destination"}, body
        for bad in ("", "A", "a" * 65, "crm\r\nX-Injected: 1", 7, ["crm"]):
            status, body, headers = gw.post(f"/v1/sources/shop/{path}", {"destination": bad})
            assert status == 400 and body["error"]["code"] == "invalid_request", (path, bad)
            assert "X-Injected" not in headers and "X-Injected" not in json.dumps(body)
    assert set(pauses(gw).values()) == {None}  # nothing was paused
    # another tenant's source of the same name is not found, with or without a destination
    globex = gw.__class__(gw.client, op["globex"])
    assert globex.post("/v1/sources/shop/pause", {"destination": "crm"})[0] == 404


def test_the_command_line_pauses_and_resumes_one_destination(database_url, gw, sinks):
    two(gw, sinks)
    paused = cli(database_url, "source", "pause", "shop", "--tenant", "acme",
                 "--destination", "crm", "--reason", "crm down")
    assert paused.returncode == 0 and "paused source 'shop' to 'crm'" in paused.stderr
    assert pauses(gw)["crm"]["reason"] == "crm down" and pauses(gw)["billing"] is None
    shown = json.loads(cli(database_url, "source", "show", "shop", "--tenant", "acme").stdout)
    assert [d["name"] for d in shown["destinations"]] == ["billing", "crm"]
    gone = cli(database_url, "source", "resume", "shop", "--tenant", "acme",
               "--destination", "nobody")
    assert gone.returncode == 1 and "no destination named 'nobody'" in gone.stderr
    bad = cli(database_url, "source", "resume", "shop", "--tenant", "acme",
              "--destination", "crm\r\nInjected")
    assert bad.returncode == 1 and "Injected" not in bad.stderr
    resumed = cli(database_url, "source", "resume", "shop", "--tenant", "acme",
                  "--destination", "crm")
    assert resumed.returncode == 0, resumed.stderr
    assert set(pauses(gw).values()) == {None}
