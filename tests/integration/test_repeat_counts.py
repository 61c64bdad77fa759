"""Repeats counted later (KEYSTORE_ASYNC_REPEAT_COUNTS, service/counting.py), both databases:
a repeat answered replay or in_progress writes nothing in its request; the worker writes the
counts in one statement within a second. The answers, the rules and the records are as with
counts written in the claim, once the counts are written."""
from __future__ import annotations

import time

import pytest

from keystore_service import bootstrap
from keystore_service import errors
from keystore_service.service.claims import Claim
from keystore_service.settings import Settings
from tests.conftest import TEST_KEY
from tests.integration.support import outcome, race
from tests.support import T0


@pytest.fixture
def counted_later(database_url, clock):
    keystore = bootstrap.build(Settings(database_url=database_url, secret_key=TEST_KEY,
                                         async_repeat_counts=True), clock)
    keystore.service.counts.interval = 3600  # the tests write by hand, unless they say
    yield keystore
    keystore.service.counts.close()
    keystore.database.engine.dispose()


def c(key, fp="fp", lease=60, on_stale="reconcile", ttl=3600):
    return Claim("orders", key, fp, ttl, lease, on_stale)


def stored(ks, tenant, key):
    return ks.service.records.get(tenant, "orders", key)


def test_replays_are_answered_from_a_read_and_counted_in_one_write(counted_later, clock):
    ks = counted_later
    tenant = ks.accounts.create_tenant("acme", T0)
    first = ks.service.claim(tenant, c("o-1"))
    ks.service.complete(tenant, "orders", "o-1", first.lease_token, "succeeded", '{"id": 7}')
    before = stored(ks, tenant, "o-1")
    answers = []
    for _ in range(3):
        clock.advance(1)
        answers.append(ks.service.claim(tenant, c("o-1")))
    assert [a.outcome.value for a in answers] == ["replay"] * 3
    assert [a.record.duplicate_count for a in answers] == [1, 2, 3]  # each answer its own
    assert answers[-1].record.last_seen_at == clock.now
    assert stored(ks, tenant, "o-1") == before  # nothing written yet
    assert ks.service.counts.flush() == 1  # one record's counts, one statement
    after = stored(ks, tenant, "o-1")
    assert (after.duplicate_count, after.last_seen_at) == (3, clock.now)
    # a repeat never moves first_seen_at or expires_at, counted now or later
    assert (after.first_seen_at, after.expires_at, after.result) == (
        before.first_seen_at, before.expires_at, before.result)


def test_in_progress_is_counted_later_and_needs_reconciliation_at_once(counted_later, clock):
    ks = counted_later
    tenant = ks.accounts.create_tenant("acme", T0)
    ks.service.claim(tenant, c("live"))
    with pytest.raises(errors.InProgress) as busy:
        ks.service.claim(tenant, c("live"))
    assert busy.value.record.duplicate_count == 1 and stored(ks, tenant, "live") \
        .duplicate_count == 0
    ks.service.claim(tenant, c("stale", lease=1))
    clock.advance(5)
    for n in (1, 2):  # the review counts too: that path writes in the claim, as before
        with pytest.raises(errors.NeedsReconciliation):
            ks.service.claim(tenant, c("stale"))
        assert stored(ks, tenant, "stale").duplicate_count == n
    ks.service.counts.flush()
    assert stored(ks, tenant, "live").duplicate_count == 1


def test_the_other_rules_are_decided_and_written_in_the_claim(counted_later, clock):
    ks = counted_later
    tenant = ks.accounts.create_tenant("acme", T0)
    got = ks.service.claim(tenant, c("o-2"))
    ks.service.complete(tenant, "orders", "o-2", got.lease_token, "succeeded", "{}")
    with pytest.raises(errors.FingerprintMismatch):
        ks.service.claim(tenant, c("o-2", fp="other"))
    assert stored(ks, tenant, "o-2").review_id is not None
    got = ks.service.claim(tenant, c("o-3", lease=1, on_stale="retry"))
    clock.advance(5)
    again = ks.service.claim(tenant, c("o-3", on_stale="retry"))
    assert (again.outcome.value, again.record.attempt) == ("acquired", 2)
    resumed = ks.service.claim(tenant, Claim("orders", "o-4", "fp", 3600, 60, "reconcile",
                                             lease_token="lt_" + "a" * 32))
    lost = ks.service.claim(tenant, Claim("orders", "o-4", "fp", 3600, 60, "reconcile",
                                          lease_token="lt_" + "a" * 32))
    assert (resumed.outcome.value, lost.outcome.value, lost.resumed) == (
        "acquired", "acquired", True)
    assert ks.service.counts.flush() == 0  # none of these was a counted repeat


def test_a_count_for_an_incarnation_replaced_since_is_dropped(counted_later, clock):
    ks = counted_later
    tenant = ks.accounts.create_tenant("acme", T0)
    got = ks.service.claim(tenant, c("o-5", ttl=10))
    ks.service.complete(tenant, "orders", "o-5", got.lease_token, "succeeded", "{}")
    ks.service.claim(tenant, c("o-5"))  # a replay, counted later
    clock.advance(11)
    again = ks.service.claim(tenant, c("o-5"))  # expired: a new incarnation
    assert again.record.incarnation == 2
    ks.service.counts.flush()
    assert stored(ks, tenant, "o-5").duplicate_count == 0


def test_racing_first_claims_still_have_one_winner_and_every_repeat_counts(counted_later):
    ks = counted_later
    tenant = ks.accounts.create_tenant("acme", T0)
    results = race(lambda i: ks.service.claim(tenant, c("same")), n=16)
    assert sorted(map(outcome, results)) == ["acquired"] + ["in_progress"] * 15
    ks.service.counts.flush()
    assert stored(ks, tenant, "same").duplicate_count == 15


def test_an_outage_keeps_the_counts_for_the_next_write(counted_later, monkeypatch):
    ks = counted_later
    tenant = ks.accounts.create_tenant("acme", T0)
    got = ks.service.claim(tenant, c("o-6"))
    ks.service.complete(tenant, "orders", "o-6", got.lease_token, "succeeded", "{}")
    ks.service.claim(tenant, c("o-6"))
    counts = ks.service.counts
    real = counts._write

    def down(rows):
        raise errors.Unavailable()
    counts._write = down
    assert counts.flush() == 0
    ks.service.claim(tenant, c("o-6"))
    counts._write = real
    assert counts.flush() == 1
    assert stored(ks, tenant, "o-6").duplicate_count == 2


def test_the_worker_writes_within_a_second_by_itself(counted_later):
    ks = counted_later
    tenant = ks.accounts.create_tenant("acme", T0)
    got = ks.service.claim(tenant, c("o-7"))
    ks.service.complete(tenant, "orders", "o-7", got.lease_token, "succeeded", "{}")
    ks.service.counts.interval = 0.2  # (the writer starts with the first count)
    ks.service.claim(tenant, c("o-7"))
    deadline = time.monotonic() + 5
    while stored(ks, tenant, "o-7").duplicate_count != 1:
        assert time.monotonic() < deadline, "the count was never written"
        time.sleep(0.05)
