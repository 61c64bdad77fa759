"""The claim's single SQL statement and the domain agree on every stored state.

The one-statement claim counts a plain repeat inside INSERT ... ON CONFLICT DO UPDATE WHERE
<predicate>. That predicate restates part of the domain's table in SQL; this test generates
stored records and claims and checks that the database counts exactly the claims the
domain answers with COUNT_REPEAT, and leaves every other record untouched.
"""
from __future__ import annotations

from dataclasses import astuple

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, insert

from keystore_service.domain import records as domain
from keystore_service.storage.records import new_record_values
from keystore_service.storage.tables import records
from tests.support import SECOND, T0

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


@settings(max_examples=500, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_sql_counts_exactly_the_repeats_the_domain_counts(ks, tenant_id, data):
    r = data.draw(stored(tenant_id))
    now = data.draw(times)
    fp = data.draw(st.sampled_from([None, "fp1", "fp2"]))
    kind, version = data.draw(versions) or (None, None)
    engine = ks.database.engine
    with engine.begin() as conn:
        conn.execute(delete(records))
        conn.execute(insert(records).values(dict(zip([c.name for c in records.c], astuple(r),
                                                     strict=True))))
    values = new_record_values(tenant_id, "s", "k", fp, "b" * 64, now, now + SECOND,
                               now + 60 * SECOND, "reconcile", kind, version)
    row = ks.service.records.claim(values)
    decision = domain.decide_claim(r, domain.ClaimRequest(fp, kind, version), now)
    # needs_reconciliation repeats also count on their review: the slow path does both
    if decision.action is domain.Action.COUNT_REPEAT and r.state != "needs_reconciliation":
        assert row is not None and row.duplicate_count == r.duplicate_count + 1
        assert row.last_seen_at == now and row.state == r.state
        assert row.lease_token_hash == r.lease_token_hash
    else:
        assert row is None, decision
        assert ks.service.records.get(tenant_id, "s", "k") == r  # untouched
