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
from tests.support import SECOND

from .support import stored, times, versions


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
