"""Helpers of the bulk actions' tests: events of a source made through the ingest URL, each
with its type, and failed by a destination that answers 400."""
from __future__ import annotations

import json
import time

from .support import create_source, deliver, pump


def events(gw, source: dict, n: int, kind: str = "invoice.paid", first: int = 0) -> list[str]:
    """`n` accepted events of `source` (ids ev<first>..), each of type `kind`."""
    ids = []
    for i in range(first, first + n):
        body = json.dumps({"id": f"ev{i}", "type": kind}).encode()
        status, answer, _ = deliver(gw, source, body, event_id=f"ev{i}")
        assert status == 202, answer
        ids.append(f"ev{i}")
    return ids


def failed_source(gw, forwarding, sink_url: str, n: int, name: str = "shop", **extra) -> dict:
    """A source whose `n` events failed (the destination answered 400 to each)."""
    source = create_source(gw, gw.token, sink_url, name=name, **extra)
    events(gw, source, n)
    while pump(forwarding):
        pass
    return source


def wait_for(gw, job_id: int, timeout: float = 20.0) -> dict:
    """The job once it left `running` (its runner is a thread of the app)."""
    deadline = time.monotonic() + timeout
    while True:
        status, body, _ = gw.get(f"/v1/jobs/{job_id}")
        assert status == 200, body
        if body["job"]["state"] != "running" or time.monotonic() > deadline:
            return body["job"]
        time.sleep(0.05)


def bulk(gw, body: dict, key: str | None = None):
    return gw.post("/v1/deliveries/bulk", body,
                   headers={"Idempotency-Key": key} if key is not None else None)
