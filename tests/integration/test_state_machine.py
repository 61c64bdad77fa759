"""A Hypothesis state machine drives claim, complete, release, extend, expire and the clock
against a small reference model of docs/api.md, on a real database (both backends).

The model below is written from docs/api.md alone, independently of keystore_service.domain.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Optional

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from keystore_service import errors
from keystore_service.service.claims import Claim
from tests.support import SECOND

KEYS = ("k1", "k2")
FPS = (None, "fpA", "fpB")
RESULTS = ('{"resource_id":"r1"}', '{"resource_id":"r2"}')
_tenants = itertools.count()


@dataclass
class Model:
    state: str
    fp: Optional[str]
    attempt: int
    token: str
    lease_until: Optional[int]
    on_stale: str
    first_seen: int
    expires_at: int
    dup: int = 0
    result: Optional[str] = None
    old_tokens: list = field(default_factory=list)

    def live(self, now):
        return self.state == "in_progress" and now < self.lease_until

    def expired(self, now):
        return now >= self.expires_at and not self.live(now)


def machine(ks, clock):
    tenant_id = 0

    class KeyStoreMachine(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            nonlocal tenant_id  # a tenant of its own per run: no records from earlier runs
            tenant_id = ks.accounts.create_tenant(f"sm{next(_tenants)}", clock.now)
            self.model: dict[str, Model] = {}
            self.retired: dict[str, list] = {k: [] for k in KEYS}

        @rule(key=st.sampled_from(KEYS), fp=st.sampled_from(FPS),
              on_stale=st.sampled_from(["retry", "reconcile"]), ttl=st.integers(1, 6),
              lease=st.integers(1, 3))
        def claim(self, key, fp, on_stale, ttl, lease):
            now, m = clock.now, self.model.get(key)
            if m is not None and m.expired(now):
                self.retired[key].append(m.token)
                m = None
            expected = self._expect_claim(m, fp, now)
            try:
                got = ks.service.claim(tenant_id, Claim("sm", key, fp, ttl, lease, on_stale))
                outcome = got.outcome.value
            except (errors.InProgress, errors.NeedsReconciliation,
                    errors.FingerprintMismatch) as exc:
                outcome, got = exc.outcome, None
            assert outcome == expected, (outcome, expected, m)
            if outcome == "acquired":
                if m is None:
                    self.model[key] = Model("in_progress", fp, 1, got.lease_token,
                                            now + lease * SECOND, on_stale, now,
                                            now + ttl * SECOND)
                else:
                    m.old_tokens.append(m.token)
                    m.state, m.attempt, m.token = "in_progress", m.attempt + 1, got.lease_token
                    m.lease_until, m.on_stale = now + lease * SECOND, on_stale
            elif outcome in ("replay", "in_progress", "needs_reconciliation"):
                m.dup += 1
                if outcome == "needs_reconciliation":
                    m.state = "needs_reconciliation"

        @staticmethod
        def _expect_claim(m, fp, now):
            if m is None:
                return "acquired"
            if m.fp is not None and fp is not None and m.fp != fp:
                return "fingerprint_mismatch"
            if m.state == "released":
                return "acquired"
            if m.state in ("succeeded", "failed"):
                return "replay"
            if m.live(now):
                return "in_progress"
            if m.state == "in_progress" and m.on_stale == "retry":
                return "acquired"
            return "needs_reconciliation"

        def _token(self, key, old):
            m = self.model.get(key)
            if m is None:
                return "lt_never-issued"
            pool = m.old_tokens + self.retired[key]
            return pool[old % len(pool)] if old and pool else m.token

        def _holder(self, key, token, call):
            """Run a holder's call; return the error code or None, and the model record."""
            now, m = clock.now, self.model.get(key)
            if m is None:
                expected = "not_found"
            elif m.expired(now):
                expected = "expired"
            elif token != m.token:
                expected = "lease_lost"
            else:
                expected = None
            try:
                call()
                got = None
            except errors.KeystoreError as exc:
                got = exc.code
            return expected, got, m

        @rule(key=st.sampled_from(KEYS), old=st.integers(0, 3),
              state=st.sampled_from(["succeeded", "failed"]), result=st.sampled_from(RESULTS))
        def complete(self, key, old, state, result):
            token = self._token(key, old)
            expected, got, m = self._holder(key, token, lambda: ks.service.complete(
                tenant_id, "sm", key, token, state, result))
            if expected is None:
                if m.state in ("succeeded", "failed"):
                    same = (m.state, m.result) == (state, result)
                    expected = None if same else "already_completed"
                elif m.state == "released":
                    expected = "lease_lost"
                else:
                    m.state, m.result, m.lease_until = state, result, None
            assert got == expected, (got, expected, m)

        @rule(key=st.sampled_from(KEYS), old=st.integers(0, 3))
        def release(self, key, old):
            token = self._token(key, old)
            expected, got, m = self._holder(key, token, lambda: ks.service.release(
                tenant_id, "sm", key, token, "test"))
            if expected is None:
                if m.state in ("succeeded", "failed"):
                    expected = "already_completed"
                else:
                    m.state, m.lease_until = "released", None
            assert got == expected, (got, expected, m)

        @rule(key=st.sampled_from(KEYS), old=st.integers(0, 3), lease=st.integers(1, 3))
        def extend(self, key, old, lease):
            token = self._token(key, old)
            expected, got, m = self._holder(key, token, lambda: ks.service.extend(
                tenant_id, "sm", key, token, lease, None, None))
            if expected is None:
                if m.state in ("succeeded", "failed"):
                    expected = "already_completed"
                elif m.state == "released":
                    expected = "lease_lost"
                else:
                    m.state, m.lease_until = "in_progress", clock.now + lease * SECOND
            assert got == expected, (got, expected, m)

        @rule(key=st.sampled_from(KEYS))
        def expire(self, key):
            now, m = clock.now, self.model.get(key)
            expected = ("not_found" if m is None else None if m.expired(now)
                        else "in_progress" if m.live(now) else None)
            try:
                ks.service.expire(tenant_id, "sm", key)
                got = None
            except errors.KeystoreError as exc:
                got = exc.code
            assert got == expected
            if m is not None and got is None and not m.expired(now):
                m.expires_at = now

        @rule(seconds=st.sampled_from([0.25, 0.5, 1, 2, 3]))
        def advance(self, seconds):
            clock.advance(seconds)

        @rule(key=st.sampled_from(KEYS), which=st.sampled_from(["lease", "expiry"]),
              offset=st.sampled_from([-1, 0]))
        def advance_to_a_boundary(self, key, which, offset):
            m = self.model.get(key)
            target = m and (m.lease_until if which == "lease" else m.expires_at)
            if target is not None and target + offset > clock.now:
                clock.now = target + offset  # exactly at the instant, or 1 us before it

        @invariant()
        def the_store_agrees_with_the_model(self):
            now = clock.now
            for key in KEYS:
                m = self.model.get(key)
                try:
                    r = ks.service.lookup(tenant_id, "sm", key)
                except errors.NotFound:
                    assert m is None
                    continue
                except errors.Expired:
                    assert m is not None and m.expired(now)
                    continue
                assert m is not None and not m.expired(now)
                assert (r.state, r.attempt, r.duplicate_count, r.fingerprint, r.first_seen_at,
                        r.expires_at, r.lease_expires_at, r.result) == \
                    (m.state, m.attempt, m.dup, m.fp, m.first_seen, m.expires_at,
                     m.lease_until, m.result)

    return KeyStoreMachine


def test_the_store_behaves_like_the_model(ks, clock):
    run_state_machine_as_test(
        machine(ks, clock),
        settings=settings(max_examples=60, stateful_step_count=40, deadline=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture]))
