"""`keystore delivery bulk`, `keystore job show` and `keystore job cancel` on both backends:
the API's rules (a bad filter is a message and exit 1, never a traceback), a dry run, a job
run by the command with its progress on stderr, the same Idempotency-Key answering the same
job, and an event type option of a generic source."""
from __future__ import annotations

import json

import pytest

from .bulk_support import failed_source
from .support import Sink, cli


@pytest.fixture
def refusing():
    s = Sink(lambda n, r: 400)
    yield s
    s.close()


def test_a_bulk_redelivery_on_the_command_line(database_url, gw, forwarding, refusing):
    failed_source(gw, forwarding, refusing.url, 3)
    base = ("delivery", "bulk", "--tenant", "acme", "--action", "redeliver", "--state",
            "failed")
    counted = cli(database_url, *base, "--dry-run")
    assert counted.returncode == 0, counted.stderr
    assert json.loads(counted.stdout) == {"matched": 3}
    ran = cli(database_url, *base, "--idempotency-key", "k-1")
    assert ran.returncode == 0, ran.stderr
    job = json.loads(ran.stdout)
    assert (job["state"], job["matched"], job["done"], job["skipped"]) == ("done", 3, 3, 0)
    assert f"job {job['id']} done: 3/3 100% (3 done, 0 skipped)" in ran.stderr
    again = cli(database_url, *base, "--idempotency-key", "k-1")
    assert again.returncode == 0 and json.loads(again.stdout)["id"] == job["id"]
    assert "started before, same key" in again.stderr
    other = cli(database_url, *base, "--force", "--idempotency-key", "k-1")
    assert other.returncode == 1 and "another bulk request" in other.stderr
    shown = cli(database_url, "job", "show", "--tenant", "acme", str(job["id"]))
    assert shown.returncode == 0 and json.loads(shown.stdout)["done"] == 3
    cancelled = cli(database_url, "job", "cancel", "--tenant", "acme", str(job["id"]))
    assert cancelled.returncode == 1 and "the job is done" in cancelled.stderr
    assert {d["state"] for d in gw.get("/v1/deliveries")[1]["deliveries"]} == {"queued"}


@pytest.mark.parametrize("args, said", [
    (("--received-after", "soon"), "received_after"),
    (("--event-type", "a\x01b"), "event_type"),
    (("--destination", "Other dest"), "destination"),
    (("--received-after", "2026-12-02T00:00:00Z", "--received-before",
      "2026-12-01T00:00:00Z"), "received_after must be before"),
])
def test_bad_filters_are_a_message(database_url, gw, args, said):
    done = cli(database_url, "delivery", "bulk", "--tenant", "acme", "--action", "retry",
               *args)
    assert done.returncode == 1 and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    for bad in ("0", "x", str(2**63)):
        shown = cli(database_url, "job", "show", "--tenant", "acme", bad)
        assert shown.returncode != 0 and "Traceback" not in shown.stderr


def test_a_generic_sources_event_type_option(database_url, gw, sink):
    made = cli(database_url, "source", "create", "--tenant", "acme", "--name", "g",
               "--provider", "generic", "--destination", sink.url, "--event-id-header",
               "X-Id", "--event-type-json", "/kind", "--public-url", "https://h.example")
    assert made.returncode == 0, made.stderr
    assert gw.get("/v1/sources/g")[1]["source"]["event_type"] == {"json": "/kind"}
    both = cli(database_url, "source", "create", "--tenant", "acme", "--name", "h",
               "--provider", "generic", "--destination", sink.url, "--event-id-header",
               "X-Id", "--event-type-json", "/kind", "--event-type-header", "X-Kind")
    assert both.returncode != 0 and "not both" in both.stderr
