"""Database.steps: a transaction sent as a few batches (PostgreSQL: one round trip each, in
pipeline mode), on both backends: what it commits, what a failure leaves, and that the
connection it used serves the next request."""
from __future__ import annotations

import pytest
from sqlalchemy import text

from keystore_service.storage import db
from keystore_service.storage.sql import Sql


@pytest.fixture
def database(database_url):
    d = db.Database(db.create(database_url, pool_size=1))
    with d.connection() as cur:
        cur.execute("CREATE TABLE steps_t (x integer PRIMARY KEY)")
    yield d
    with d.connection() as cur:
        cur.execute("DROP TABLE steps_t")
    d.engine.dispose()


def sql(d: db.Database, statement: str) -> Sql:
    return Sql(text(statement), d.engine.dialect)


def rows(d: db.Database) -> list[int]:
    with d.connection() as cur:
        cur.execute("SELECT x FROM steps_t ORDER BY x")
        return [r[0] for r in cur.fetchall()]


def test_batches_commit_together_and_answer_each_statement(database):
    add = sql(database, "INSERT INTO steps_t (x) VALUES (:x) RETURNING x * 10")
    count = sql(database, "SELECT count(*) FROM steps_t")
    with database.steps() as steps:
        first = steps.send([(add, {"x": 1}), (add, {"x": 2}), (count, {})])
        assert first == [[(10,)], [(20,)], [(2,)]]
        assert rows(database) == []  # another connection: nothing committed yet
        last = steps.send([(add, {"x": 3}), (count, {})], last=True)
        assert last == [[(30,)], [(3,)]]
    assert rows(database) == [1, 2, 3]


def test_a_failing_statement_rolls_the_whole_transaction_back(database):
    add = sql(database, "INSERT INTO steps_t (x) VALUES (:x)")
    with pytest.raises(database.integrity_errors):
        with database.steps() as steps:
            steps.send([(add, {"x": 1})])
            steps.send([(add, {"x": 2}), (add, {"x": 1}), (add, {"x": 3})], last=True)
    assert rows(database) == []
    with database.steps() as steps:  # the one pooled connection is clean again
        steps.send([(add, {"x": 4})])
        steps.cursor().execute("INSERT INTO steps_t (x) VALUES (5)")
    assert rows(database) == [4, 5]


def test_an_error_in_the_callers_code_rolls_back(database):
    add = sql(database, "INSERT INTO steps_t (x) VALUES (:x)")
    with pytest.raises(RuntimeError):
        with database.steps() as steps:
            steps.send([(add, {"x": 1})])
            raise RuntimeError("the caller changed its mind")
    assert rows(database) == []
