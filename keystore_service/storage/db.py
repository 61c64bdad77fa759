"""Engines, connections and transactions for SQLite and PostgreSQL.

Connections run in driver-level autocommit: a single statement is its own transaction (one
round trip on PostgreSQL, and on SQLite a write statement takes the write lock before it
reads). Several statements that must commit together use `transaction()`, which opens with
`BEGIN IMMEDIATE` on SQLite, so the write lock is taken at BEGIN and a busy writer is waited
for (busy timeout) instead of failing later with "database is locked" on lock upgrade.

Database failures become `errors.Unavailable` (503): the statement or transaction was not
committed, or (a connection lost in flight) its effect is not known to this request.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url

from keystore_service.errors import Unavailable

log = logging.getLogger("keystore.db")
# SQLite raises OperationalError for outages and for bugs alike; these words mark outages.
_SQLITE_OUTAGES = ("locked", "busy", "unable to open", "disk", "readonly", "i/o")


def normalise_url(url: str) -> str:
    """Accept plain `postgresql://` URLs and use psycopg 3 for them."""
    u = make_url(url)
    if u.drivername in ("postgresql", "postgres", "postgresql+psycopg2"):
        u = u.set(drivername="postgresql+psycopg")
    return u.render_as_string(hide_password=False)


def create(url: str, *, pool_size: int = 8, sqlite_busy_timeout_ms: int = 5000,
           sqlite_synchronous: str = "NORMAL") -> Engine:
    """An engine whose pooled DBAPI connections are in autocommit mode."""
    url = normalise_url(url)
    if make_url(url).get_backend_name() == "sqlite":
        engine = create_engine(
            url, paramstyle="named", pool_size=pool_size, max_overflow=pool_size,
            connect_args={"timeout": sqlite_busy_timeout_ms / 1000, "check_same_thread": False,
                          "isolation_level": None})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout = {int(sqlite_busy_timeout_ms)}")
            cur.execute(f"PRAGMA synchronous = {sqlite_synchronous}")
            cur.execute("PRAGMA foreign_keys = ON")
            cur.close()
    else:
        engine = create_engine(url, pool_size=pool_size, max_overflow=pool_size,
                               pool_timeout=10)

        @event.listens_for(engine, "connect")
        def _pg_autocommit(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.autocommit = True
    return engine


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


class Database:
    """Pooled autocommit connections, transactions, and one mapping of failures to 503."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.sqlite = is_sqlite(engine)
        self._begin = "BEGIN IMMEDIATE" if self.sqlite else "BEGIN"
        dbapi = engine.dialect.loaded_dbapi
        self._failures = (dbapi.OperationalError, dbapi.InterfaceError)
        self.integrity_errors = dbapi.IntegrityError
        self._pool_timeout = _pool_timeout_error()

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A DBAPI cursor on an autocommit connection: each statement commits alone."""
        try:
            conn = self.engine.raw_connection()
        except self._pool_timeout as exc:
            raise Unavailable("no database connection is free; try again") from exc
        except Exception as exc:  # the pool may wrap the driver's error, or not
            if isinstance(exc, self._failures) or isinstance(getattr(exc, "orig", None),
                                                              self._failures):
                log.warning("cannot connect to the database: %s", _reason(exc))
                raise Unavailable() from exc
            raise
        cur = conn.cursor()
        try:
            yield cur
        except self._failures as exc:
            if not self._is_outage(exc):
                raise  # a bug (SQLite reports syntax errors as OperationalError too): 500
            self._discard_if_broken(conn, cur, exc)
            raise Unavailable() from exc
        finally:
            _quietly(cur.close)
            _quietly(conn.close)

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A cursor inside BEGIN (IMMEDIATE on SQLite) ... COMMIT; rolled back on any error."""
        with self.connection() as cur:
            cur.execute(self._begin)
            try:
                yield cur
            except BaseException:
                _quietly(cur.execute, "ROLLBACK")
                raise
            cur.execute("COMMIT")

    def _is_outage(self, exc: BaseException) -> bool:
        if not self.sqlite:
            return True  # psycopg: OperationalError and InterfaceError are about the server
        message = str(exc).lower()
        return any(word in message for word in _SQLITE_OUTAGES)

    def _discard_if_broken(self, conn: Any, cur: Any, exc: BaseException) -> None:
        if self.engine.dialect.is_disconnect(exc, conn.dbapi_connection, cur):
            # A restarted server has dropped every pooled connection, not just this one:
            # start the pool afresh (connections in use are dropped when they come back), so
            # one request per worker meets a dead connection after a restart, not one per
            # pooled connection.
            log.warning("database connection lost; discarding the pool: %s",
                        type(exc).__name__)
            _quietly(conn.invalidate)
            _quietly(self.engine.dispose)
        else:
            log.warning("database unavailable: %s", _reason(exc))

    def ping(self) -> None:
        with self.connection() as cur:
            cur.execute("SELECT 1")
            cur.fetchall()


def _reason(exc: BaseException) -> str:
    """The first line of a driver message (never parameters: we never interpolate them)."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]


def _pool_timeout_error() -> type[BaseException]:
    from sqlalchemy.exc import TimeoutError as PoolTimeout
    return PoolTimeout


def _quietly(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except Exception:  # closing a broken connection must not hide the first error
        pass
