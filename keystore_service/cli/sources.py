"""The gateway's sources and deliveries: `keystore source
create|update|list|show|disable|pause|resume`, `keystore deliveries`, `keystore redeliver` and
`keystore delivery retry` (docs/webhooks/README.md). Like the other admin
commands they name their database on stderr and refuse one without the schema."""
from __future__ import annotations

import json
from typing import Any, Optional

import click

from keystore_service import errors
from keystore_service.cli.common import TENANT, keystore, run, say, tenant, validated
from keystore_service.cli.params import Whole
from keystore_service.cli.source_options import (
    FORWARD,
    GENERIC,
    LIMITS,
    Forward,
    Generic,
    Limits,
    grouped,
    source_body,
)
from keystore_service.domain import versions
from keystore_service.domain.deliveries import DELIVERY_STATES
from keystore_service.web.api import gateway_schemas
from keystore_service.web.api.gateway_api import destination_json
from keystore_service.web.api.render import rfc3339


@click.group("source", help="Webhook sources of the inbound gateway (docs/webhooks/README.md).")
def source() -> None:
    pass


@source.command("create", help="Create a source; prints its ingest URL on stdout.")
@TENANT
@click.option("--name", required=True)
@click.option("--provider", required=True,
              help="stripe, github, shopify, slack, standard or generic")
@click.option("--secret", "secrets_", multiple=True,
              help="A signing secret (twice during a rotation); '-' reads it from stdin.")
@grouped("forward", Forward, *FORWARD)
@grouped("generic", Generic, *GENERIC)
@grouped("limits", Limits, *LIMITS)
@click.option("--public-url", default=None,
              help="The key store's address as providers reach it (or KEYSTORE_PUBLIC_URL).")
def source_create(tenant_name: str, name: str, provider: str, secrets_: tuple[str, ...],
                  forward: Forward, generic: Generic, limits: Limits,
                  public_url: Optional[str]) -> None:
    ks = keystore()
    body = source_body(name, provider, secrets_, forward, generic, limits)
    tenant_id = tenant(ks, tenant_name)
    shown = run(lambda: ks.gateway.sources.create(
        tenant_id, validated(gateway_schemas.SourceCreate, body)))
    base = public_url or ks.settings.public_url
    path = f"/hooks/{shown.ingest_id}"
    click.echo(base.rstrip("/") + path if base else path)
    hint = "" if base else (" (prefix it with the address providers reach the key store "
                            "at, or give --public-url)")
    say(f"keystore: created source {name!r} ({provider}) for tenant {tenant_name!r}; "
        f"its ingest URL is on stdout{hint}")


@source.command("update", help="Replace the source's destination (as PATCH does: its headers, "
                               "secret and filter too, so give them again), or with "
                               "--destinations its list (matched by name); prints the source "
                               "as show does.")
@TENANT
@click.argument("name")
@grouped("forward", Forward, *FORWARD)
def source_update(tenant_name: str, name: str, forward: Forward) -> None:
    ks = keystore()
    tenant_id = tenant(ks, tenant_name)
    run(lambda: ks.gateway.sources.get(tenant_id, name))  # unknown: said before stdin is read
    body = validated(gateway_schemas.SourceChange, forward.part())
    shown = run(lambda: ks.gateway.sources.change(tenant_id, name, body))
    click.echo(json.dumps(_shown_json(shown), indent=2))
    say(f"keystore: updated source {name!r}")


@source.command("list", help="The tenant's sources, one per line, with their queues.")
@TENANT
def source_list(tenant_name: str) -> None:
    ks = keystore()
    for s in ks.gateway.sources.all(tenant(ks, tenant_name)):
        q = s.queue
        state = s.source.state if s.health == "ok" else f"{s.source.state},{s.health}"
        if s.paused is not None:
            state += f",paused-by-{s.paused.by}"
        click.echo(f"{s.source.name}\t{s.source.provider}\t{state}\t"
                   f"queued={q.queued} delivering={q.delivering} failed={q.failed}\t"
                   f"{s.source.destination_url}")


@source.command("show", help="One source as JSON (never its secrets).")
@TENANT
@click.argument("name")
def source_show(tenant_name: str, name: str) -> None:
    ks = keystore()
    s = run(lambda: ks.gateway.sources.get(tenant(ks, tenant_name), name))
    click.echo(json.dumps(_shown_json(s), indent=2))


@source.command("disable", help="Its ingest URL answers 404 from now on; events already "
                                "accepted are still forwarded.")
@TENANT
@click.argument("name")
def source_disable(tenant_name: str, name: str) -> None:
    ks = keystore()
    run(lambda: ks.gateway.sources.disable(tenant(ks, tenant_name), name))
    say(f"keystore: disabled source {name!r}")


@source.command("pause", help="Pause the source's forwarding: its events are still "
                              "accepted, none is forwarded, none fails (the paused time "
                              "does not count toward their retry windows) until resumed.")
@TENANT
@click.argument("name")
@click.option("--until", default=None, help="RFC 3339 with Z or an offset, at most a year "
                                            "ahead (without it: until resumed).")
@click.option("--reason", default=None, help="Why, for the other operators (up to 256 "
                                             "characters).")
@click.option("--destination", default=None,
              help="Only this destination's forwarding (without it: every one's).")
def source_pause(tenant_name: str, name: str, until: Optional[str],
                 reason: Optional[str], destination: Optional[str]) -> None:
    ks = keystore()
    body = validated(gateway_schemas.Pause, {"until": until, "reason": reason,
                                             "destination": destination})
    end = versions.parse(body.until)[1] if body.until is not None else None
    run(lambda: ks.gateway.sources.pause(tenant(ks, tenant_name), name, end, body.reason,
                                         body.destination))
    what = f"{name!r}" + (f" to {body.destination!r}" if body.destination else "")
    say(f"keystore: paused source {what}" + (f" until {body.until}" if end else
                                              " until it is resumed"))


@source.command("resume", help="End the source's pause, an operator's or a destination's "
                               "(Retry-After); its waiting events are forwarded at once.")
@TENANT
@click.argument("name")
@click.option("--destination", default=None,
              help="Only this destination's pauses (without it: every one's).")
def source_resume(tenant_name: str, name: str, destination: Optional[str]) -> None:
    ks = keystore()
    body = validated(gateway_schemas.Resume, {"destination": destination})
    run(lambda: ks.gateway.sources.resume(tenant(ks, tenant_name), name, body.destination))
    what = f"{name!r}" + (f" to {body.destination!r}" if body.destination else "")
    say(f"keystore: resumed source {what}")


DESTINATION = click.option("--destination", default=None,
                           help="A destination's name (needed to redeliver an event that has "
                                "several; a one-destination source's is default).")


@click.command("deliveries", help="Recent deliveries of the tenant's sources, newest first "
                                  "(JSON lines).")
@TENANT
@click.option("--source", "source_name", default=None)
@click.option("--state", type=click.Choice(DELIVERY_STATES), default=None)
@click.option("--limit", type=Whole(1, 500), default=50, show_default=True)
@DESTINATION
def deliveries(tenant_name: str, source_name: Optional[str], state: Optional[str],
               limit: int, destination: Optional[str]) -> None:
    ks = keystore()
    query = validated(gateway_schemas.DeliveriesQuery, {
        "source": source_name, "state": state, "limit": limit, "destination": destination})
    page, _ = ks.gateway.deliveries.list(tenant(ks, tenant_name), query.source, query.state,
                                         None, query.limit, destination=query.destination)
    for d in page:
        click.echo(json.dumps({"source": d.source, "event_id": d.event.event_id,
                               "destination": d.destination, "state": d.event.state,
                               "received_at": rfc3339(d.event.received_at),
                               "attempts": d.event.attempts}))


@click.command("redeliver", help="Forward an event again under the same identity.")
@TENANT
@click.option("--source", "source_name", required=True)
@click.option("--event-id", required=True)
@click.option("--force", is_flag=True, help="Also an event that was delivered.")
@DESTINATION
def redeliver(tenant_name: str, source_name: str, event_id: str, force: bool,
              destination: Optional[str]) -> None:
    ks = keystore()
    body = validated(gateway_schemas.Redeliver, {"source": source_name, "event_id": event_id,
                                                 "force": force, "destination": destination})
    try:
        ks.gateway.deliveries.redeliver(tenant(ks, tenant_name), body.source, body.event_id,
                                        body.force, body.destination)
    except errors.AlreadyCompleted:
        raise click.ClickException("the event was delivered; redeliver it with --force "
                                   "(its workflow then runs again)") from None
    except errors.KeystoreError as exc:
        raise click.ClickException(exc.message) from None
    say(f"keystore: {event_id!r} of {source_name!r} is queued again")


def _shown_json(s: Any) -> dict[str, Any]:
    src = s.source
    return {"name": src.name, "provider": src.provider, "state": src.state,
            "health": s.health,
            "destination": destination_json(src, s.header_names, s.has_destination_secret),
            "destinations": [destination_json(t.view, t.header_names, t.has_secret) | {
                "name": t.view.destination_name, "max_in_flight": t.view.max_in_flight,
                "health": t.health} for t in s.destinations],
            "secrets": s.secret_count, "ttl_seconds": src.ttl_seconds,
            "retry_window_seconds": src.retry_window_seconds,
            "max_in_flight": src.max_in_flight, "max_pause_seconds": src.max_pause_seconds,
            "paused_until": rfc3339(src.paused_until), "last_error": src.last_error,
            "paused": None if s.paused is None else {
                "by": s.paused.by, "until": rfc3339(s.paused.until), "reason": s.paused.reason},
            "queue": {"queued": s.queue.queued, "delivering": s.queue.delivering,
                      "held": s.queue.held, "failed": s.queue.failed,
                      "oldest_queued_at": rfc3339(s.queue.oldest_queued_at),
                      "next_attempt_at": rfc3339(s.queue.next_attempt_at)}}


@click.group("delivery", help="Act on the deliveries of the tenant's sources.")
def delivery() -> None:
    pass


@delivery.command("retry", help="Retry now: the queued event (or every queued event of the "
                                "source) is due at once, whatever its backoff.")
@TENANT
@click.option("--source", "source_name", required=True)
@click.option("--event-id", default=None, help="One event (without it: all of the "
                                               "source's queued events).")
def delivery_retry(tenant_name: str, source_name: str, event_id: Optional[str]) -> None:
    ks = keystore()
    body = validated(gateway_schemas.Retry, {"source": source_name, "event_id": event_id})
    try:
        due = ks.gateway.deliveries.retry(tenant(ks, tenant_name), body.source, body.event_id)
    except (errors.InProgress, errors.AlreadyCompleted) as exc:
        raise click.ClickException(f"{exc.message} (it is {exc.details['state']})") from None
    except errors.KeystoreError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(json.dumps({"due": due}))
    say(f"keystore: {due} queued event(s) of {source_name!r} due now")


COMMANDS = (source, deliveries, redeliver, delivery)
