"""`keystore source pause` and `keystore delivery retry` (issue 27) on both backends: the
same rules as the API (a bad --until or --reason refused with a message, never a
traceback), and the same effect."""
from __future__ import annotations

import json

from .support import cli, create_source, deliver

HOLDER = "cli-relay"


def attempt_all(forwarding) -> list:
    taken, _ = forwarding.take_some(HOLDER, 16, ended=True)
    return [o.value if o else None for o in (
        forwarding.settle(job, HOLDER, forwarding.attempt(job)) for job in taken)]


def shown(gw) -> dict:
    return gw.get("/v1/sources/shop")[1]["source"]


def test_pause_and_resume_on_the_command_line(database_url, gw, sink):
    create_source(gw, gw.token, sink.url)
    until = "2020-01-01T00:00:00Z"  # the command runs on the real clock: long past
    done = cli(database_url, "source", "pause", "--tenant", "acme", "shop", "--reason",
               "<b>deploy</b>")
    assert done.returncode == 0, done.stderr
    assert "paused source 'shop' until it is resumed" in done.stderr
    assert shown(gw)["paused"] == {"by": "operator", "until": None, "reason": "<b>deploy</b>"}
    listed = cli(database_url, "source", "list", "--tenant", "acme")
    assert "paused-by-operator" in listed.stdout
    past = cli(database_url, "source", "pause", "--tenant", "acme", "shop", "--until", until)
    assert past.returncode == 1 and "until is in the future" in past.stderr
    for bad in ("\uff12\uff10\uff12\uff17-01-01T00:00:00Z", "2027-02-30T00:00:00Z", "soon"):
        refused = cli(database_url, "source", "pause", "--tenant", "acme", "shop", "--until",
                      bad)
        assert refused.returncode == 1 and "until" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
    refused = cli(database_url, "source", "pause", "--tenant", "acme", "shop", "--reason",
                  "two\nlines")
    assert refused.returncode == 1 and "reason" in refused.stderr
    assert shown(gw)["paused"]["reason"] == "<b>deploy</b>"  # unchanged by the refusals
    resumed = cli(database_url, "source", "resume", "--tenant", "acme", "shop")
    assert resumed.returncode == 0 and shown(gw)["paused"] is None


def test_retry_now_on_the_command_line(database_url, gw, sink, forwarding):
    sink.answer = lambda n, r: (500, {"Retry-After": "600"}) if n == 0 else 200
    deliver(gw, create_source(gw, gw.token, sink.url))
    assert attempt_all(forwarding) == ["retry"]
    done = cli(database_url, "delivery", "retry", "--tenant", "acme", "--source", "shop",
               "--event-id", "evt_1")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"due": 1}
    assert attempt_all(forwarding) == ["delivered"]
    again = cli(database_url, "delivery", "retry", "--tenant", "acme", "--source", "shop",
                "--event-id", "evt_1")
    assert again.returncode == 1 and "(it is delivered)" in again.stderr
    whole = cli(database_url, "delivery", "retry", "--tenant", "acme", "--source", "shop")
    assert whole.returncode == 0 and json.loads(whole.stdout) == {"due": 0}
    missing = cli(database_url, "delivery", "retry", "--tenant", "acme", "--source", "nope")
    assert missing.returncode == 1 and "no source named 'nope'" in missing.stderr
    bad = cli(database_url, "delivery", "retry", "--tenant", "acme", "--source", "shop",
              "--event-id", "a\rb")
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
