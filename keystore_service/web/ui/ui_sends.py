"""The operators' page and outbound sends (issue 28): the trail a record's page shows (each
send's request without its credentials or body, its attempts with their classification, the
checks' runs with what the destination answered, and how it was settled), and the
Connections page (each connection, its check, its sends in flight and queued; never a header
value). Added to the page's blueprint by ui.py, behind the same session and headers."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from flask import Blueprint, g, render_template

from keystore_service.domain.records import Record
from keystore_service.storage.send_trail import CheckTrail, SendTrail
from keystore_service.web.context import keystore

ANSWER_SHOWN = 512  # characters of a destination's answer on the page (attempts keep 512)
BY_CHECK = "check"  # the actor of a resolution that a check's answer made
BY_CHECK_SUFFIX = "_by_check"  # settled_by_check, released_by_check


@dataclass(frozen=True, slots=True)
class Trail:
    sends: list[SendTrail]
    checks: list[CheckTrail]
    settled: list[Any]  # the audit entries a check made (oversight.AuditEntry)
    reviews: list[Any]  # the reviews a check closed (settled_by_check, released_by_check)

    def __bool__(self) -> bool:
        return bool(self.sends or self.checks or self.settled or self.reviews)


def trail(tenant_id: int, record: Record, audit: list, resolved: list) -> Trail:
    """The record's outbound trail; empty for a record that was never sent nor checked."""
    trails = keystore().send_trails
    sends, checks = trails.of_record(tenant_id, record.id) if trails else ([], [])
    settled = [e for e in audit if e.actor == BY_CHECK or e.action.endswith(BY_CHECK_SUFFIX)]
    reviews = [v for v in resolved if (v.resolution or "").endswith(BY_CHECK_SUFFIX)]
    return Trail(sends, checks, settled, reviews)


def shown(answer: Optional[str]) -> str:
    """A destination's answer as the page shows it: the first 512 characters (the template
    escapes them), and a mark when there was more."""
    if not answer:
        return ""
    return answer if len(answer) <= ANSWER_SHOWN else answer[:ANSWER_SHOWN] + " …"


def connections_page():
    ks, tenant = keystore(), g.ui.tenant_id
    connections = ks.gateway.connections
    listed = connections.list(tenant) if connections else []
    load = ks.send_trails.load(tenant) if ks.send_trails else {}
    rows = [(connections.shown(c), *load.get(c.id, (0, 0))) for c in listed]
    return render_template("ui/connections.html", rows=rows)


def install(bp: Blueprint, guard: Callable) -> None:
    """Add the Connections page to the page's blueprint, behind `guard`."""
    bp.add_url_rule("/connections", "connections_page", guard(connections_page),
                    methods=["GET"])
