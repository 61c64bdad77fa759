"""Apply the Alembic migrations, safely from several instances starting at once; and say which
database a URL points at, and whether it holds the key store's schema, without creating it.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from keystore_service.storage.db import normalise_url

MIGRATIONS = Path(__file__).parent / "migrations"
# Any constant both instances agree on; it serialises concurrent upgrades on PostgreSQL.
ADVISORY_LOCK_ID = 0x6B657973746F7265  # "keystore"
NONE = "(none)"  # how a database without the schema is named in messages


class DatabaseProblem(Exception):
    """The database cannot be reached or its schema cannot be used: a message for a person
    (never with the password; the URL is shown as `describe` shows it)."""


@dataclass(frozen=True)
class Upgraded:
    before: Optional[str]  # None: there was no schema
    after: str

    @property
    def migrated(self) -> bool:
        return self.before != self.after

    def summary(self) -> str:
        """One line for a person."""
        if self.migrated:
            return f"keystore: migrated the schema from {self.before or NONE} to {self.after}"
        return f"keystore: schema at revision {self.after} (up to date)"


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def head() -> str:
    return ScriptDirectory.from_config(_config()).get_current_head() or ""


def describe(url: str) -> str:
    """The URL as a person should see it: a SQLite path made absolute (a relative one depends
    on the current directory), a password masked, control characters escaped."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite" and u.database and u.database != ":memory:":
        absolute = str(Path(u.database).expanduser().resolve())
        u = u.set(database=absolute)
    masked = [k for k in u.query if k.lower() == "password"]
    u = u.difference_update_query(masked)
    shown = u.render_as_string(hide_password=True)
    if masked:
        shown += ("&" if "?" in shown else "?") + "&".join(f"{k}=***" for k in masked)
    return shown.encode("unicode_escape").decode("ascii") if not shown.isprintable() else shown


def sqlite_file_missing(url: str) -> bool:
    """True for a SQLite URL whose file does not exist (connecting would create it)."""
    u = make_url(url)
    if u.get_backend_name() != "sqlite":
        return False
    return not u.database or u.database == ":memory:" or not Path(u.database).expanduser().exists()


def revision(url: str) -> Optional[str]:
    """The database's schema revision; None when it has no schema (or, for SQLite, no file:
    the file is not created). Raises DatabaseProblem when the database cannot be reached."""
    if sqlite_file_missing(url):
        return None
    engine = create_engine(normalise_url(url), poolclass=NullPool)
    try:
        with _quiet_alembic(), engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    except DBAPIError as exc:
        raise DatabaseProblem(_unreachable(url, exc)) from None
    finally:
        engine.dispose()


def upgrade(url: str, to: str = "head") -> str:
    """Bring the database to the newest schema (or `to`); returns the revision it is at."""
    return upgrade_and_tell(url, to).after


def upgrade_and_tell(url: str, to: str = "head") -> Upgraded:
    """Migrate, with Alembic's own log lines silenced; says what changed. Creates the SQLite
    file if there is none. Raises DatabaseProblem (unreachable, or a revision this code does
    not know: migrated by a newer version)."""
    given, url = url, normalise_url(url)
    engine = create_engine(url, poolclass=NullPool)
    try:
        if make_url(url).get_backend_name() == "sqlite":
            _prepare_sqlite(engine)
        with _quiet_alembic(), engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({ADVISORY_LOCK_ID})")
            before = MigrationContext.configure(conn).get_current_revision()
            cfg = _config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, to)
            after = MigrationContext.configure(conn).get_current_revision() or ""
            return Upgraded(before, after)
    except DBAPIError as exc:
        raise DatabaseProblem(_unreachable(given, exc)) from None
    except CommandError as exc:
        raise DatabaseProblem(
            f"cannot migrate {describe(given)}: {exc}. Its schema may have been "
            f"migrated by a newer version of the key store; run that version.") from None
    finally:
        engine.dispose()


@contextmanager
def _quiet_alembic():
    """Alembic logs every step at INFO ("Context impl ...", "Running upgrade ..."); the
    callers say in one line what was migrated instead."""
    logger = logging.getLogger("alembic")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def _unreachable(url: str, exc: DBAPIError) -> str:
    reason = str(exc.orig or exc).strip().splitlines()
    first = reason[0][:300] if reason else type(exc).__name__
    u = make_url(url)
    for secret in [u.password, *[v for k, v in u.query.items() if k.lower() == "password"]]:
        if isinstance(secret, str) and secret:
            first = first.replace(secret, "***")  # drivers do not echo it; be sure anyway
    return f"cannot reach the database {describe(url)}: {first}"


def _prepare_sqlite(engine) -> None:
    """WAL is a property of the file: set it once here, not by every worker's connection
    (several workers issuing it at once fail with "database is locked")."""
    path = engine.url.database
    if path and path != ":memory:":
        Path(path).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA journal_mode=WAL")


def knows(revision: str) -> bool:
    """Whether `revision` is one of this code's migrations."""
    try:
        return ScriptDirectory.from_config(_config()).get_revision(revision) is not None
    except Exception:  # alembic raises several kinds for unknown or malformed ids
        return False


def current(url: str) -> tuple[str, str]:
    """(the database's revision, or "" without a schema; the newest revision this code knows).
    Never creates a SQLite file."""
    return revision(url) or "", head()
