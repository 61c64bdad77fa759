"""The bulk actions on the command line: `keystore delivery bulk` (a dry run, or a job that
this command runs and shows the progress of), `keystore job show ID` and `keystore job
cancel ID` (docs/cli.md). The request is checked by the API's own model; the job is the
gateway's (gateway/bulk.py): if this command is stopped, the job's lease runs out and a
running `keystore serve` goes on with it."""
from __future__ import annotations

import json
import threading
from typing import Any, Optional

import click
from pydantic import ValidationError

from keystore_service import errors
from keystore_service.cli.common import TENANT, keystore, say, tenant
from keystore_service.domain.bulk import ACTIONS
from keystore_service.domain.deliveries import DELIVERY_STATES
from keystore_service.storage.accounts import Principal
from keystore_service.web.api import bulk_schemas
from keystore_service.web.api.render import rfc3339, validation_details

POLL_SECONDS = 0.5  # how often the progress line is written while the job runs


def job_json(job: Any) -> dict[str, Any]:
    return {"id": job.id, "action": job.action, "filter": json.loads(job.filter),
            "force": bool(job.force), "state": job.state, "matched": job.matched,
            "done": job.done, "skipped": job.skipped, "started_at": rfc3339(job.started_at),
            "finished_at": rfc3339(job.finished_at)}


def _request(body: dict[str, Any]) -> bulk_schemas.BulkRequest:
    try:
        return bulk_schemas.BulkRequest.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(f"{e['field']}: {e['message']}"
                             for e in validation_details(exc)["errors"])
        raise click.ClickException(problems) from None


def _progress(job: Any) -> str:
    handled = job.done + job.skipped
    share = f" {100 * handled // job.matched}%" if job.matched else ""
    return (f"keystore: job {job.id} {job.state}: {handled}/{job.matched}{share} "
            f"({job.done} done, {job.skipped} skipped)")


@click.command("bulk", help="Redeliver, retry or dismiss every event a filter matches: "
                            "--dry-run counts them; otherwise a job runs, with its progress "
                            "on stderr and the job as JSON on stdout at the end.")
@TENANT
@click.option("--action", type=click.Choice(ACTIONS), required=True)
@click.option("--source", default=None)
@click.option("--destination", default=None,
              help="A destination's name (a one-destination source's is default).")
@click.option("--state", type=click.Choice(DELIVERY_STATES), default=None)
@click.option("--event-type", default=None, help="A glob: * any characters, ? one.")
@click.option("--received-after", default=None, help="RFC 3339, inclusive.")
@click.option("--received-before", default=None, help="RFC 3339, exclusive.")
@click.option("--last-error", default=None, help="A glob over the newest attempt's error.")
@click.option("--force", is_flag=True, help="redeliver: also events that were delivered.")
@click.option("--dry-run", is_flag=True, help="Only count the events.")
@click.option("--idempotency-key", default=None,
              help="The same key again answers the same job (never a second run).")
@click.option("--no-wait", is_flag=True, help="Start the job and return; serve runs it.")
def delivery_bulk(tenant_name: str, action: str, force: bool, dry_run: bool,
                  idempotency_key: Optional[str], no_wait: bool, **given: Optional[str]
                  ) -> None:
    ks = keystore()
    tenant_id = tenant(ks, tenant_name)
    body = _request({"action": action, "force": force, "dry_run": dry_run,
                     "filter": {k: v for k, v in given.items() if v is not None}})
    f = body.filter.as_filter()
    if body.dry_run:
        click.echo(json.dumps({"matched": ks.gateway.bulk.dry_run(tenant_id, f)}))
        return
    who = Principal(tenant_id, tenant_name, "operator", "keystore-cli")
    try:
        job, created = ks.gateway.bulk.start(who, body.action, f, body.filter.shown(),
                                             body.force, idempotency_key, background=False)
    except errors.KeystoreError as exc:
        raise click.ClickException(exc.message) from None
    say(f"keystore: job {job.id}: {job.matched} events" + ("" if created else
                                                          " (started before, same key)"))
    if created and not no_wait:
        job = _follow(ks, job)
    click.echo(json.dumps(job_json(job)))


def _follow(ks: Any, job: Any) -> Any:
    """Run the job here, writing its progress every POLL_SECONDS and, always, once it ended
    (a job that ends before the first look still says so)."""
    runner = threading.Thread(target=ks.gateway.bulk.run, args=(job,), daemon=True)
    runner.start()
    while True:
        runner.join(POLL_SECONDS)
        ended = not runner.is_alive()  # before the read: the read then shows its end
        job = ks.gateway.bulk.get(job.tenant_id, job.id)
        say(_progress(job))
        if ended:
            return job


@click.group("job", help="Bulk jobs: show one, or cancel it.")
def job() -> None:
    pass


@job.command("show", help="A bulk job as JSON (its progress: matched, done, skipped).")
@TENANT
@click.argument("job_id", type=click.IntRange(1, 2**63 - 1))
def job_show(tenant_name: str, job_id: int) -> None:
    ks = keystore()
    try:
        found = ks.gateway.bulk.get(tenant(ks, tenant_name), job_id)
    except errors.KeystoreError as exc:
        raise click.ClickException(exc.message) from None
    say(_progress(found))
    click.echo(json.dumps(job_json(found)))


@job.command("cancel", help="Stop a running job before its next event.")
@TENANT
@click.argument("job_id", type=click.IntRange(1, 2**63 - 1))
def job_cancel(tenant_name: str, job_id: int) -> None:
    ks = keystore()
    try:
        found = ks.gateway.bulk.cancel(tenant(ks, tenant_name), job_id)
    except errors.KeystoreError as exc:
        raise click.ClickException(exc.message) from None
    say(_progress(found))
    click.echo(json.dumps(job_json(found)))


DELIVERY_COMMANDS = (delivery_bulk,)  # added to `keystore delivery` (cli/sources.py)
COMMANDS = (job,)
