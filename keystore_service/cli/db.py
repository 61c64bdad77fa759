"""The database's commands: `keystore db upgrade|current|backup|restore` (docs/deployment.md).
Each names its database on stderr; none of them requires the schema first."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from keystore_service.cli.common import said_url, say
from keystore_service.storage import backup, migrate


@click.group("db", help="Database schema.")
def db() -> None:
    pass


@db.command("upgrade", help="Create or migrate the schema (safe from several hosts at once).")
def db_upgrade() -> None:
    url = said_url()
    try:
        say(migrate.upgrade_and_tell(url).summary())
    except migrate.DatabaseProblem as exc:
        raise click.ClickException(str(exc)) from None


@db.command("current", help="Show the schema revision of the database and of this code.")
def db_current() -> None:
    url = said_url()
    try:
        have, head = migrate.current(url)
    except migrate.DatabaseProblem as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"database: {have or migrate.NONE}\ncode:     {head}")
    if have != head:
        sys.exit(1)


@db.command("backup", help="Write a consistent copy of the database to PATH while the "
                           "service runs (SQLite: online backup; PostgreSQL: pg_dump).")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def db_backup(path: Path) -> None:
    url = said_url()
    try:
        done = backup.backup(url, path)
    except backup.BackupError as exc:
        raise click.ClickException(str(exc)) from None
    say(f"keystore: backup of schema {done.revision} written to {done.path} "
        f"({done.bytes} bytes)")


@db.command("restore", help="Restore a backup into the configured (empty) database, then "
                            "migrate it. Stop the service first.")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace a database that already has tables.")
def db_restore(path: Path, force: bool) -> None:
    url = said_url()
    try:
        revision = backup.restore(path, url, force=force)
    except backup.BackupError as exc:
        raise click.ClickException(str(exc)) from None
    say(f"keystore: restored {path}; schema at revision {revision}")


COMMANDS = (db,)
