"""Prometheus metrics, correct across gunicorn workers (prometheus-client's multiprocess
mode: `keystore serve` points PROMETHEUS_MULTIPROC_DIR at a fresh directory before the
workers fork, and removes a dead worker's live gauges).

Counters and histograms are kept per process. What the database knows better is read from it
at scrape time, so it is right however many instances and processes there are: the open-review
gauges, and keystore_lease_expiries_total, which is counted in the database in the transaction
that handles the lease (a claim, the service's reconciler, or `keystore reconcile` from cron,
a process that is never scraped).
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from typing import Any, Optional

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from keystore_service.domain.records import ReviewKind
from keystore_service.service.claims import ClaimObserver
from keystore_service.storage.gauges import Gauges

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
REVIEW_KINDS = tuple(ReviewKind)
OTHER_SCOPE = "_other"  # the label of scopes beyond the cap (bounds the series count)
AGE_BUCKETS = ((3600, "lt_1h"), (86_400, "1h_1d"), (7 * 86_400, "1d_7d"))  # then "ge_7d"
LATENCY_BUCKETS = (.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30)

CLAIMS = Counter("keystore_claims_total", "Claims by outcome", ["scope", "outcome"])
DUPLICATES = Counter("keystore_duplicates_suppressed_total",
                     "Repeats answered replay, in_progress or needs_reconciliation", ["scope"])
MISMATCHES = Counter("keystore_fingerprint_mismatches_total",
                     "Repeats refused for a different payload", ["scope"])
DB_ERRORS = Counter("keystore_database_errors_total",
                    "Requests answered 503 because the database did not answer", ["kind"])
CLAIM_GROUPS = Counter("keystore_claim_groups_total", "Claim statements sent (group commit: "
                       "one statement and one commit for the claims that came together)")
CLAIM_GROUP_MEMBERS = Counter("keystore_claim_group_members_total",
                              "Claims those statements carried (members / groups: the mean "
                              "group size)")
DURATION = Histogram("keystore_request_duration_seconds", "Request duration by endpoint",
                     ["endpoint"], buckets=LATENCY_BUCKETS)
_REPEATS = frozenset({"replay", "in_progress", "needs_reconciliation"})
LATE_REPEATS = Counter("keystore_late_repeats_total", "Keys acquired again after their "
                       "window with their old fingerprint (late repeats)", ["scope"])
HOOKS_RECEIVED = Counter("keystore_hooks_received_total", "Webhook deliveries received, by "
                         "what became of them", ["tenant", "source", "status"])
HOOK_FORWARDS = Counter("keystore_hook_forwards_total", "Forwards of accepted events, by "
                        "destination and outcome", ["tenant", "source", "destination", "outcome"])
SETTLEMENTS = Counter("keystore_settlements_total", "Checks run against records whose "
                      "outcome was unknown, by what they found: found, absent, or unresolved "
                      "(the last of its unclear tries: a person decides)",
                      ["tenant", "scope", "outcome"])
SENDS = Counter("keystore_sends_total", "Outbound sends' requests and checks by what they "
                "came to: succeeded, failed, retry, unresolved (a person decides), found, "
                "absent, unclear (a check's verdicts)", ["tenant", "connection", "outcome"])
FORWARD_DURATION = Histogram("keystore_hook_forward_duration_seconds",
                             "How long a destination took to answer a forward",
                             ["tenant", "source", "destination"], buckets=LATENCY_BUCKETS)


class Metrics(ClaimObserver):
    def __init__(self, max_scopes: int = 100, gauges: Optional[Gauges] = None):
        self.max_scopes = max_scopes
        self._scopes: set[str] = set()
        self._lock = threading.Lock()
        self.gauges = gauges

    def _scope(self, scope: str) -> str:
        if scope in self._scopes:
            return scope
        with self._lock:
            if len(self._scopes) >= self.max_scopes:
                return OTHER_SCOPE
            self._scopes.add(scope)
        return scope

    def claim(self, scope: str, outcome: str, count: int = 1) -> None:
        scope = self._scope(scope)
        CLAIMS.labels(scope, outcome).inc(count)
        if outcome in _REPEATS:
            DUPLICATES.labels(scope).inc(count)
        elif outcome == "fingerprint_mismatch":
            MISMATCHES.labels(scope).inc(count)

    def lease_expired(self, scope: str, cur: Any = None, count: int = 1) -> None:
        """Count `count` leases found run out, on `cur` (in the caller's transaction)."""
        if self.gauges is None:
            return
        self.gauges.count_expiries(cur, scope, count)

    def late_repeat(self, scope: str) -> None:
        LATE_REPEATS.labels(self._scope(scope)).inc()

    def hook_received(self, tenant: str, source: str, status: str) -> None:
        HOOKS_RECEIVED.labels(tenant, source, status).inc()

    def forward(self, tenant: str, source: str, destination: str, outcome: str,
                seconds: float) -> None:
        HOOK_FORWARDS.labels(tenant, source, destination, outcome).inc()
        if outcome not in ("filtered", "superseded"):  # nothing sent: no answer to time
            FORWARD_DURATION.labels(tenant, source, destination).observe(seconds)

    def settlement(self, tenant: str, scope: str, outcome: str) -> None:
        SETTLEMENTS.labels(tenant, self._scope(scope), outcome).inc()

    def send(self, tenant: str, connection: str, outcome: str) -> None:
        SENDS.labels(tenant, connection, outcome).inc()

    def claim_group(self, size: int) -> None:
        CLAIM_GROUPS.inc()
        CLAIM_GROUP_MEMBERS.inc(size)

    def database_error(self, kind: str = "unavailable") -> None:
        DB_ERRORS.labels(kind).inc()

    def request(self, endpoint: str, seconds: float) -> None:
        DURATION.labels(endpoint).observe(seconds)


class HookQueues:
    """keystore_hook_queue_depth{tenant,source} and keystore_hook_oldest_queued_seconds,
    from the database at scrape time (right however many relays and instances there are)."""

    def __init__(self, gauges: Gauges, clock):
        self.gauges, self.clock = gauges, clock

    def collect(self) -> Iterable:
        rows = self.gauges.hook_queues()
        depth = GaugeMetricFamily("keystore_hook_queue_depth", "Accepted events waiting to "
                                  "be forwarded", labels=["tenant", "source"])
        oldest = GaugeMetricFamily("keystore_hook_oldest_queued_seconds", "Age of the oldest "
                                   "event waiting to be forwarded", labels=["tenant", "source"])
        now = self.clock()
        for tenant, source, n, first in rows:
            depth.add_metric([tenant, source], n)
            oldest.add_metric([tenant, source], (now - first) / 1_000_000 if first else 0)
        yield depth
        yield oldest


class OpenReviews:
    """keystore_open_reviews{kind} and keystore_open_reviews_by_age{kind,age}, from the
    database at scrape time."""

    def __init__(self, gauges: Gauges, clock):
        self.gauges, self.clock = gauges, clock

    def collect(self) -> Iterable:
        rows = self.gauges.open_reviews(self.clock(), AGE_BUCKETS)
        total = GaugeMetricFamily("keystore_open_reviews", "Open review items", labels=["kind"])
        by_age = GaugeMetricFamily("keystore_open_reviews_by_age",
                                   "Open review items by age", labels=["kind", "age"])
        sums = dict.fromkeys(REVIEW_KINDS, 0)
        for kind, bucket, n in rows:
            sums[kind] = sums.get(kind, 0) + n
            by_age.add_metric([kind, bucket], n)
        for kind, n in sums.items():
            total.add_metric([kind], n)
        yield total
        yield by_age


class LeaseExpiries:
    """keystore_lease_expiries_total{scope}, from the database at scrape time (the same on
    every instance). The first `max_scopes` scopes ever counted keep their own label; later
    ones add up under `_other`, so no series ever goes down."""

    def __init__(self, gauges: Gauges, max_scopes: int):
        self.gauges, self.max_scopes = gauges, max_scopes

    def collect(self) -> Iterable:
        rows = self.gauges.lease_expiries()
        family = CounterMetricFamily(
            "keystore_lease_expiries", "Leases found run out (by a claim, the service's "
            "reconciler or `keystore reconcile`), counted in the database", labels=["scope"])
        other = sum(n for _, n in rows[self.max_scopes:])
        for scope, n in rows[:self.max_scopes]:
            family.add_metric([scope], n)
        if len(rows) > self.max_scopes:
            family.add_metric([OTHER_SCOPE], other)
        yield family


def exposition(gauges: Gauges, clock, max_scopes: int = 100) -> bytes:
    registry = CollectorRegistry()
    if os.environ.get(MULTIPROC_ENV):
        multiprocess.MultiProcessCollector(registry)
    else:
        for metric in (CLAIMS, DUPLICATES, MISMATCHES, DB_ERRORS, DURATION, HOOKS_RECEIVED,
                       HOOK_FORWARDS, FORWARD_DURATION, LATE_REPEATS, CLAIM_GROUPS,
                       CLAIM_GROUP_MEMBERS, SETTLEMENTS):
            registry.register(metric)
    registry.register(OpenReviews(gauges, clock))
    registry.register(LeaseExpiries(gauges, max_scopes))
    registry.register(HookQueues(gauges, clock))
    return generate_latest(registry)


def worker_exit(pid: int) -> None:
    if os.environ.get(MULTIPROC_ENV):
        multiprocess.mark_process_dead(pid)
