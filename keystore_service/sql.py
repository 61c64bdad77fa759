"""Statements built once with SQLAlchemy Core, compiled once per dialect, run on DBAPI cursors.

The claim is paid on every event of every connector, so its statements are not rebuilt and
recompiled per request: a Core statement is compiled at start into the driver's SQL string,
and each call only binds parameters (measured in docs/benchmarks.md).
"""
from __future__ import annotations

from typing import Any, Optional

from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement


class Sql:
    """One compiled statement: `run(cursor, **params)` binds by name and executes."""

    __slots__ = ("text", "_defaults")

    def __init__(self, stmt: ClauseElement, dialect: Dialect):
        compiled = stmt.compile(dialect=dialect)
        self.text = compiled.string
        # Literal values inside the statement (state names, + 1) become anonymous binds.
        self._defaults = {k: v for k, v in compiled.params.items() if v is not None}

    def run(self, cur: Any, params: Optional[dict] = None) -> Any:
        cur.execute(self.text, {**self._defaults, **params} if params else self._defaults)
        return cur

    def one(self, cur: Any, params: Optional[dict] = None) -> Optional[tuple]:
        return self.run(cur, params).fetchone()

    def all(self, cur: Any, params: Optional[dict] = None) -> list[tuple]:
        return self.run(cur, params).fetchall()
