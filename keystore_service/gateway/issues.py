"""Issues: the watchers that open, count and resolve them, and what a person does to one
(acknowledge, resolve, ignore). Each transition that a channel hears of (opened, resolved)
makes its notices in the same transaction as the transition, so a notice is never lost nor
made twice: only the watcher whose insert or compare-and-set won makes them.

What the watchers read grows with the number of sources, open reviews' groups and live
issues, never with traffic: one row per source (its oldest queued event is one index step),
the open reviews counted by (tenant, scope, kind), and the live issues."""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from keystore_service import errors
from keystore_service.domain import issues as words
from keystore_service.domain.issues import SECOND
from keystore_service.domain.records import HOOK_SCOPE_PREFIX, Micros
from keystore_service.service.sealing import Sealer
from keystore_service.storage.alerts import AlertStore
from keystore_service.storage.issues import Issue, IssueStore, Watched, WatchedDestination

log = logging.getLogger("keystore.issues")


@dataclass(frozen=True, slots=True)
class Finding:
    """A condition that holds now: its issue's key, a line on what opened it, a count."""

    tenant_id: int
    kind: str
    subject: str
    detail: str
    count: int = 1


def _subject(d: WatchedDestination) -> str:
    return words.delivery_subject(d.source, d.name, d.fanout)


def issue_json(issue: Issue, rfc3339: Callable[[Optional[Micros]], Optional[str]],
               base_url: str = "") -> dict:
    """An issue as the API, the page and the notices show it (`rfc3339`: the web's one
    writer of instants, handed in by bootstrap.build)."""
    return {"id": issue.id, "kind": issue.kind, "subject": issue.subject,
            "state": issue.state, "opened_at": rfc3339(issue.opened_at),
            "last_seen_at": rfc3339(issue.last_seen_at), "count": issue.count,
            "resolved_at": rfc3339(issue.resolved_at),
            "acknowledged_by": issue.acknowledged_by, "detail": issue.detail,
            "url": f"{base_url.rstrip('/')}/ui/issues#issue-{issue.id}"}


class Issues:
    def __init__(self, store: IssueStore, alerts: AlertStore, sealer: Sealer,
                 clock: Callable[[], Micros], rfc3339: Callable, base_url: str = ""):
        self.store, self.alerts, self.sealer, self.clock = store, alerts, sealer, clock
        self.rfc3339, self.base_url = rfc3339, base_url
        self._opens: dict[str, bool] = {}  # a sealed text: whether a configured key opens it
        self._reminded: set[tuple[int, int, int]] = set()  # (channel, issue, n) made

    def json(self, issue: Issue, base_url: Optional[str] = None) -> dict:
        return issue_json(issue, self.rfc3339, self.base_url if base_url is None else base_url)

    # --- the watchers ---------------------------------------------------------------------

    def watch(self) -> dict[str, int]:
        """One look at every condition: opens, counts on and resolves issues (and makes their
        notices and the reminders due). Safe beside other processes doing the same."""
        now = self.clock()
        sources = self.store.watched_sources()
        destinations = self.store.watched_destinations()
        findings = self._findings(sources, destinations, now)
        held = {(f.tenant_id, f.kind, f.subject) for f in findings}
        done = {"opened": 0, "resolved": 0, "notices": 0, "reminders": 0}
        live = self.store.live()
        # Destinations failing, but not yet for their alert_after_seconds: a live
        # delivery_failing issue stays (a success, not a young failure, clears it).
        undecided = {(d.tenant_id, "delivery_failing", _subject(d)) for d in destinations
                     if d.failing_since is not None}
        with self.store.transaction() as cur:
            for f in findings:
                try:
                    issue, opened = self.store.observe(cur, f.tenant_id, f.kind, f.subject,
                                                       now, f.detail, f.count)
                except LookupError:
                    continue
                if opened:
                    done["opened"] += 1
                    done["notices"] += self._tell(cur, issue, "opened", now)
            for issue in live:
                key = (issue.tenant_id, issue.kind, issue.subject)
                if key in held or key in undecided:
                    continue
                ended = self.store.end(cur, issue, now)
                if ended is not None and ended.state == "resolved":
                    done["resolved"] += 1
                    done["notices"] += self._tell(cur, ended, "resolved", now)
            tried: list = []
            done["reminders"] = self._remind(cur, [i for i in live if i.state == "open"
                                                   and (i.tenant_id, i.kind, i.subject)
                                                   in held], now, tried)
        if len(self._reminded) > 10_000:
            self._reminded.clear()
        self._reminded.update(tried)  # committed: made, by this process or another
        return done

    def _findings(self, sources: list[Watched], destinations: list[WatchedDestination],
                  now: Micros) -> list[Finding]:
        found: list[Finding] = []
        for (tenant_id, scope, kind), n in sorted(self.store.open_reviews().items()):
            if kind == "delivery_failed":  # delivery_failing covers them (the contract)
                continue
            found.append(Finding(tenant_id, "reviews_waiting", words.review_subject(scope, kind),
                                 f"{n} open {kind} review(s) in scope {scope}", n))
        for s in sources:
            found.extend(self._of_source(s, now))
        failed = self.store.failed_deliveries()
        for d in destinations:
            found.extend(self._of_destination(d, now, failed.get(
                (d.tenant_id, HOOK_SCOPE_PREFIX + d.source, d.name), 0)))
        for (tenant_id, connection), n in sorted(self.store.unresolved_sends().items()):
            found.append(Finding(tenant_id, "send_unresolved", connection,
                                 f"{n} send(s) of connection {connection} wait for a person: "
                                 "their outcome is unknown and no check settled it", n))
        return found

    @staticmethod
    def _of_destination(d: WatchedDestination, now: Micros, failed: int) -> list[Finding]:
        """delivery_failing, per destination: its forwards have failed for its source's
        alert_after_seconds, or deliveries to it failed for good (their reviews are open)."""
        failing_for = None if d.failing_since is None else now - d.failing_since
        if not failed and (failing_for is None or
                           failing_for < d.alert_after_seconds * SECOND):
            return []
        why = [f"{failed} event(s) failed for good"] if failed else []
        if failing_for is not None:
            why.append(f"forwards failing for {failing_for // SECOND} s"
                       + (f" ({d.last_error})" if d.last_error else ""))
        if d.fanout > 1:
            why.append(f"destination {d.name}")
        return [Finding(d.tenant_id, "delivery_failing", _subject(d), "; ".join(why),
                        max(failed, 1))]

    def _of_source(self, s: Watched, now: Micros) -> list[Finding]:
        found = []
        if s.state == "active" and not self._can_open(s.sealed):
            found.append(Finding(s.tenant_id, "source_broken", s.name,
                                 "no configured KEYSTORE_SECRET_KEY opens its secrets: its "
                                 "ingest answers 503"))
        if s.oldest_queued_at is not None and \
                now - s.oldest_queued_at >= s.backlog_alert_seconds * SECOND:
            found.append(Finding(s.tenant_id, "backlog", s.name,
                                 f"its oldest queued event waits "
                                 f"{(now - s.oldest_queued_at) // SECOND} s"))
        return found

    def _can_open(self, sealed: str) -> bool:
        known = self._opens.get(sealed)
        if known is None:
            try:
                self.sealer.open(sealed)
                known = True
            except ValueError:
                known = False
            if len(self._opens) > 10_000:
                self._opens.clear()
            self._opens[sealed] = known
        return known

    # --- notices ---------------------------------------------------------------------------

    def _tell(self, cur: Any, issue: Issue, event: str, now: Micros, seq: int = 0) -> int:
        """The issue's notice of `event` to each of its tenant's channels that wants its
        kind; how many were made (none made twice: the unique constraint)."""
        body = self.json(issue)
        made = 0
        for channel in self.alerts.of_tenant(issue.tenant_id, cur):
            if channel.wants(issue.kind):
                made += self.alerts.add_notice(cur, channel, issue.id, event, seq, body, now)
        return made

    def _remind(self, cur: Any, open_issues: list[Issue], now: Micros,
                tried: list) -> int:
        """Reminders due for open, unacknowledged issues: the n-th once the issue has been
        open n times the channel's remind_after_seconds."""
        made = 0
        by_tenant: dict[int, list] = {}
        for issue in open_issues:
            channels = by_tenant.get(issue.tenant_id)
            if channels is None:
                channels = by_tenant[issue.tenant_id] = self.alerts.of_tenant(issue.tenant_id,
                                                                              cur)
            for channel in channels:
                every = channel.remind_after_seconds * SECOND
                if not every or not channel.wants(issue.kind):
                    continue
                seq = (now - issue.opened_at) // every
                key = (channel.id, issue.id, seq)
                if seq >= 1 and key not in self._reminded:  # made here: not tried again
                    made += self.alerts.add_notice(cur, channel, issue.id, "reminder", seq,
                                                   self.json(issue), now)
                    tried.append(key)
        return made

    # --- a person's actions ----------------------------------------------------------------

    def page(self, tenant_id: int, state: Optional[str], kind: Optional[str]) -> list[Issue]:
        return self.store.page(tenant_id, state, kind)

    def act(self, tenant_id: int, issue_id: int, action: str, by: str) -> Issue:
        """acknowledge | resolve | ignore a live issue; NotFound for another tenant's or none,
        Conflict (409) for one already resolved or ended."""
        state = {"acknowledge": "acknowledged", "resolve": "resolved",
                 "ignore": "ignored"}[action]
        now = self.clock()
        with self.store.transaction() as cur:
            issue = self.store.get(tenant_id, issue_id, cur)
            if issue is None:
                raise errors.NotFound(f"no issue {issue_id}")
            if issue.resolved_at is not None:
                raise errors.AlreadyCompleted(f"issue {issue_id} is {issue.state} already",
                                              details={"state": issue.state})
            moved = self.store.move(cur, issue, state, now,
                                    by=by if action == "acknowledge" else None)
            if moved is None:
                raise errors.AlreadyCompleted(f"issue {issue_id} changed meanwhile; try again")
            if state == "resolved":
                self._tell(cur, moved, "resolved", now)
        return moved
