"""Engines, connections and transactions for SQLite and PostgreSQL.

Connections run in driver-level autocommit: a single statement is its own transaction (one
round trip on PostgreSQL, and on SQLite a write statement takes the write lock before it
reads). Several statements that must commit together use `transaction()`, which opens with
`BEGIN IMMEDIATE` on SQLite, so the write lock is taken at BEGIN and a busy writer is waited
for (busy timeout) instead of failing later with "database is locked" on lock upgrade.

On SQLite, the transactions of all the processes on one database file also queue on a file
lock of their own (WriterQueue), so that a finished writer hands the write lock straight to
the next instead of leaving it to SQLite's busy handler, which sleeps and retries.

Database failures become `errors.Unavailable` (503): the statement or transaction was not
committed, or (a connection lost in flight) its effect is not known to this request.
"""
from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
import weakref
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

    def __init__(self, engine: Engine, wait_seconds: float = 5.0):
        """`wait_seconds`: how long a transaction queues for its turn on SQLite before it
        goes ahead on its own (the busy timeout's length; SQLite's locks decide then)."""
        self.engine = engine
        self.sqlite = is_sqlite(engine)
        path = engine.url.database if self.sqlite else None
        self.writers = WriterQueue(path + "-writers", wait_seconds) \
            if path and path != ":memory:" and not path.startswith("file:") else None
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
            turn = self.writers.enter() if self.writers is not None else None
            try:
                cur.execute(self._begin)
                try:
                    yield cur
                except BaseException:
                    _quietly(cur.execute, "ROLLBACK")
                    raise
                cur.execute("COMMIT")
            finally:
                if turn is not None:
                    self.writers.leave(turn)

    @contextmanager
    def steps(self) -> Iterator[Steps]:
        """A transaction written as a few batches of statements (Steps.send): on PostgreSQL
        each batch is one round trip (pipeline mode), BEGIN going with the first and COMMIT
        with the one sent `last`; on SQLite they run one by one. For a transaction that
        holds a contended lock: no round trip, and no wait of its thread for the GIL, falls
        between taking the lock and the COMMIT that lets it go. Rolled back on any error."""
        with self.connection() as cur:
            turn = self.writers.enter() if self.writers is not None else None
            steps = Steps(cur, self._begin, self.sqlite)
            try:
                yield steps
                if not steps.done:
                    steps.send([], last=True)
            except BaseException:
                if steps.begun:
                    _quietly(cur.execute, "ROLLBACK")
                raise
            finally:
                if turn is not None:
                    self.writers.leave(turn)

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


class Steps:
    """The batches of one transaction (Database.steps)."""

    def __init__(self, cur: Any, begin: str, sqlite: bool):
        self.cur, self.begin, self.sqlite = cur, begin, sqlite
        self.begun = self.done = False

    def cursor(self) -> Any:
        """The transaction's cursor, for statements run one at a time between batches."""
        assert not self.done, "the transaction has ended"
        if not self.begun:
            self.cur.execute(self.begin)
            self.begun = True
        return self.cur

    def send(self, statements: list[tuple[Any, dict]], last: bool = False) -> list[list]:
        """Run (Sql, params) statements in order; the rows of each (empty for none)."""
        assert not self.done, "the transaction has ended"
        cur = self.cur
        if self.sqlite:
            if not self.begun:
                cur.execute(self.begin)
                self.begun = True
            out = []
            for stmt, params in statements:
                stmt.run(cur, params)
                out.append(cur.fetchall() if cur.description else [])
            if last:
                cur.execute("COMMIT")
                self.done = True
            return out
        conn = cur.connection
        cursors = []
        try:
            with conn.pipeline():
                if not self.begun:
                    self.begun = True
                    cur.execute(self.begin)
                for stmt, params in statements:
                    cursors.append(stmt.run(conn.cursor(), params))
                if last:
                    cur.execute("COMMIT")
                    self.done = True
            return [c.fetchall() if c.description else [] for c in cursors]
        finally:
            for c in cursors:
                _quietly(c.close)


class WriterQueue:
    """SQLite: one transaction at a time per database file, across threads and processes,
    queued on a lock file beside it (`<database>-writers`; flock, so a process that dies
    lets go at once). Without it every waiting writer sleeps in SQLite's busy handler
    (1, 2, 5, 10 ... 100 ms between tries) while the lock may already be free: 4 gunicorn
    workers accepting webhooks held it idle so often that ingest ran at 0.65 of the claims
    with a p99 of 300-800 ms (bench/NOTES.md, "The gateway"). Only an ordering aid:
    SQLite's own locks still decide, and a writer that waited `wait_seconds` for its turn
    (a stopped process holding it) goes ahead without it, as before."""

    def __init__(self, path: str, wait_seconds: float):
        self.path, self.wait_seconds = path, wait_seconds
        self._threads = threading.Lock()
        self._fd, self._pid = -1, 0
        self.broken = False  # no lock file here (a read-only directory): SQLite alone
        _QUEUES.add(self)

    def forked(self) -> None:
        self._threads = threading.Lock()  # a thread of the parent may have held it
        if self._fd >= 0:  # the parent's open file shares the parent's lock: let it be
            _quietly(os.close, self._fd)
        self._fd, self._pid = -1, 0

    def __del__(self) -> None:  # a Database dropped (tests make many): its file too
        if self._fd >= 0 and self._pid == os.getpid():
            _quietly(os.close, self._fd)

    def enter(self) -> tuple[bool, bool]:
        """Wait for this transaction's turn; (thread turn, file turn) as taken."""
        if self.broken:
            return False, False
        deadline = time.monotonic() + self.wait_seconds
        if not self._threads.acquire(timeout=self.wait_seconds):
            return False, False
        try:
            if self._pid != os.getpid():
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                self._pid = os.getpid()
        except OSError as exc:
            log.warning("no SQLite writer queue at %s (%s): SQLite's busy handler alone",
                        self.path, type(exc).__name__)
            self.broken = True
            self._threads.release()
            return False, False
        pause = 0.0001
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True, True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return True, False
                time.sleep(pause)
                pause = min(pause * 2, 0.001)

    def leave(self, turn: tuple[bool, bool]) -> None:
        threads, file = turn
        if file:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        if threads:
            self._threads.release()


_QUEUES: weakref.WeakSet[WriterQueue] = weakref.WeakSet()
os.register_at_fork(after_in_child=lambda: [q.forked() for q in list(_QUEUES)])


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


def libpq_url(url: str) -> str:
    """A libpq URL for psycopg.connect (the relay's LISTEN): without SQLAlchemy's +psycopg."""
    return make_url(normalise_url(url)).set(drivername="postgresql").render_as_string(
        hide_password=False)
