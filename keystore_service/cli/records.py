"""The records' commands: `keystore reconcile`, `keystore sweep` (both safe beside running
services) and `keystore report` (one tenant's daily reconciliation report)."""
from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

import click

from keystore_service.cli.common import keystore, no_tenant, say
from keystore_service.cli.params import Finite, Whole
from keystore_service.service.claims import system_clock
from keystore_service.web.api import queries
from keystore_service.web.api.render import rfc3339

COLUMNS = ("claimed", "succeeded", "failed", "released", "in_progress",
           "waiting_for_review", "duplicates_suppressed", "mismatches", "late_repeats")


@click.command("reconcile", help="Move in-progress records whose lease ran out to "
                                 "needs_reconciliation (or free them, under on_stale retry). "
                                 "Safe beside running services.")
@click.option("--batch", default=500, show_default=True, type=Whole(1, 10_000))
def reconcile(batch: int) -> None:
    ks = keystore()
    done = ks.jobs.reconcile(batch=batch)
    click.echo(json.dumps(dict(done), sort_keys=True))
    say(f"keystore: reconciled {sum(done.values())} stale leases")


@click.command("sweep", help="Purge expired records in short batches. Safe beside running "
                             "services.")
@click.option("--batch", default=500, show_default=True, type=Whole(1, 100_000))
@click.option("--pause-ratio", default=1.0, show_default=True, type=Finite(0, 100),
              help="Pause after each batch this many times as long as it took (0: none), "
                   "so that claims are not starved while it runs.")
def sweep(batch: int, pause_ratio: float) -> None:
    ks = keystore()
    shown = [0.0]

    def progress(total: int) -> None:
        if time.monotonic() - shown[0] >= 1:
            say(f"keystore sweep: {total} purged so far")
            shown[0] = time.monotonic()
    total = ks.jobs.sweep(batch=batch, progress=progress, pause_ratio=pause_ratio)
    click.echo(total)
    say(f"keystore: purged {total} expired records")


@click.command("report", help="The daily reconciliation report of one tenant, per scope.")
@click.option("--date", "day", default=None,
              help=f"YYYY-MM-DD (UTC), {queries.FIRST_REPORT_DAY} to {queries.LAST_REPORT_DAY}; "
                   "default today.")
@click.option("--tenant", "tenant_name", default="default", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
def report(day: str | None, tenant_name: str, as_json: bool) -> None:
    try:  # the API's rule for a date, checked before the database is opened
        when = queries.report_day(day) if day is not None else dt.datetime.now(dt.UTC).date()
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--date") from None
    ks = keystore()
    tenant_id = ks.accounts.tenant_id(tenant_name)
    if tenant_id is None:
        raise no_tenant(tenant_name)
    body = ks.reports.daily(tenant_id, when, system_clock())
    body["generated_at"] = rfc3339(body["generated_at"])  # as GET /v1/report says it
    if as_json:
        click.echo(json.dumps(body, indent=2))
    else:
        _table(body, tenant_name)


def _table(body: dict[str, Any], tenant_name: str) -> None:
    click.echo(f"Report for {body['date']} (UTC), tenant {tenant_name}")
    click.echo("scope".ljust(28) + "".join(c[:12].rjust(13) for c in COLUMNS))
    for row in body["scopes"]:
        click.echo(row["scope"][:27].ljust(28) + "".join(str(row[c]).rjust(13) for c in COLUMNS))
        for shared in row["shared_resource_ids"]:
            click.echo(f"  ! resource {shared['resource_id']} is shared by keys "
                       f"{', '.join(shared['keys'])}: a duplicate effect slipped through")


COMMANDS = (reconcile, sweep, report)
