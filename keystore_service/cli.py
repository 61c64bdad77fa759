"""The `keystore` command: serve, db, tenant and token.

A new token is printed alone on stdout (so `TOKEN=$(keystore token create ...)` works);
everything meant for a person goes to stderr.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import click

from . import backup, config_report, migrate
from .accounts import AccountError, Accounts
from .db import Database, create
from .server import Server, default_workers
from .service import system_clock
from .settings import Settings, load


def _settings() -> Settings:
    return load()


def _accounts(settings: Settings) -> tuple[Accounts, Database]:
    database = Database(create(settings.database_url, pool_size=1,
                               sqlite_busy_timeout_ms=settings.sqlite_busy_timeout_ms))
    return Accounts(database), database


def _say(message: str) -> None:
    click.echo(message, err=True)


@click.group(help="Idempotency Key Store: exactly-once effects for at-least-once deliveries.")
@click.version_option(package_name="keystore-service", prog_name="keystore")
def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@main.command(help="Migrate the database, then serve HTTP with gunicorn (gthread workers).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
@click.option("--workers", default=default_workers(), show_default=True,
              type=click.IntRange(1, 64))
@click.option("--threads", default=4, show_default=True, type=click.IntRange(1, 64))
def serve(host: str, port: int, workers: int, threads: int) -> None:
    settings = _settings()
    _metrics_directory()
    revision = migrate.upgrade(settings.database_url)
    accounts, database = _accounts(settings)
    try:
        token = accounts.bootstrap(system_clock())
    finally:
        database.engine.dispose()
    if token:
        _say("\nFirst start: created tenant 'default' and this operator token. It is shown once;"
             " only its hash is stored:\n")
        click.echo(f"    {token}\n")
        sys.stdout.flush()
    _say(f"keystore: schema at revision {revision}; serving on http://{host}:{port} "
         f"({workers} workers x {threads} threads)")
    Server(settings, host, port, workers, threads).run()


def _metrics_directory() -> None:
    """prometheus-client's multiprocess mode needs one directory shared by the workers, set
    before they fork, and emptied at each start."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not path:
        path = tempfile.mkdtemp(prefix="keystore-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    for stale in Path(path).glob("*.db"):
        stale.unlink()


def _keystore():
    from .app import build
    settings = _settings()
    migrate.upgrade(settings.database_url)
    return build(settings)


@main.command(help="Move in-progress records whose lease ran out to needs_reconciliation "
                   "(or free them, under on_stale retry). Safe beside running services.")
@click.option("--batch", default=500, show_default=True, type=click.IntRange(1, 10_000))
def reconcile(batch: int) -> None:
    ks = _keystore()
    done = ks.jobs.reconcile(batch=batch)
    click.echo(json.dumps(dict(done), sort_keys=True))
    _say(f"keystore: reconciled {sum(done.values())} stale leases")


@main.command(help="Purge expired records in short batches. Safe beside running services.")
@click.option("--batch", default=500, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--pause-ratio", default=1.0, show_default=True, type=click.FloatRange(0, 100),
              help="Pause after each batch this many times as long as it took (0: none), "
                   "so that claims are not starved while it runs.")
def sweep(batch: int, pause_ratio: float) -> None:
    ks = _keystore()
    shown = [0.0]

    def progress(total: int) -> None:
        if time.monotonic() - shown[0] >= 1:
            _say(f"keystore sweep: {total} purged so far")
            shown[0] = time.monotonic()
    total = ks.jobs.sweep(batch=batch, progress=progress, pause_ratio=pause_ratio)
    click.echo(total)
    _say(f"keystore: purged {total} expired records")


@main.command(help="The daily reconciliation report of one tenant, per scope.")
@click.option("--date", "day", default=None, help="YYYY-MM-DD (UTC); default today.")
@click.option("--tenant", "tenant_name", default="default", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
def report(day: str | None, tenant_name: str, as_json: bool) -> None:
    ks = _keystore()
    try:
        when = dt.date.fromisoformat(day) if day else dt.datetime.now(dt.UTC).date()
    except ValueError:
        raise click.BadParameter("use YYYY-MM-DD", param_hint="--date") from None
    tenant_id = ks.accounts.tenant_id(tenant_name)
    if tenant_id is None:
        raise click.ClickException(f"no tenant {tenant_name!r}")
    body = ks.reports.daily(tenant_id, when, system_clock())
    if as_json:
        click.echo(json.dumps(body, indent=2))
        return
    columns = ("claimed", "succeeded", "failed", "released", "in_progress",
               "waiting_for_review", "duplicates_suppressed", "mismatches")
    click.echo(f"Report for {body['date']} (UTC), tenant {tenant_name}")
    click.echo("scope".ljust(28) + "".join(c[:12].rjust(13) for c in columns))
    for row in body["scopes"]:
        click.echo(row["scope"][:27].ljust(28) + "".join(str(row[c]).rjust(13) for c in columns))
        for shared in row["shared_resource_ids"]:
            click.echo(f"  ! resource {shared['resource_id']} is shared by keys "
                       f"{', '.join(shared['keys'])}: a duplicate effect slipped through")


@main.group(help="Database schema.")
def db() -> None:
    pass


@db.command("upgrade", help="Apply the migrations (safe to run from several hosts at once).")
def db_upgrade() -> None:
    revision = migrate.upgrade(_settings().database_url)
    _say(f"keystore: schema at revision {revision}")


@db.command("current", help="Show the schema revision of the database and of this code.")
def db_current() -> None:
    have, head = migrate.current(_settings().database_url)
    click.echo(f"database: {have or '(empty)'}\ncode:     {head}")
    if have != head:
        sys.exit(1)


@main.group(help="Tenants: separate customers of one key store.")
def tenant() -> None:
    pass


@tenant.command("create")
@click.argument("name")
def tenant_create(name: str) -> None:
    settings = _settings()
    migrate.upgrade(settings.database_url)
    accounts, _ = _accounts(settings)
    try:
        accounts.create_tenant(name, system_clock())
    except AccountError as exc:
        raise click.ClickException(str(exc)) from None
    _say(f"keystore: created tenant {name!r}")


@main.group(help="Bearer tokens (only their hashes are stored).")
def token() -> None:
    pass


@token.command("create", help="Create a token and print it once, alone on stdout.")
@click.option("--tenant", "tenant_name", required=True)
@click.option("--role", type=click.Choice(["client", "operator"]), default="client",
              show_default=True)
@click.option("--name", default=None, help="A name for the audit trail (default: ROLE-N).")
def token_create(tenant_name: str, role: str, name: str | None) -> None:
    settings = _settings()
    migrate.upgrade(settings.database_url)
    accounts, _ = _accounts(settings)
    try:
        value = accounts.create_token(tenant_name, role, name, system_clock())
    except AccountError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(value)
    _say(f"keystore: created a {role} token for tenant {tenant_name!r}; store it now, "
         "it is not shown again")


@token.command("revoke", help="Revoke a token by its name (effective within the cache time).")
@click.option("--tenant", "tenant_name", required=True)
@click.option("--name", required=True)
def token_revoke(tenant_name: str, name: str) -> None:
    accounts, _ = _accounts(_settings())
    try:
        accounts.revoke_token(tenant_name, name, system_clock())
    except AccountError as exc:
        raise click.ClickException(str(exc)) from None
    _say(f"keystore: revoked token {name!r} of tenant {tenant_name!r}")


# --- deploy and operate: backups, the effective configuration (docs/deployment.md) --------

@db.command("backup", help="Write a consistent copy of the database to PATH while the "
                           "service runs (SQLite: online backup; PostgreSQL: pg_dump).")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def db_backup(path: Path) -> None:
    try:
        done = backup.backup(_settings().database_url, path)
    except backup.BackupError as exc:
        raise click.ClickException(str(exc)) from None
    _say(f"keystore: backup of schema {done.revision} written to {done.path} "
         f"({done.bytes} bytes)")


@db.command("restore", help="Restore a backup into the configured (empty) database, then "
                            "migrate it. Stop the service first.")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace a database that already has tables.")
def db_restore(path: Path, force: bool) -> None:
    try:
        revision = backup.restore(path, _settings().database_url, force=force)
    except backup.BackupError as exc:
        raise click.ClickException(str(exc)) from None
    _say(f"keystore: restored {path}; schema at revision {revision}")


@main.command("config", help="Print the effective settings and where each came from "
                             "(secrets masked); exit 1 if any is invalid.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
def config(as_json: bool) -> None:
    items = config_report.report()
    click.echo(json.dumps(config_report.as_json(items), indent=2) if as_json
               else config_report.as_table(items))
    if any(item.error for item in items):
        sys.exit(1)
