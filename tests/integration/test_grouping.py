"""Group commit on both databases: claims sent as one statement get exactly the outcomes,
and leave exactly the records, that the same claims sent one by one do.

Two tenants get the same records in every state a claim can meet; then the same claims run
one by one for one tenant, and for the other as one group (queued behind a statement held in
flight, so the group's size is known) on real threads."""
from __future__ import annotations

import threading
import time

import pytest

from keystore_service.service.claims import Claim
from tests.integration.support import outcome, race
from tests.support import T0

SCOPE = "grouped"


def c(key, fp="fp", version=None, ttl=3600, lease=3600, on_stale="reconcile"):
    return Claim(SCOPE, key, fp, ttl, lease, on_stale, "int" if version else None, version)


def set_up(ks, tenant):
    """Records in each state a claim can meet, made one by one; then 10 s pass."""
    s = ks.service

    def done(claim, result='{"id": 1}'):
        got = s.claim(tenant, claim)
        s.complete(tenant, SCOPE, claim.key, got.lease_token, "succeeded", result)
    done(c("done"))
    done(c("done-other-payload"))
    s.claim(tenant, c("live"))
    s.claim(tenant, c("stale-retry", lease=1, on_stale="retry"))
    s.claim(tenant, c("stale-reconcile", lease=1))
    got = s.claim(tenant, c("released"))
    s.release(tenant, SCOPE, "released", got.lease_token, None)
    done(c("expired", ttl=5, lease=1))
    done(c("older-version", version=2))
    done(c("newer-version", version=1))
    done(c("kind-conflict", version=1))
    s.claim(tenant, c("held", lease=1))  # needs reconciliation once claimed again below
    ks.service.clock.advance(10)
    _try(s.claim, tenant, c("held"))  # needs_reconciliation, with a review


CLAIMS = [c("new-1"), c("new-2"), c("done"), c("done-other-payload", fp="other"), c("live"),
          c("stale-retry", lease=60, on_stale="retry"), c("stale-reconcile"), c("released"),
          c("expired"), c("older-version", version=1), c("newer-version", version=2),
          c("kind-conflict"), c("held"), c("new-1"), c("done"), c("live", fp="other")]


def answer(result):
    """What a claim answered, without what differs between tenants (ids, tokens)."""
    record = getattr(result, "record", None)
    return (outcome(result), None if record is None else (
        record.state, record.attempt, record.incarnation, record.duplicate_count,
        record.fingerprint, record.version))


def stored(ks, tenant):
    with ks.database.connection() as cur:
        cur.execute("SELECT key, state, attempt, incarnation, duplicate_count, fingerprint, "
                    "version, first_seen_at, last_seen_at, expires_at, review_id IS NULL "
                    "FROM records WHERE tenant_id = %s ORDER BY key"
                    .replace("%s", "?" if ks.database.sqlite else "%s"), (tenant,))
        return cur.fetchall()


def test_a_group_answers_and_writes_as_one_by_one(ks, clock, monkeypatch):
    one_by_one = ks.accounts.create_tenant("one-by-one", T0)
    grouped = ks.accounts.create_tenant("grouped", T0)
    ks.service.clock = clock
    for tenant in (one_by_one, grouped):
        clock.now = T0
        set_up(ks, tenant)
    assert stored(ks, one_by_one) == stored(ks, grouped)

    groups = ks.service.groups
    assert groups is not None, "group commit is on by default"
    monkeypatch.setattr(ks.service, "groups", None)  # the reference: each claim alone
    expected = [answer(_try(ks.service.claim, one_by_one, claim)) for claim in CLAIMS]
    monkeypatch.setattr(ks.service, "groups", groups)

    # One claim in flight, held until every other claim has queued behind it.
    real, held = ks.service.records.claim_many, threading.Event()
    released: list[int] = []  # how many claims were queued when the held one went on

    def held_in_flight(many):
        if not held.is_set():
            held.set()
            deadline = time.monotonic() + 30  # a bound only: every claim queues in well under 1 s
            while len(groups._queue) < len(CLAIMS) and time.monotonic() < deadline:
                time.sleep(0.002)
            released.append(len(groups._queue))
        return real(many)
    monkeypatch.setattr(ks.service.records, "claim_many", held_in_flight)
    before = (groups.groups, groups.members)
    got: dict = {}
    blocker = threading.Thread(target=lambda: ks.service.claim(grouped, c("blocker")))
    blocker.start()
    held.wait(10)
    threads = []
    for i, claim in enumerate(CLAIMS):
        threads.append(threading.Thread(target=lambda i=i, claim=claim: got.__setitem__(
            i, answer(_try(ks.service.claim, grouped, claim)))))
        threads[-1].start()
        queued_by = time.monotonic() + 30  # bounded, as the held claim's wait is
        # The last claim's queueing lets the held one go on, and the queue may have been
        # taken as one group before this loop looks: then the held claim saw them all.
        while len(groups._queue) <= i and not released and time.monotonic() < queued_by:
            time.sleep(0.001)  # queued in this order: the same order as above
        assert len(groups._queue) > i or released == [len(CLAIMS)], \
            f"claim {i} was not queued behind the held one"
    for t in [blocker, *threads]:
        t.join(30)
    statements, members = groups.groups - before[0], groups.members - before[1]
    # the blocker alone; the 16 claims (14 distinct keys) in one group; each key's second
    # claim in the next
    assert (statements, members, groups.failed) == (3, 1 + len(CLAIMS), 0)
    assert [got[i] for i in range(len(CLAIMS))] == expected

    # ... and the same records: states, attempts, counts, first/last seen, expiry, reviews
    assert _without_blocker(stored(ks, grouped)) == stored(ks, one_by_one)


def _without_blocker(rows):
    return [row for row in rows if row[0] != "blocker"]


def _try(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # the refusals, compared by their code
        return exc


@pytest.mark.parametrize("round_", range(3))
def test_grouped_first_claims_of_one_key_have_one_winner(ks, tenant_id, round_):
    """Real threads at once: the key's claims queue behind one another's group, and the
    database still picks one winner (with other keys' claims alongside)."""
    results = race(lambda i: ks.service.claim(tenant_id, c("same" if i % 2 else f"k-{i}")),
                   n=32)
    same = [outcome(r) for i, r in enumerate(results) if i % 2]
    assert sorted(same) == ["acquired"] + ["in_progress"] * 15
    assert all(outcome(r) == "acquired" for i, r in enumerate(results) if not i % 2)
    record = ks.service.lookup(tenant_id, SCOPE, "same")
    assert record.duplicate_count == 15  # every repeat counted once, none twice
