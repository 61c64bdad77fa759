"""The issues' and notices' metrics, read from the database at scrape time (so they are
right across processes, as the open-review gauges are): keystore_issues_open{kind} and
keystore_alert_notices_total{outcome} (sent, failed: given up)."""
from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from keystore_service.domain.issues import KINDS
from keystore_service.storage.alerts import AlertStore
from keystore_service.storage.issues import IssueStore


class AlertGauges:
    def __init__(self, issues: IssueStore, alerts: AlertStore):
        self.issues, self.alerts = issues, alerts

    def collect(self) -> Iterable:
        open_ = GaugeMetricFamily("keystore_issues_open", "Open issues (not acknowledged, "
                                  "resolved or ignored)", labels=["kind"])
        counts = self.issues.open_counts()
        for kind in KINDS:
            open_.add_metric([kind], counts.get(kind, 0))
        yield open_
        notices = CounterMetricFamily("keystore_alert_notices", "Alert notices sent, and "
                                      "given up after their retries", labels=["outcome"])
        done = self.alerts.notice_counts()
        for outcome in ("sent", "failed"):
            notices.add_metric([outcome], done.get(outcome, 0))
        yield notices

    def exposition(self) -> bytes:
        """These metrics' text, appended to /metrics' (metrics.exposition)."""
        registry = CollectorRegistry()
        registry.register(self)
        return generate_latest(registry)
