"""The `keystore` command: serve, db, tenant and token.

A new token is printed alone on stdout (so `TOKEN=$(keystore token create ...)` works);
everything meant for a person goes to stderr. Every command says which database it uses
(KEYSTORE_DATABASE_URL; a SQLite path made absolute, a password masked). The admin commands
refuse a database without the key store's schema (a relative SQLite path run from another
directory would otherwise get a fresh, empty store); `serve` and `db upgrade` create it.
"""
from __future__ import annotations

import datetime as dt
import json
import shlex
import sys
import time
from pathlib import Path

import click

from keystore_service import cli_hooks, config_report, logs, server
from keystore_service.cli_numbers import Decimal, Whole
from keystore_service.service.claims import system_clock
from keystore_service.settings import Settings, load
from keystore_service.storage import backup, migrate
from keystore_service.storage.accounts import AccountError, Accounts
from keystore_service.storage.db import Database, create
from keystore_service.web import queries
from keystore_service.web.render import rfc3339


def _settings() -> Settings:
    return load()


def _accounts(settings: Settings) -> tuple[Accounts, Database]:
    database = Database(create(settings.database_url, pool_size=1,
                               sqlite_busy_timeout_ms=settings.sqlite_busy_timeout_ms))
    return Accounts(database), database


def _say(message: str) -> None:
    click.echo(message, err=True)


def _database(create: bool = False) -> Settings:
    """The settings, once their database is said (stderr) and holds the key store's schema.

    A database without the schema is refused (ClickException) unless `create`; an older schema
    is migrated, said in one line. Unreachable: ClickException with the reason."""
    settings = _settings()
    url = settings.database_url
    _say(f"keystore: database {migrate.describe(url)}")
    try:
        if not create and migrate.revision(url) is None:
            raise click.ClickException(_no_schema(url))
        done = migrate.upgrade_and_tell(url)
    except migrate.DatabaseProblem as exc:
        raise click.ClickException(str(exc)) from None
    if done.migrated:
        _say(done.summary())
    return settings


def _no_schema(url: str) -> str:
    missing = " (the file does not exist)" if migrate.sqlite_file_missing(url) else ""
    return (
        f"no key store schema in {migrate.describe(url)}{missing}.\n"
        "Point KEYSTORE_DATABASE_URL at the database the service uses, for example\n"
        "  export KEYSTORE_DATABASE_URL=sqlite:////ABSOLUTE/PATH/keystore.db"
        "   (four slashes: an absolute path)\n"
        "  export KEYSTORE_DATABASE_URL=postgresql://USER@HOST:5432/DB\n"
        "(the default, sqlite:///keystore.db, is keystore.db in the current directory).\n"
        "To start a new, empty key store there instead: `keystore db upgrade`, or "
        "`keystore tenant create NAME --create`.")


def _no_tenant(name: str) -> click.ClickException:
    url = _settings().database_url
    shown = shlex.quote(name) if name.isprintable() else "NAME"  # never a raw CR/LF echoed
    return click.ClickException(
        f"no tenant {name!r} in {migrate.describe(url)}; create it there with "
        f"`keystore tenant create {shown}`")


@click.group(help="Idempotency Key Store: exactly-once effects for at-least-once deliveries.")
@click.version_option(package_name="keystore-service", prog_name="keystore")
def main() -> None:
    logs.configure("INFO")  # one formatter: request input escaped, no exception messages


@main.command(help="Migrate the database, then serve HTTP with gunicorn (gthread workers).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=Whole(1, 65535))
@click.option("--workers", default=server.default_workers(), show_default=True,
              type=Whole(1, 64))
@click.option("--threads", default=server.THREADS, show_default=True,
              type=Whole(1, 64))
def serve(host: str, port: int, workers: int, threads: int) -> None:
    settings = _settings()
    try:
        server.check_bind(host, port)  # before anything is said or migrated
    except server.PortTaken as exc:
        raise click.ClickException(str(exc)) from None
    try:
        revision = server.prepare_database(settings)
    except migrate.DatabaseProblem as exc:
        raise click.ClickException(str(exc)) from None
    server.metrics_directory()  # removed when this process exits
    _say(f"keystore: schema at revision {revision}; serving on http://{host}:{port} "
         f"({workers} workers x {threads} threads)")
    server.Server(settings, host, port, workers, threads).run()


def _keystore():
    from keystore_service.app import build
    return build(_database())


@main.command(help="Move in-progress records whose lease ran out to needs_reconciliation "
                   "(or free them, under on_stale retry). Safe beside running services.")
@click.option("--batch", default=500, show_default=True, type=Whole(1, 10_000))
def reconcile(batch: int) -> None:
    ks = _keystore()
    done = ks.jobs.reconcile(batch=batch)
    click.echo(json.dumps(dict(done), sort_keys=True))
    _say(f"keystore: reconciled {sum(done.values())} stale leases")


@main.command(help="Purge expired records in short batches. Safe beside running services.")
@click.option("--batch", default=500, show_default=True, type=Whole(1, 100_000))
@click.option("--pause-ratio", default=1.0, show_default=True, type=Decimal(0, 100),
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
    ks = _keystore()
    tenant_id = ks.accounts.tenant_id(tenant_name)
    if tenant_id is None:
        raise _no_tenant(tenant_name)
    body = ks.reports.daily(tenant_id, when, system_clock())
    body["generated_at"] = rfc3339(body["generated_at"])  # as GET /v1/report says it
    if as_json:
        click.echo(json.dumps(body, indent=2))
        return
    columns = ("claimed", "succeeded", "failed", "released", "in_progress",
               "waiting_for_review", "duplicates_suppressed", "mismatches", "late_repeats")
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


@db.command("upgrade", help="Create or migrate the schema (safe from several hosts at once).")
def db_upgrade() -> None:
    url = _settings().database_url
    _say(f"keystore: database {migrate.describe(url)}")
    try:
        _say(migrate.upgrade_and_tell(url).summary())
    except migrate.DatabaseProblem as exc:
        raise click.ClickException(str(exc)) from None


@db.command("current", help="Show the schema revision of the database and of this code.")
def db_current() -> None:
    url = _settings().database_url
    _say(f"keystore: database {migrate.describe(url)}")
    try:
        have, head = migrate.current(url)
    except migrate.DatabaseProblem as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"database: {have or migrate.NONE}\ncode:     {head}")
    if have != head:
        sys.exit(1)


@main.group(help="Tenants: separate customers of one key store.")
def tenant() -> None:
    pass


@tenant.command("create")
@click.argument("name")
@click.option("--create", is_flag=True,
              help="Create the key store's schema if the database has none (a new store).")
def tenant_create(name: str, create: bool) -> None:
    accounts, _ = _accounts(_database(create=create))
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
    accounts, _ = _accounts(_database())
    if accounts.tenant_id(tenant_name) is None:
        raise _no_tenant(tenant_name)
    try:
        value = accounts.create_token(tenant_name, role, name, system_clock())
    except AccountError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(value)
    article = "an" if role == "operator" else "a"
    _say(f"keystore: created {article} {role} token for tenant {tenant_name!r}; store it now, "
         "it is not shown again")


@token.command("revoke", help="Revoke a token by its name (effective within the cache time).")
@click.option("--tenant", "tenant_name", required=True)
@click.option("--name", required=True)
def token_revoke(tenant_name: str, name: str) -> None:
    accounts, _ = _accounts(_database())
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
    url = _settings().database_url
    _say(f"keystore: database {migrate.describe(url)}")
    try:
        done = backup.backup(url, path)
    except backup.BackupError as exc:
        raise click.ClickException(str(exc)) from None
    _say(f"keystore: backup of schema {done.revision} written to {done.path} "
         f"({done.bytes} bytes)")


@db.command("restore", help="Restore a backup into the configured (empty) database, then "
                            "migrate it. Stop the service first.")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace a database that already has tables.")
def db_restore(path: Path, force: bool) -> None:
    url = _settings().database_url
    _say(f"keystore: database {migrate.describe(url)}")
    try:
        revision = backup.restore(path, url, force=force)
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


cli_hooks.register(main, _keystore, _database, _say)
