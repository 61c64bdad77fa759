"""The reconciler's and the sweeper's SQL agree with the domain's rules on every stored
state (as test_fast_path does for the claim): generated records, both backends."""
from __future__ import annotations

from dataclasses import astuple

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, insert

from keystore_service.domain import upkeep
from keystore_service.storage.maintenance import Maintenance
from keystore_service.storage.tables import records
from tests.integration.support import stored, times
from tests.support import SECOND


def put(ks, r) -> None:
    with ks.database.engine.begin() as conn:
        conn.execute(delete(records))
        conn.execute(insert(records).values(dict(zip([c.name for c in records.c], astuple(r),
                                                     strict=True))))


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_reconcilers_sql_takes_exactly_what_the_domain_says(ks, tenant_id, data):
    r = data.draw(stored(tenant_id))
    now = data.draw(times)
    put(ks, r)
    with ks.database.transaction() as cur:
        taken = Maintenance(ks.database).stale(cur, now, 10)
    assert bool(taken) is upkeep.reconcile_due(r, now), (r, now)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), keep=st.sampled_from([0, 5 * SECOND]),
       keep_unresolved=st.sampled_from([0, 3 * SECOND, 30 * SECOND]),
       review=st.sampled_from([None, 7]))
def test_the_sweepers_sql_takes_exactly_what_the_domain_says(ks, tenant_id, data, keep,
                                                            keep_unresolved, review):
    from dataclasses import replace
    r = replace(data.draw(stored(tenant_id)), review_id=review)
    now = data.draw(times)
    put(ks, r)
    with ks.database.transaction() as cur:
        ids = Maintenance(ks.database).doomed(cur, now, now - keep, now - keep_unresolved, 10)
    assert bool(ids) is upkeep.sweepable(r, now, keep, keep_unresolved), (r, now)
