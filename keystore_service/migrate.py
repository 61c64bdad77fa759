"""Apply the Alembic migrations, safely from several instances starting at once."""
from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from .db import normalise_url

MIGRATIONS = Path(__file__).parent / "migrations"
# Any constant both instances agree on; it serialises concurrent upgrades on PostgreSQL.
ADVISORY_LOCK_ID = 0x6B657973746F7265  # "keystore"


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def upgrade(url: str) -> str:
    """Bring the database to the newest schema; returns the revision it is at."""
    url = normalise_url(url)
    engine = create_engine(url, poolclass=NullPool)
    try:
        if make_url(url).get_backend_name() == "sqlite":
            _prepare_sqlite(engine)
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({ADVISORY_LOCK_ID})")
            cfg = _config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
            return MigrationContext.configure(conn).get_current_revision() or ""
    finally:
        engine.dispose()


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
    """(the database's revision, the newest revision this code knows)."""
    engine = create_engine(normalise_url(url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            have = MigrationContext.configure(conn).get_current_revision() or ""
    finally:
        engine.dispose()
    return have, ScriptDirectory.from_config(_config()).get_current_head() or ""
