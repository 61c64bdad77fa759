"""The alerts' loop, run beside each relay (Gateway.start_relay): every
`alert_watch_seconds` the watchers look (issues.Issues.watch), and every second the notices
due are sent from the outbox, each under a lease, through the one outbound client (its
address rules and deadline) or SMTP, retried with backoff for a day. At most
NOTICES_PER_HOUR notices per channel per hour: beyond that notices are held, and one
"N more issues" notice tells of them when the hour allows. The daily report of the day
before goes to channels with `daily_report` after midnight UTC, once (a compare-and-set of
the channel's report day)."""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Optional

from keystore_service.domain import issues as words
from keystore_service.domain.issues import HOUR, SECOND, NoticeState
from keystore_service.domain.records import Micros
from keystore_service.gateway import mail, notices
from keystore_service.gateway.issues import Issues
from keystore_service.gateway.outbound import Outbound
from keystore_service.service.sealing import Sealer
from keystore_service.storage.alerts import AlertStore, Channel, Notice

log = logging.getLogger("keystore.alerts")
SEND_SECONDS = 10  # a Slack or webhook notice's whole request
LEASE = (SEND_SECONDS + mail.SMTP_SECONDS + 15) * SECOND  # outlives any one send
BATCH = 16  # notices taken at once
KEEP = 4096  # bytes of a channel's answer read (and dropped)
GIVE_UP_STATUSES = range(400, 500)  # but 408, 425, 429: a channel that will not take it
RETRY_STATUSES = {408, 425, 429}


class Alerts:
    def __init__(self, issues: Issues, store: AlertStore, sealer: Sealer, outbound: Outbound,
                 clock: Callable[[], Micros], smtp: Optional[mail.SmtpServer],
                 report: Optional[Callable[[int, str, int], str]] = None,
                 gauges: Any = None):
        self.issues, self.store, self.sealer, self.outbound = issues, store, sealer, outbound
        self.clock, self.smtp, self.report = clock, smtp, report
        self.gauges = gauges  # the /metrics collector of issues and notices
        self.holder = f"{socket.gethostname()}:{os.getpid()}:alerts"[:64]

    # --- sending --------------------------------------------------------------------------

    def send_due(self) -> int:
        """Send the notices due now; how many were taken."""
        now = self.clock()
        taken = self.store.take(self.holder, now, now + LEASE, BATCH)
        for notice in taken:
            try:
                self._one(notice)
            except Exception:  # one notice's bug must not stop the others; its lease ends
                log.exception("alert notice %s failed", notice.id)
        return len(taken)

    def _one(self, notice: Notice) -> None:
        channel = self.store.by_id(notice.tenant_id, notice.channel_id)
        if channel is None:  # deleted meanwhile: its notices went with it
            return
        now = self.clock()
        body = json.loads(notice.body)
        with self.store.transaction() as cur:
            n, first = self.store.sent_since(cur, channel, now - HOUR)
            if notice.event not in ("test", "more") and n >= words.NOTICES_PER_HOUR:
                self.store.settle(cur, notice, self.holder, NoticeState.HELD.value, now)
                if self.store.hold(cur, channel, now):
                    self.store.add_notice(cur, channel, None, "more", now, {}, now,
                                          at=(first or now) + HOUR)
                return
            if notice.event == "more":
                held = self.store.held(cur, channel)
                if not held:  # nothing was held after all (its channel's notices went)
                    self.store.settle(cur, notice, self.holder, NoticeState.FOLDED.value, now)
                    self.store.fold(cur, channel, 0)
                    return
                body = {"count": len(held), "upto": max((h.id for h in held), default=0),
                        "kinds": sorted({json.loads(h.body).get("kind", h.event)
                                         for h in held}),
                        "url": f"{self.issues.base_url.rstrip('/')}/ui/issues"}
        error = self._send(channel, notice, body)
        self._settle(channel, notice, body, error)

    def _send(self, channel: Channel, notice: Notice, body: dict) -> Optional[str]:
        """None when the channel took it; else why not ("give up: ..." when retrying cannot
        help)."""
        key = notices.idempotency_key(notice)
        try:
            opened = self.sealer.open(channel.sealed)
        except ValueError:
            return "no configured KEYSTORE_SECRET_KEY opens this channel's url"
        if channel.kind == "email":
            if self.smtp is None:
                return "no KEYSTORE_SMTP_URL"
            subject, text = notices.email(notice.event, body)
            return mail.send(self.smtp, channel.to_address or "", subject, text, key)
        headers = {"Content-Type": "application/json", "Idempotency-Key": key,
                   "User-Agent": "keystore-alerts"}
        if channel.kind == "slack":
            raw = notices.slack(notice.event, body)
        else:
            raw, signed = notices.webhook(notice.event, body, key, opened.get("secret"),
                                          self.clock() // SECOND)
            headers |= signed
        reply = self.outbound.request("POST", opened["url"], raw, headers, SEND_SECONDS, KEEP)
        if reply.status is not None and 200 <= reply.status < 300:
            return None
        if reply.status is None:
            return reply.error or "no answer"
        if reply.status in GIVE_UP_STATUSES and reply.status not in RETRY_STATUSES:
            return f"give up: status {reply.status}"
        return f"status {reply.status}"

    def _settle(self, channel: Channel, notice: Notice, body: dict,
                error: Optional[str]) -> None:
        now = self.clock()
        with self.store.transaction() as cur:
            if error is None:
                if self.store.settle(cur, notice, self.holder, NoticeState.SENT.value, now) and \
                        notice.event == "more":
                    self.store.fold(cur, channel, body["upto"])
                return
            attempt = notice.attempts + 1
            final = error.startswith("give up") or error.startswith("the destination") or \
                now - notice.created_at >= words.NOTICE_GIVE_UP
            self.store.settle(cur, notice, self.holder,
                              NoticeState.FAILED.value if final else NoticeState.QUEUED.value, now,
                              next_at=now + words.backoff_seconds(attempt) * SECOND,
                              error=error[:200])
        log.warning("alert notice to channel %s: %s%s", channel.name, error,
                    " (given up)" if final else "")

    # --- the daily report -----------------------------------------------------------------

    def reports_due(self) -> int:
        """Queue yesterday's report (UTC) to each channel with daily_report that has not had
        it; how many were queued."""
        if self.report is None:
            return 0
        now = self.clock()
        day = (datetime.fromtimestamp(now / SECOND, UTC).date() - timedelta(days=1)).isoformat()
        made = 0
        for channel in self.store.all():
            if not channel.daily_report or (channel.report_day or "") >= day:
                continue
            text = self.report(channel.tenant_id, day, now)
            with self.store.transaction() as cur:
                if self.store.claim_report_day(cur, channel, day):
                    made += self.store.add_notice(cur, channel, None, "report", now,
                                                  {"text": text, "date": day}, now)
        return made

    # --- the loop -------------------------------------------------------------------------

    def start(self, watch_every: float, alive: Callable[[], bool] = lambda: True) -> AlertLoop:
        return AlertLoop(self, watch_every, alive).start()


class AlertLoop:
    """One daemon thread per process: the watchers every `watch_every` seconds, the outbox
    every second (and at once when woken), the daily report every minute."""

    def __init__(self, alerts: Alerts, watch_every: float, alive: Callable[[], bool]):
        self.alerts, self.watch_every, self.alive = alerts, watch_every, alive
        self._stop, self._wake = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, name="keystore-alerts", daemon=True)

    def start(self) -> AlertLoop:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(5)

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        ticks = 0
        while not self._stop.is_set() and self.alive():
            every = max(1, round(self.watch_every)) if self.watch_every > 0 else 0
            for step, due in ((self.alerts.issues.watch, every and ticks % every == 0),
                              (self.alerts.reports_due, ticks % 60 == 0),
                              (self.alerts.send_due, True)):
                if due:
                    try:
                        step()
                    except Exception:  # the database away: logged, tried at the next tick
                        log.exception("alerts: %s failed", step.__name__)
            ticks += 1
            self._wake.wait(1.0)
            self._wake.clear()


def _outbound(s: dict) -> str:
    """A scope's sends and checks' settlements, when it had any (issue 28)."""
    if not any(s.get(k) for k in ("sent", "settled_found", "settled_absent",
                                  "waiting_for_person")):
        return ""
    return (f"; sent {s['sent']}, settled by check {s['settled_found']} found / "
            f"{s['settled_absent']} absent, waiting for a person {s['waiting_for_person']}")


def report_text(reports: Any) -> Callable[[int, str, int], str]:
    """The daily report as a notice's text, from storage/reports.Reports.daily."""
    from datetime import date

    def text(tenant_id: int, day: str, now: int) -> str:
        data = reports.daily(tenant_id, date.fromisoformat(day), now)
        lines = [f"Daily report {day}:"]
        for s in data["scopes"]:
            lines.append(f"- {s['scope']}: claimed {s['claimed']}, succeeded "
                         f"{s['succeeded']}, failed {s['failed']}, duplicates suppressed "
                         f"{s['duplicates_suppressed']}, waiting for review "
                         f"{s['waiting_for_review']}" + _outbound(s))
        return "\n".join(lines if data["scopes"] else [*lines, "nothing happened"])
    return text
