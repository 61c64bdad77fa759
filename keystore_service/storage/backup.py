"""`keystore db backup` and `keystore db restore`: a consistent copy of the whole database.

SQLite: the online backup API copies every page in one step under one read transaction, so
the copy is the database as of one instant while the service keeps writing (WAL mode lets
writers go on during the copy). The copy is a single file (journal mode DELETE), written
beside the target and renamed into place, readable by its owner only.

PostgreSQL: `pg_dump --format=custom` (one snapshot), restored with `pg_restore` into an
empty database in one transaction. Both need PostgreSQL's client programs on PATH, of the
server's major version or newer. The password goes to them in the environment, never on
the command line.

A restore refuses a database that already has tables (unless forced), a backup of the
other backend, and a backup newer than this code; afterwards it applies the migrations, so
a backup taken by an older release comes back at this release's schema.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path

from alembic.util import CommandError
from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

from keystore_service.storage import migrate
from keystore_service.storage.db import normalise_url

SQLITE_MAGIC = b"SQLite format 3\x00"
PG_DUMP_MAGIC = b"PGDMP"
# A backup waits this long for a writer's lock (the copy itself takes only a read lock).
BUSY_TIMEOUT_S = 30
# pg_dump of a large database takes minutes; an hour is "something is stuck".
PG_TOOL_TIMEOUT_S = 3600


class BackupError(Exception):
    """A backup or restore that did not happen; the message says why and what to do."""


@dataclass(frozen=True)
class Done:
    path: Path
    bytes: int
    revision: str


def backup(url: str, path: Path) -> Done:
    """Write a consistent copy of the database at `url` to `path` (replaced if it exists).
    Raises BackupError."""
    url = normalise_url(url)
    path = Path(path)
    if not path.parent.is_dir() or path.is_dir():
        raise BackupError(f"cannot write {path}: "
                          f"{'it is a directory' if path.is_dir() else 'no such directory'}")
    part = path.with_name(f".{path.name}.part-{os.getpid()}")
    try:
        if _backend(url) == "sqlite":
            _sqlite_backup(_sqlite_path(url), part)
        else:
            _pg_tool("pg_dump", url, ["--format=custom", "--no-owner", "--no-privileges",
                                      f"--file={part}"])
        os.chmod(part, 0o600)
        _fsync(part)
        os.replace(part, path)
    except OSError as exc:
        raise BackupError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        part.unlink(missing_ok=True)
    have, _head = migrate.current(url)
    return Done(path, path.stat().st_size, have)


def restore(path: Path, url: str, *, force: bool = False) -> str:
    """Restore the backup at `path` into the database at `url`, then migrate it to this
    code's schema; returns the revision. Raises BackupError."""
    url = normalise_url(url)
    path = Path(path)
    try:
        with open(path, "rb") as f:
            magic = f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise BackupError(f"cannot read {path}: {exc.strerror or exc}") from None
    kind = ("sqlite" if magic == SQLITE_MAGIC else
            "postgresql" if magic.startswith(PG_DUMP_MAGIC) else None)
    if kind is None:
        raise BackupError(f"{path} is not a backup made by `keystore db backup`")
    if kind != _backend(url):
        raise BackupError(f"{path} is a {kind} backup; the target database is "
                          f"{_backend(url)} (restore it into a {kind} database)")
    if not force and _has_tables(url):
        raise BackupError("the target database already has tables: restore into a new, "
                          "empty database, or pass --force to replace its contents")
    if kind == "sqlite":
        _check_sqlite_backup(path)
        _sqlite_restore(path, _sqlite_path(url))
    else:
        _check_revision(_pg_dump_revision(path))
        _pg_tool("pg_restore", url, ["--no-owner", "--no-privileges", "--exit-on-error",
                                     "--single-transaction",
                                     *(["--clean", "--if-exists"] if force else []),
                                     str(path)])
    try:
        return migrate.upgrade(url)
    except CommandError as exc:  # e.g. a PostgreSQL dump of a newer release's schema
        raise BackupError(f"restored, but the schema cannot be migrated: {exc}") from None


# --- SQLite ------------------------------------------------------------------------------

def _sqlite_path(url: str) -> Path:
    database = make_url(url).database
    if not database or database == ":memory:":
        raise BackupError("an in-memory SQLite database cannot be backed up or restored")
    return Path(database).expanduser()


def _sqlite_backup(source: Path, target: Path) -> None:
    if not source.is_file():
        raise BackupError(f"no database file at {source}")
    src = sqlite3.connect(source, timeout=BUSY_TIMEOUT_S)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)  # all pages in one step: one consistent read transaction
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
        finally:
            dst.close()
    except sqlite3.Error as exc:
        raise BackupError(f"the SQLite backup failed: {exc}") from None
    finally:
        src.close()


def _check_sqlite_backup(path: Path) -> None:
    try:
        conn = sqlite3.connect(_read_only(path), uri=True)
        try:
            ok = conn.execute("PRAGMA quick_check").fetchone()[0]
            rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        raise BackupError(f"{path} is not a key store database") from None
    if ok != "ok":
        raise BackupError(f"{path} is damaged (SQLite quick_check: {ok[:200]})")
    _check_revision(rows[0][0] if rows else "")


def _read_only(path: Path) -> str:
    """A read-only SQLite URI for `path` (percent-encoded: a '?' or '#' in a name is safe)."""
    return Path(path).resolve().as_uri() + "?mode=ro"


def _sqlite_restore(backup_file: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(_read_only(backup_file), uri=True)
    try:
        dst = sqlite3.connect(target, timeout=BUSY_TIMEOUT_S)
        try:
            src.backup(dst)
        finally:
            dst.close()
    except sqlite3.Error as exc:
        raise BackupError(f"the SQLite restore failed: {exc}") from None
    finally:
        src.close()


# --- PostgreSQL ----------------------------------------------------------------------------

def _pg_tool(tool: str, url: str, args: list[str]) -> None:
    program = shutil.which(tool)
    if program is None:
        raise BackupError(f"{tool} is not installed: install PostgreSQL's client programs "
                          "(Debian: postgresql-client), or use the pg_dump line in "
                          "docs/deployment.md")
    u = make_url(url)
    env = {**os.environ, "PGPASSWORD": u.password or os.environ.get("PGPASSWORD", "")}
    if not env["PGPASSWORD"]:
        del env["PGPASSWORD"]
    try:
        done = subprocess.run([program, f"--dbname={_libpq_uri(u)}", *args], env=env,
                              capture_output=True, text=True, timeout=PG_TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise BackupError(f"{tool} did not finish within {PG_TOOL_TIMEOUT_S} s") from None
    if done.returncode != 0:
        detail = " ".join(done.stderr.split())[:500]
        raise BackupError(f"{tool} failed ({done.returncode}): {detail}")


def _pg_dump_revision(path: Path) -> str:
    """The schema revision recorded in a pg_dump archive, read without any database."""
    program = shutil.which("pg_restore")
    if program is None:
        raise BackupError("pg_restore is not installed: install PostgreSQL's client programs "
                          "(Debian: postgresql-client)")
    done = subprocess.run([program, "--data-only", "--table=alembic_version", "--file=-",
                           str(path)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise BackupError(f"{path} cannot be read by pg_restore: "
                          f"{' '.join(done.stderr.split())[:300]}")
    lines = done.stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("COPY ") and "alembic_version" in line and i + 1 < len(lines):
            return "" if lines[i + 1] == "\\." else lines[i + 1].strip()
    return ""


def _libpq_uri(u: URL) -> str:
    """The URL as libpq reads it: no driver name, no password (that goes in PGPASSWORD)."""
    plain = u.set(drivername="postgresql", password=None)
    return plain.render_as_string(hide_password=False)


# --- both ----------------------------------------------------------------------------------

def _backend(url: str) -> str:
    return "sqlite" if make_url(url).get_backend_name() == "sqlite" else "postgresql"


def _has_tables(url: str) -> bool:
    if _backend(url) == "sqlite" and not _sqlite_path(url).exists():
        return False
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return bool(inspect(conn).get_table_names())
    except Exception as exc:  # unreachable server, bad credentials, not a database file
        raise BackupError(f"cannot open the target database: {type(exc).__name__}") from None
    finally:
        engine.dispose()


def _check_revision(revision: str) -> None:
    if not revision:
        raise BackupError("the backup has no schema revision: not a key store database")
    if not migrate.knows(revision):
        raise BackupError(f"the backup is at schema revision {revision!r}, which this "
                          "release does not know (a newer release made it): restore it "
                          "with that release")


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
