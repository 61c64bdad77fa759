"""SQLite's writer queue (storage/db.py, WriterQueue): the transactions of every process on a
database file take turns on `<database>-writers`, and a turn that does not come within the
wait goes ahead on SQLite's own locks, as before the queue."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from keystore_service.storage import db

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def database(tmp_path, wait: float = 5.0) -> db.Database:
    return db.Database(db.create(f"sqlite:///{tmp_path / 'k.db'}"), wait)


def hold(path: str, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, path, str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_transaction_waits_for_another_processs_turn(tmp_path):
    d = database(tmp_path)
    proc = hold(str(tmp_path / "k.db-writers"), 0.5)
    started = time.monotonic()
    with d.transaction() as cur:
        took = time.monotonic() - started
        cur.execute("CREATE TABLE t (x)")
    proc.wait(5)
    assert 0.3 < took < 3, took


def test_a_turn_that_does_not_come_goes_ahead_on_sqlites_locks(tmp_path):
    d = database(tmp_path, wait=0.3)
    proc = hold(str(tmp_path / "k.db-writers"), 30)  # a stopped process holding its turn
    try:
        started = time.monotonic()
        with d.transaction() as cur:
            cur.execute("CREATE TABLE t (x)")
        assert 0.25 < time.monotonic() - started < 3
        with d.transaction() as cur:  # and the next one too: nothing was left locked
            cur.execute("INSERT INTO t VALUES (1)")
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_holder_lets_go_at_once(tmp_path):
    d = database(tmp_path)
    proc = hold(str(tmp_path / "k.db-writers"), 30)
    proc.kill()
    proc.wait()
    started = time.monotonic()
    with d.transaction() as cur:
        cur.execute("CREATE TABLE t (x)")
    assert time.monotonic() - started < 0.5


def test_a_forked_child_queues_on_its_own_turn(tmp_path):
    """After a fork (gunicorn's workers) the child neither inherits the parent's thread turn
    (it would wait for ever for a lock no thread of its own holds) nor shares the parent's
    open lock file (it would take a turn the parent holds)."""
    d = database(tmp_path)
    queue = d.writers
    turn = queue.enter()
    assert turn == (True, True)
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            started = time.monotonic()
            got = queue.enter()
            took = time.monotonic() - started
            queue.leave(got)
            code = 0 if got == (True, True) and 0.2 < took < 4 else 2
        finally:
            os._exit(code)
    time.sleep(0.4)
    queue.leave(turn)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_no_queue_for_postgresql():
    engine = db.create("postgresql://keystore@127.0.0.1:1/none")  # (never connected)
    assert db.Database(engine).writers is None


def test_a_dropped_database_closes_its_lock_file(tmp_path):
    import gc

    def open_files() -> int:
        fds = [f"/proc/self/fd/{fd}" for fd in os.listdir("/proc/self/fd")]
        return sum(os.readlink(fd).endswith("k.db-writers") for fd in fds if os.path.exists(fd))
    for _ in range(5):
        d = database(tmp_path)
        with d.transaction() as cur:
            cur.execute("SELECT 1")
        d.engine.dispose()
        del d, cur
    gc.collect()
    assert open_files() == 0
