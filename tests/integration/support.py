"""What the integration tests share: a race of threads released at once and its outcomes,
a snapshot of the stored rows (bad input changes none), the batch claim, the claim ->
complete -> mismatch steps over HTTP, report dates that are not a day, and Hypothesis
strategies of a stored record."""
from __future__ import annotations

import threading

from hypothesis import strategies as st
from sqlalchemy import select

from keystore_service.domain import records as domain
from keystore_service.storage.tables import attempts, records, tenants, tokens
from tests.support import SECOND, T0

THREADS = 16


def race(fn, n=THREADS):
    """Run fn(i) in n threads released at the same instant; return results or exceptions."""
    barrier, out = threading.Barrier(n), [None] * n

    def run(i):
        barrier.wait()
        try:
            out[i] = fn(i)
        except Exception as exc:  # collected and asserted on by the caller
            out[i] = exc
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def outcome(x):
    return x.outcome.value if hasattr(x, "outcome") and not isinstance(x, Exception) \
        else getattr(x, "code", repr(x))


def snapshot(app) -> dict:
    engine = app.extensions["keystore"].database.engine
    with engine.connect() as conn:
        return {t.name: sorted(map(tuple, conn.execute(select(t)).all()))
                for t in (tenants, tokens, records, attempts)}


def batch(http, items, **extra):
    status, body, _ = http.post("/v1/claim/batch", {"scope": "orders", "items": items, **extra})
    assert status == 200, body
    return body["results"]


def outcomes(results):
    return [r.get("outcome") or r["error"]["code"] for r in results]


BAD_DATES = ["0", "1", "1700000000", "9999-12-31", "0001-01-01", "0001-01-14", "1969-12-31",
             "10000-01-01", "2027-02-30", "2027-13-01", "2027-1-5", "20270115", "2027-W03-5",
             "2027-01-15T00:00", "2027-01-15 ", " 2027-01-15", "+2027-01-15",
             "٢٠٢٧-٠١-١٥", "２０２７-01-15", "2027-01-1\u0665", "2027-01-15\n", "", "x" * 5000]


CLAIM = {"scope": "create_invoice", "key": "evt_1", "payload": {"amount": 100}}
REF = {"scope": "create_invoice", "key": "evt_1"}


def acquire(http, **over):
    status, body, _ = http.post("/v1/claim", {**CLAIM, **over})
    assert status == 201, body
    return body["lease_token"]


def complete(http, lease, state="succeeded", resource_id="INV-1"):
    status, body, _ = http.post("/v1/complete", {**REF, "lease_token": lease, "state": state,
                                                 "result": {"resource_id": resource_id}})
    assert status == 200, body
    return body


def mismatch(http, amount=999):
    status, body, _ = http.post("/v1/claim", {**CLAIM, "payload": {"amount": amount}})
    assert status == 422, body
    return body


times = st.integers(T0 - 10 * SECOND, T0 + 10 * SECOND)
versions = st.one_of(st.none(), st.tuples(st.sampled_from(["int", "time"]), st.integers(4, 6)))


@st.composite
def stored(draw, tenant_id: int) -> domain.Record:
    state = draw(st.sampled_from(["in_progress", "succeeded", "failed", "released",
                                  "needs_reconciliation"]))
    lease = draw(times) if state == "in_progress" else draw(st.one_of(st.none(), times))
    version = draw(versions)
    return domain.Record(
        id=1, tenant_id=tenant_id, scope="s", key="k", state=state,
        fingerprint=draw(st.sampled_from([None, "fp1", "fp2"])), attempt=draw(st.integers(1, 3)),
        incarnation=1, lease_token_hash="a" * 64, lease_acquired_at=T0 - 20 * SECOND,
        lease_expires_at=lease, on_stale=draw(st.sampled_from(["retry", "reconcile"])),
        first_seen_at=T0 - 20 * SECOND, last_seen_at=T0 - 20 * SECOND, expires_at=draw(times),
        duplicate_count=draw(st.integers(0, 3)), checkpoint_step=None,
        checkpoint_resource_id=None, checkpoint_at=None,
        result="{}" if state in ("succeeded", "failed") else None,
        version_kind=version[0] if version else None, version=version[1] if version else None)
