"""Settlement by asking the destination (issue 28; the contract's "Outbound" section): a
connection's `check` asks the downstream API whether an effect whose outcome is unknown
happened, and its answer settles the record before a person is asked.

- Checker runs one check: the path template rendered (`{key}`, `{scope}`, `{reference}` =
  `<scope>:<key>`, each percent-encoded whole), appended to the connection's base URL, sent
  with the connection's headers and timeout through the one outbound client, and judged:
  found (with the resource id), absent, or unclear.
- Settlement applies a run to a record, on the caller's transaction: the run written for the
  trail (record_checks), and for `found` the record succeeded with the resource id, its open
  review resolved `settled_by_check` by `check`, with an audit row as a person's
  resolution writes (the check's answer in it); for `absent` of a plain claim, released.
- SettlementPass (settlement_pass.py) runs the checks of plain claims in scopes with a
  settlement; the sender runs a send's own check.
"""
from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from keystore_service.domain import canonical, pointers
from keystore_service.domain.records import Micros, Record, ReviewKind, State
from keystore_service.domain.sends import CHECK_TRIES, Verdict
from keystore_service.domain.upkeep import resolution_changes
from keystore_service.gateway.connections import ConnectionBroken
from keystore_service.gateway.outbound import Outbound
from keystore_service.service.operations import snapshot
from keystore_service.storage.record_checks import RecordCheckStore
from keystore_service.storage.records import RecordStore
from keystore_service.storage.reviews import ReviewStore

if TYPE_CHECKING:  # the connection and its unsealed headers
    from keystore_service.gateway.connections import Connections
    from keystore_service.storage.connections import Connection

ANSWER_READ = 64 * 1024  # bytes of a check's answer read and judged
ANSWER_KEPT = 1024  # bytes of it kept with the run (the trail, the review, the page)
# A check of a connection whose headers no configured key opens is not asked without them.
HEADERS_SHUT = "the connection's headers cannot be opened: KEYSTORE_SECRET_KEY lacks their key"
RESULT_BODY = 4096  # the contract's bound on an answer kept in the record's result
ACTOR = "check"  # who resolved, in the reviews and the audit trail
SETTLED, RELEASED = "settled_by_check", "released_by_check"  # the resolutions it writes
WAITING = (ReviewKind.STALE_LEASE.value, ReviewKind.SEND_UNKNOWN.value)  # what it resolves


@dataclass(frozen=True, slots=True)
class CheckRun:
    """What one run of a check came to: the answer's status (None: no answer), why it was
    unclear when it was (`error`), the verdict, the resource id when found, and up to
    ANSWER_KEPT bytes of the answer as text, for the trail."""

    status: Optional[int]
    error: Optional[str]
    verdict: Verdict
    resource_id: Optional[str]
    answer: str


def render(template: str, scope: str, key: str) -> str:
    """The check's path with its placeholders filled, each value percent-encoded whole (a
    `/` or `?` in a key cannot change the path's shape)."""
    values = {"{key}": key, "{scope}": scope, "{reference}": f"{scope}:{key}"}
    out, i = [], 0
    while i < len(template):  # one pass: a value that spells a placeholder stays a value
        for name, value in values.items():
            if template.startswith(name, i):
                out.append(urllib.parse.quote(value, safe=""))
                i += len(name)
                break
        else:
            out.append(template[i])
            i += 1
    return "".join(out)


def joined(base_url: str, path: str) -> str:
    """`path` (beginning with "/") appended to the base URL's path, as a send's is."""
    parts = urllib.parse.urlsplit(base_url)
    query = path.partition("?")
    full = parts.path.rstrip("/") + query[0]
    extra = "&".join(q for q in (parts.query, query[2]) if q)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, full, extra, ""))


def judge(check: dict, status: Optional[int], raw: bytes,
          error: Optional[str]) -> tuple[Verdict, Optional[str], Optional[str]]:
    """(verdict, resource id, why unclear) of an answer, by the check's rules: a status in
    `absent_status` is absent; a 2xx JSON answer whose `absent` pointer names an empty list
    is absent, one where `found.pointer` exists (equal to `found.equals` when given) is
    found; anything else (no answer, 5xx, not JSON, neither) is unclear."""
    if status is None:
        return Verdict.UNCLEAR, None, error or "no answer"
    if status in (check.get("absent_status") or ()):
        return Verdict.ABSENT, None, None
    if not 200 <= status < 300:
        return Verdict.UNCLEAR, None, f"status {status}"
    try:
        doc = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, NaN, 5,000-digit numbers
        return Verdict.UNCLEAR, None, "the answer is not JSON"
    if check.get("absent"):
        there, value = pointers.resolve(doc, check["absent"])
        if there and value == []:
            return Verdict.ABSENT, None, None
    found = check.get("found") or {}
    if found.get("pointer") is not None:
        there, value = pointers.resolve(doc, found["pointer"])
        if there and ("equals" not in found or same(value, found["equals"])):
            rid = None
            if check.get("resource_id"):
                rid = pointers.scalar_text(pointers.resolve(doc, check["resource_id"])[1])
            return Verdict.FOUND, rid, None
    return Verdict.UNCLEAR, None, "the answer neither finds nor rules out the effect"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def same(a: Any, b: Any) -> bool:
    """JSON equality: 1 and 1.0 are one number, true is no number, keys' order is none."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def kept_text(raw: bytes) -> str:
    """Up to ANSWER_KEPT bytes of an answer as text (not UTF-8, and NUL, become U+FFFD)."""
    return raw[:ANSWER_KEPT].decode("utf-8", "replace").replace("\x00", "\ufffd")


class Checker:
    def __init__(self, outbound: Outbound, connections: Connections):
        self.outbound, self.connections = outbound, connections

    def run(self, connection: Connection, check: dict, scope: str, key: str) -> CheckRun:
        """Ask the destination once; never raises for what the destination does."""
        url = joined(connection.base_url, render(check["path"], scope, key))
        try:
            headers = {"Accept": "application/json", "User-Agent": "keystore-check",
                       **self.connections.headers(connection)}
        except ConnectionBroken:  # not asked without its headers: unclear, asked again
            return CheckRun(None, HEADERS_SHUT, Verdict.UNCLEAR, None, "")
        reply = self.outbound.request(check.get("method") or "GET", url, b"", headers,
                                      connection.timeout_seconds, ANSWER_READ)
        verdict, resource_id, why = judge(check, reply.status, reply.body, reply.error)
        return CheckRun(reply.status, why, verdict, resource_id, kept_text(reply.body))


class Settlement:
    def __init__(self, records: RecordStore, reviews: ReviewStore, checks: RecordCheckStore,
                 observed: Any = None, tenant_name: Callable[[int], str] = str):
        self.records, self.reviews, self.checks = records, reviews, checks
        self.observed, self.tenant_name = observed, tenant_name

    def record_check(self, cur: Any, record: Record, run: CheckRun, now: Micros) -> None:
        """The run, written for the record's trail (and counted: keystore_settlements_total,
        `unresolved` for the CHECK_TRIES-th unclear run of an incarnation)."""
        self.checks.add(cur, record, now, run.status, run.error, run.verdict.value,
                        run.resource_id, run.answer)
        if self.observed is not None:
            outcome = run.verdict.value
            if run.verdict is Verdict.UNCLEAR:
                if len(self.checks.of(cur, record)) < CHECK_TRIES:
                    return
                outcome = "unresolved"
            self.observed.settlement(self.tenant_name(record.tenant_id), record.scope, outcome)

    def settle_found(self, cur: Any, record: Record, run: CheckRun,
                     now: Micros) -> Optional[Record]:
        """The record succeeded with the run's resource id, if it is still the incarnation
        asked about and unsettled (in progress or needs_reconciliation); its open review of
        an unknown outcome resolved `settled_by_check`. None when it changed meanwhile."""
        result = canonical.canonical({"status_code": run.status, "resource_id": run.resource_id,
                                      "body": run.answer[:RESULT_BODY]}).decode("utf-8")
        return self._decide(cur, record, run, now, "mark_succeeded", SETTLED, result)

    def release_absent(self, cur: Any, record: Record, run: CheckRun,
                       now: Micros) -> Optional[Record]:
        """A plain claim the check found absent, released (its key may be claimed again);
        its open review resolved `released_by_check`. None when it changed meanwhile."""
        return self._decide(cur, record, run, now, "release", RELEASED, None)

    def keep_answers(self, cur: Any, record: Record, review_id: int) -> bool:
        """The checks' runs of the record's incarnation attached to its open review, for the
        person who takes it over."""
        runs = [{"at": c.at, "status_code": c.status_code, "error": c.error,
                 "verdict": c.verdict, "resource_id": c.resource_id, "answer": c.answer}
                for c in self.checks.of(cur, record)]
        return self.checks.keep_on_review(cur, record.tenant_id, review_id,
                                          json.dumps({"checks": runs}))

    def _decide(self, cur: Any, record: Record, run: CheckRun, now: Micros, action: str,
                resolution: str, result: Optional[str]) -> Optional[Record]:
        seen = self.records.by_id(cur, record.id)
        if seen is None or seen.incarnation != record.incarnation or seen.state not in (
                State.IN_PROGRESS.value, State.NEEDS_RECONCILIATION.value):
            return None
        decided = resolution_changes(seen, action, result, run.resource_id,
                                     f"{resolution}: status {run.status}", now)
        if decided is None:
            return None
        new = self.records.compare_and_set(seen, decided[0], cur, decided[1])
        if new is None:
            return None
        targets = [r for r in self.reviews.open_of(cur, seen.id) if r.kind in WAITING]
        for review in targets:
            self.reviews.close(cur, seen.id, resolution, now, ACTOR, review_id=review.id)
        if targets:
            new = self.records.by_id(cur, seen.id) or new
        after = json.loads(snapshot(new) or "{}")
        after["check"] = {"status_code": run.status, "verdict": run.verdict.value,
                          "resource_id": run.resource_id, "answer": run.answer}
        self.reviews.audit(cur, tenant_id=seen.tenant_id, record_id=seen.id,
                           review_id=targets[0].id if len(targets) == 1 else None,
                           scope=seen.scope, key=seen.key, action=resolution, actor=ACTOR,
                           at=now, before=snapshot(seen), after=json.dumps(after,
                                                                           sort_keys=True))
        return new
