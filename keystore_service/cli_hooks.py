"""The gateway's commands: `keystore source create|list|show|disable|resume`, `keystore
deliveries`, `keystore redeliver`, `keystore relay` and `keystore secret-key`. Like the other
admin commands they name their database on stderr and refuse one without the schema."""
from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import Any, Optional

import click
from pydantic import ValidationError

from keystore_service import errors
from keystore_service.cli_numbers import Decimal, Whole
from keystore_service.service.sealing import Sealer
from keystore_service.web import hook_schemas
from keystore_service.web.render import rfc3339, validation_details


def register(main: click.Group, keystore, database, say) -> None:
    """Add the commands to `main`; `keystore()` builds the key store of the configured
    database, `database()` checks it (both as cli.py does for its own commands)."""

    @main.command("secret-key", help="Print a new key for KEYSTORE_SECRET_KEY (Fernet).")
    def secret_key() -> None:
        click.echo(Sealer.new_key())

    @main.group(help="Webhook sources of the inbound gateway (docs/webhooks.md).")
    def source() -> None:
        pass

    @source.command("create", help="Create a source; prints its ingest URL on stdout.")
    @click.option("--tenant", "tenant_name", default="default", show_default=True)
    @click.option("--name", required=True)
    @click.option("--provider", required=True,
                  help="stripe, github, shopify, slack, standard or generic")
    @click.option("--secret", "secrets_", multiple=True,
                  help="A signing secret (twice during a rotation); '-' reads it from stdin.")
    @click.option("--destination", required=True, help="The workflow's webhook URL.")
    @click.option("--header", "headers", multiple=True, help="'Name: value' for every forward.")
    @click.option("--destination-secret", default=None,
                  help="whsec_...: sign forwards (Standard Webhooks); '-' reads stdin.")
    @click.option("--timeout", type=Whole(1, 60), default=10, show_default=True)
    @click.option("--retry-status", "retry_statuses", type=Whole(400, 499),
                  multiple=True, help="A 4xx answer to retry too (n8n while it starts: 404).")
    @click.option("--delivered-header", default=None,
                  help="A 2xx counts as delivered only with this header in the answer.")
    @click.option("--signature-header", default=None, help="generic: the signature's header")
    @click.option("--signature-algorithm", type=click.Choice(["sha256", "sha1"]),
                  default="sha256", show_default=True)
    @click.option("--signature-encoding", type=click.Choice(["hex", "base64"]), default="hex",
                  show_default=True)
    @click.option("--signature-prefix", default="", help="generic: e.g. 'sha256='")
    @click.option("--event-id-header", default=None, help="generic: the event id's header")
    @click.option("--event-id-json", multiple=True,
                  help="generic: a JSON pointer of the event id (repeat to join several)")
    @click.option("--ttl", type=Whole(1), default=None)
    @click.option("--retry-window", type=Whole(1), default=None)
    @click.option("--max-in-flight", type=Whole(1), default=None)
    @click.option("--max-pause", type=Whole(1, 86400), default=None,
                  help="Seconds a destination's Retry-After may pause it, at most "
                       "(default 3600).")
    @click.option("--public-url", default=None,
                  help="The key store's address as providers reach it (or KEYSTORE_PUBLIC_URL).")
    def source_create(tenant_name: str, name: str, provider: str, secrets_: tuple,
                      destination: str, headers: tuple, destination_secret: Optional[str],
                      timeout: int, retry_statuses: tuple, delivered_header: Optional[str],
                      signature_header: Optional[str], signature_algorithm: str,
                      signature_encoding: str, signature_prefix: str,
                      event_id_header: Optional[str], event_id_json: tuple, ttl: Optional[int],
                      retry_window: Optional[int], max_in_flight: Optional[int],
                      max_pause: Optional[int], public_url: Optional[str]) -> None:
        ks = keystore()
        body: dict[str, Any] = {
            "name": name, "provider": provider,
            "destination": {"url": destination, "timeout_seconds": timeout,
                            "headers": dict(_header(h) for h in headers),
                            "retry_statuses": list(retry_statuses),
                            "delivered_header": delivered_header}}
        if secrets_:
            body["secrets"] = [_stdin_if_dash(s) for s in secrets_]
        if destination_secret:
            body["destination"]["secret"] = _stdin_if_dash(destination_secret)
        if provider == "generic":
            body["signature"] = None if signature_header is None else {
                "header": signature_header, "algorithm": signature_algorithm,
                "encoding": signature_encoding, "prefix": signature_prefix}
            body["event_id"] = ({"header": event_id_header} if event_id_header else
                                {"json": list(event_id_json)})
        for key, value in (("ttl_seconds", ttl), ("retry_window_seconds", retry_window),
                           ("max_in_flight", max_in_flight),
                           ("max_pause_seconds", max_pause)):
            if value is not None:
                body[key] = value
        tenant_id = _tenant(ks, tenant_name)
        shown = _run(lambda: ks.gateway.sources.create(
            tenant_id, _model(hook_schemas.SourceCreate, body)))
        base = public_url or ks.settings.public_url
        path = f"/hooks/{shown.ingest_id}"
        click.echo(base.rstrip("/") + path if base else path)
        hint = "" if base else (" (prefix it with the address providers reach the key store "
                                "at, or give --public-url)")
        say(f"keystore: created source {name!r} ({provider}) for tenant {tenant_name!r}; "
            f"its ingest URL is on stdout{hint}")

    @source.command("list", help="The tenant's sources, one per line, with their queues.")
    @click.option("--tenant", "tenant_name", default="default", show_default=True)
    def source_list(tenant_name: str) -> None:
        ks = keystore()
        for s in ks.gateway.sources.all(_tenant(ks, tenant_name)):
            q = s.queue
            state = s.source.state if s.health == "ok" else f"{s.source.state},{s.health}"
            click.echo(f"{s.source.name}\t{s.source.provider}\t{state}\t"
                       f"queued={q.queued} delivering={q.delivering} failed={q.failed}\t"
                       f"{s.source.destination_url}")

    @source.command("show", help="One source as JSON (never its secrets).")
    @click.option("--tenant", "tenant_name", default="default", show_default=True)
    @click.argument("name")
    def source_show(tenant_name: str, name: str) -> None:
        ks = keystore()
        s = _run(lambda: ks.gateway.sources.get(_tenant(ks, tenant_name), name))
        click.echo(json.dumps(_shown_json(s), indent=2))

    @source.command("disable", help="Its ingest URL answers 404 from now on; events already "
                                    "accepted are still forwarded.")
    @click.option("--tenant", "tenant_name", default="default", show_default=True)
    @click.argument("name")
    def source_disable(tenant_name: str, name: str) -> None:
        ks = keystore()
        _run(lambda: ks.gateway.sources.disable(_tenant(ks, tenant_name), name))
        say(f"keystore: disabled source {name!r}")

    @source.command("resume", help="End the source's pause (a destination's Retry-After); "
                                   "its waiting events are forwarded at once.")
    @click.option("--tenant", "tenant_name", default="default", show_default=True)
    @click.argument("name")
    def source_resume(tenant_name: str, name: str) -> None:
        ks = keystore()
        _run(lambda: ks.gateway.sources.resume(_tenant(ks, tenant_name), name))
        say(f"keystore: resumed source {name!r}")

    @main.command(help="Recent deliveries of the tenant's sources, newest first (JSON lines).")
    @click.option("--tenant", "tenant_name", default="default", show_default=True)
    @click.option("--source", "source_name", default=None)
    @click.option("--state", type=click.Choice(["queued", "delivering", "delivered", "failed"]),
                  default=None)
    @click.option("--limit", type=Whole(1, 500), default=50, show_default=True)
    def deliveries(tenant_name: str, source_name: Optional[str], state: Optional[str],
                   limit: int) -> None:
        ks = keystore()
        page, _ = ks.gateway.deliveries.list(_tenant(ks, tenant_name), source_name, state,
                                             None, limit)
        for d in page:
            click.echo(json.dumps({"source": d.source, "event_id": d.event.event_id,
                                   "state": d.event.state,
                                   "received_at": rfc3339(d.event.received_at),
                                   "attempts": d.event.attempts}))

    @main.command(help="Forward an event again under the same identity.")
    @click.option("--tenant", "tenant_name", default="default", show_default=True)
    @click.option("--source", "source_name", required=True)
    @click.option("--event-id", required=True)
    @click.option("--force", is_flag=True, help="Also an event that was delivered.")
    def redeliver(tenant_name: str, source_name: str, event_id: str, force: bool) -> None:
        ks = keystore()
        try:
            ks.gateway.deliveries.redeliver(_tenant(ks, tenant_name), source_name, event_id,
                                            force)
        except errors.AlreadyCompleted:
            raise click.ClickException("the event was delivered; redeliver it with --force "
                                       "(its workflow then runs again)") from None
        except errors.KeystoreError as exc:
            raise click.ClickException(exc.message) from None
        say(f"keystore: {event_id!r} of {source_name!r} is queued again")

    @main.command(help="Forward accepted events until stopped (SIGTERM or Ctrl-C); run as "
                       "many as you like, on any hosts sharing the database.")
    @click.option("--concurrency", type=Whole(1, 256), default=None,
                  help="Forwards at once (default KEYSTORE_RELAY_CONCURRENCY).")
    @click.option("--progress", type=Decimal(0, 86400), default=10.0, show_default=True,
                  help="Seconds between progress lines on stderr (0: none).")
    def relay(concurrency: Optional[int], progress: float) -> None:
        ks = keystore()
        _run(ks.gateway.sealer.agree)  # keys that cannot open the database's: no start
        settings = ks.settings
        if concurrency:
            settings = settings.model_copy(update={"relay_concurrency": concurrency})
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        running = ks.gateway.start_relay(settings)
        say(f"keystore relay: forwarding as {running.holder} "
            f"({settings.relay_concurrency} at once); stop with SIGTERM or Ctrl-C")
        started = time.monotonic()
        while not stop.wait(progress or None):
            say(f"keystore relay: {_counts(running.counts)} in "
                f"{time.monotonic() - started:.0f} s")
        running.stop()
        say(f"keystore relay: stopped; {_counts(running.counts)}")

    _ = database


def _counts(counts: dict) -> str:
    return ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items())


def _tenant(ks, name: str) -> int:
    tenant_id = ks.accounts.tenant_id(name)
    if tenant_id is None:
        raise click.ClickException(f"no tenant {name!r}")
    return tenant_id


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep:
        raise click.BadParameter("a header is 'Name: value'", param_hint="--header")
    return name.strip(), value.strip()


def _stdin_if_dash(value: str) -> str:
    return sys.stdin.readline().strip() if value == "-" else value


def _model(model, body: dict):
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(f"{e['field']}: {e['message']}"
                             for e in validation_details(exc)["errors"])
        raise click.ClickException(problems) from None


def _run(call):
    try:
        return call()
    except errors.KeystoreError as exc:
        raise click.ClickException(exc.message) from None


def _shown_json(s) -> dict:
    src = s.source
    return {"name": src.name, "provider": src.provider, "state": src.state,
            "health": s.health,
            "destination": {"url": src.destination_url, "header_names": s.header_names,
                            "has_secret": s.has_destination_secret,
                            "retry_statuses": src.options.get("forward", {}).get(
                                "retry_statuses", []),
                            "delivered_header": src.options.get("forward", {}).get(
                                "delivered_header")},
            "secrets": s.secret_count, "ttl_seconds": src.ttl_seconds,
            "retry_window_seconds": src.retry_window_seconds,
            "max_in_flight": src.max_in_flight, "max_pause_seconds": src.max_pause_seconds,
            "paused_until": rfc3339(src.paused_until), "last_error": src.last_error,
            "queue": {"queued": s.queue.queued, "delivering": s.queue.delivering,
                      "failed": s.queue.failed}}
