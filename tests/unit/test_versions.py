"""Versions: integers, and RFC 3339 timestamps compared as UTC instants."""
from __future__ import annotations

import pytest

from keystore_service.domain import records as domain
from keystore_service.domain import versions
from tests.unit.support import rec


@pytest.mark.parametrize("a,b", [
    ("2026-11-30T10:00:00Z", "2026-11-30T11:00:00+01:00"),
    ("2026-11-30T10:00:00Z", "2026-11-30T05:30:00-04:30"),
    ("2026-11-30T10:00:00.5Z", "2026-11-30T10:00:00.500000000z"),
    ("2026-12-01T00:30:00+01:00", "2026-11-30t23:30:00Z"),
])
def test_timestamps_are_compared_as_instants(a, b):
    assert versions.parse(a) == versions.parse(b)


def test_order_of_timestamps_to_the_microsecond():
    assert versions.parse("2026-11-30T10:00:00.000001Z")[1] \
        > versions.parse("2026-11-30T10:00:00Z")[1]
    assert versions.parse("2026-11-30T10:00:00.0000009Z") == \
        versions.parse("2026-11-30T10:00:00Z")  # digits beyond the sixth are dropped
    assert versions.parse("0001-01-01T00:00:00Z")[1] < versions.parse("9999-12-31T23:59:59Z")[1]
    assert versions.parse("2026-11-30T10:00:00+00:01")[1] \
        < versions.parse("2026-11-30T10:00:00Z")[1]


def test_shown_as_utc():
    assert versions.show(*versions.parse("2026-11-30T11:00:00.25+01:00")) == \
        "2026-11-30T10:00:00.25Z"
    assert versions.show(*versions.parse(7)) == 7
    assert versions.show(None, None) is None


@pytest.mark.parametrize("bad", [-1, 2**63, True, "", "2026-11-30", "2026-11-30T10:00:00",
                                 "2026-13-01T00:00:00Z", "2026-11-30T10:00:00+24:00",
                                 "2026-11-30T25:00:00Z", "2026-11-30 10:00:00Z",
                                 "0000-01-01T00:00:00Z", "7"])
def test_invalid_versions(bad):
    with pytest.raises(ValueError):
        versions.parse(bad)


def vclaim(r, fp="fp1", version=None, kind="int"):
    q = domain.ClaimRequest(fp, kind if version is not None else None, version)
    return domain.decide_claim(r, q, r.first_seen_at + 1)


@pytest.mark.parametrize("state", ["succeeded", "failed"])
def test_the_version_table_for_a_finished_record(state):
    r = rec(state=state, lease_expires_at=None, result="{}", version_kind="int", version=5)
    assert vclaim(r, version=6).action is domain.Action.NEW_INCARNATION
    assert vclaim(r, version=6, fp="other").outcome is domain.Outcome.ACQUIRED
    assert vclaim(r, version=5).outcome is domain.Outcome.REPLAY
    assert vclaim(r, version=5, fp="other").outcome is domain.Outcome.FINGERPRINT_MISMATCH
    assert vclaim(r, version=4).outcome is domain.Outcome.REPLAY
    assert vclaim(r, version=4, fp="other").outcome is domain.Outcome.REPLAY
    assert vclaim(r, version=None).outcome is domain.Outcome.REPLAY


def test_an_older_or_equal_version_of_an_unfinished_record_goes_by_the_claim_table():
    r = rec(version_kind="int", version=5)  # in progress, lease live
    assert vclaim(r, version=4).outcome is domain.Outcome.IN_PROGRESS
    assert vclaim(r, version=5, fp="other").outcome is domain.Outcome.FINGERPRINT_MISMATCH
    released = rec(state="released", lease_expires_at=None, version_kind="int", version=5)
    assert vclaim(released, version=1).action is domain.Action.NEXT_ATTEMPT
    assert vclaim(released, version=5, fp="other").outcome is \
        domain.Outcome.FINGERPRINT_MISMATCH


def at(r, seconds):
    return r.first_seen_at + int(seconds * domain.SECOND)


@pytest.mark.parametrize("fp", ["fp1", "other", None])
def test_a_newer_version_is_never_a_mismatch(fp):
    """Contract v1.1: a poller whose first attempt was released, or is still running, was
    refused with 422 when the record changed meanwhile, and the key stayed stuck."""
    q = domain.ClaimRequest(fp, "int", 6)
    released = rec(state="released", lease_expires_at=None, version_kind="int", version=5)
    d = domain.decide_claim(released, q, at(released, 1))
    assert (d.outcome, d.action, d.row) == (domain.Outcome.ACQUIRED,
                                            domain.Action.NEW_INCARNATION,
                                            "released, newer version")
    live = rec(version_kind="int", version=5)
    d = domain.decide_claim(live, q, at(live, 1))
    assert (d.outcome, d.action) == (domain.Outcome.IN_PROGRESS, domain.Action.COUNT_REPEAT)
    stale = rec(version_kind="int", version=5, lease_expires_at=at(live, 2))
    d = domain.decide_claim(stale, q, at(stale, 3))
    assert d.outcome is domain.Outcome.NEEDS_RECONCILIATION
    retry = rec(version_kind="int", version=5, lease_expires_at=at(live, 2), on_stale="retry")
    d = domain.decide_claim(retry, q, at(retry, 3))
    assert (d.outcome, d.action) == (domain.Outcome.ACQUIRED, domain.Action.NEXT_ATTEMPT)
    waiting = rec(state="needs_reconciliation", version_kind="int", version=5)
    d = domain.decide_claim(waiting, q, at(waiting, 1))
    assert d.outcome is domain.Outcome.NEEDS_RECONCILIATION
    finished = rec(state="succeeded", lease_expires_at=None, result="{}", version_kind="int",
                   version=5)
    d = domain.decide_claim(finished, q, at(finished, 1))
    assert (d.outcome, d.action) == (domain.Outcome.ACQUIRED, domain.Action.NEW_INCARNATION)


def test_an_unversioned_finished_record_replays_a_versioned_claim():
    r = rec(state="succeeded", lease_expires_at=None, result="{}")
    assert vclaim(r, version=9).outcome is domain.Outcome.REPLAY


def test_the_other_kind_is_refused_in_every_state_but_expired():
    for state in ("in_progress", "succeeded", "released", "needs_reconciliation"):
        r = rec(state=state, version_kind="time", version=5, result="{}")
        assert vclaim(r, version=5).outcome is domain.Outcome.VERSION_KIND_CONFLICT
    r = rec(state="succeeded", version_kind="time", version=5, result="{}")
    q = domain.ClaimRequest("fp1", "int", 5)
    assert domain.decide_claim(r, q, r.expires_at).action is domain.Action.NEW_INCARNATION
