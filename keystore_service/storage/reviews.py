"""Review items and the resolution audit trail, in SQL. Every method runs on the caller's
cursor, inside the caller's transaction: a review opens or closes with the change it is about.

One open review per (record, kind, destination) is enforced by a partial unique index (the
destination is a delivery_failed review's, '' for the other kinds), so "open one, or count one
more refused attempt on the open one" is a single upsert. The record keeps the id
of its oldest open review (`records.review_id`) so that rendering a record needs no query
unless a review is open.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from sqlalchemy import bindparam, func, null, select, text, update
from sqlalchemy.dialects import postgresql, sqlite

from keystore_service.domain.records import Micros, Record
from keystore_service.storage.db import Database
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import kept_payloads, records, resolutions, reviews

V = reviews.c
RESULT = list(records.c.keys()).index("result")
KEPT = list(reviews.c.keys()).index("kept")
KEEP_FINGERPRINTS = 10  # refused fingerprints shown per review: the newest distinct ones


@dataclass(frozen=True, slots=True)
class Review:
    id: int
    tenant_id: int
    record_id: Optional[int]
    scope: str
    key: str
    incarnation: int
    attempt: int
    kind: str
    state: str
    opened_at: Micros
    updated_at: Micros
    count: int
    original_fingerprint: Optional[str]
    refused_fingerprints: Optional[str]
    resolution: Optional[str]
    resolved_at: Optional[Micros]
    resolved_by: Optional[str]
    kept: Optional[str] = None  # JSON: a refused body and headers kept for a person
    destination: str = ""  # a delivery_failed review's destination's name (0024)

    @property
    def refused(self) -> list[str]:
        return json.loads(self.refused_fingerprints) if self.refused_fingerprints else []


class ReviewStore:
    def __init__(self, db: Database):
        self.db = db
        d = db.engine.dialect
        ins = (sqlite if db.sqlite else postgresql).insert(reviews).values(
            {c.name: bindparam(c.name) for c in reviews.c
             if c.name not in ("id", "resolution", "resolved_at", "resolved_by")})
        self._open = Sql(ins.on_conflict_do_update(
            index_elements=[V.record_id, V.kind, V.destination],
            index_where=text("state = 'open'"),
            set_={"count": V.count + ins.excluded.count, "updated_at": ins.excluded.updated_at},
        ).returning(*reviews.c), d)
        self._refused = Sql(update(reviews).where(V.id == bindparam("rid")).values(
            refused_fingerprints=bindparam("fps")), d)
        closing = update(reviews).values(kept=null(),
            state="resolved", resolution=bindparam("resolution"), resolved_at=bindparam("now"),
            resolved_by=bindparam("actor"), updated_at=bindparam("now")).returning(V.id)
        self._close_kind = Sql(closing.where(
            V.record_id == bindparam("record_id"), V.state == "open",
            V.kind.like(bindparam("kind"))), d)
        self._close_delivery = Sql(closing.where(
            V.tenant_id == bindparam("tenant_id"), V.record_id == bindparam("record_id"),
            V.state == "open", V.kind == bindparam("kind"),
            V.destination == bindparam("destination")), d)
        self._close_one = Sql(closing.where(
            V.record_id == bindparam("record_id"), V.state == "open",
            V.id == bindparam("review_id")), d)
        oldest_open = select(func.min(V.id)).where(
            V.record_id == bindparam("record_id"), V.state == "open").scalar_subquery()
        self._point = Sql(update(records).where(records.c.id == bindparam("record_id"))
                          .values(review_id=oldest_open).returning(records.c.review_id), d)
        self._get = Sql(select(reviews).where(V.id == bindparam("rid")), d)
        self._open_of = Sql(select(reviews).where(
            V.record_id == bindparam("record_id"), V.state == "open").order_by(V.id), d)
        self._audit = Sql(resolutions.insert().values(
            {c.name: bindparam(c.name) for c in resolutions.c if c.name != "id"}), d)

    def open_or_count(self, cur: Any, record: Record, kind: str, now: Micros,
                      refused_fingerprint: Optional[str] = None, count: int = 1,
                      kept: Optional[str] = None, destination: str = "") -> Review:
        """Open the record's review of `kind` (a delivery_failed one: of the delivery to
        `destination`), or count `count` more refusals on it. `kept` (what a person
        compares, JSON) is stored when the review opens, never replaced."""
        review = Review(*self._open.one(cur, {
            "tenant_id": record.tenant_id, "record_id": record.id, "scope": record.scope,
            "key": record.key, "incarnation": record.incarnation, "attempt": record.attempt,
            "kind": kind, "state": "open", "opened_at": now, "updated_at": now, "count": count,
            "original_fingerprint": record.fingerprint, "refused_fingerprints": None,
            "kept": kept, "destination": destination}))
        if refused_fingerprint is not None and refused_fingerprint not in review.refused:
            fps = ([refused_fingerprint] + review.refused)[:KEEP_FINGERPRINTS]
            self._refused.run(cur, {"rid": review.id, "fps": json.dumps(fps)})
        if record.review_id is None:
            self._point.run(cur, {"record_id": record.id})
        return review

    def close(self, cur: Any, record_id: int, resolution: str, now: Micros,
              actor: Optional[str] = None, kind: str = "%",
              review_id: Optional[int] = None, destination: Optional[str] = None,
              tenant_id: Optional[int] = None) -> list[int]:
        """Resolve the record's open reviews (of `kind`; only `review_id`; or the review of
        `kind`, a name, of the delivery to `destination`, of the record's `tenant_id`); the
        record then points at its oldest review still open, if any."""
        params = {"record_id": record_id, "kind": kind, "resolution": resolution, "now": now,
                  "actor": actor, "review_id": review_id, "destination": destination,
                  "tenant_id": tenant_id}
        stmt = self._close_one if review_id is not None else \
            self._close_kind if destination is None else self._close_delivery
        ids = [row[0] for row in stmt.all(cur, params)]
        if ids:
            self._point.run(cur, {"record_id": record_id})
        return ids

    def get(self, review_id: int, cur: Any = None) -> Optional[Review]:
        if cur is not None:
            row = self._get.one(cur, {"rid": review_id})
        else:
            with self.db.connection() as c:
                row = self._get.one(c, {"rid": review_id})
        return Review(*row) if row else None

    def page(self, tenant_id: int, state: str, kind: Optional[str], scope: Optional[str],
             key: Optional[str], opened_before: Optional[Micros], limit: int,
             after: Optional[tuple[int, int]], budget: int
             ) -> tuple[list[tuple[Review, Optional[Record]]], bool]:
        """Reviews oldest first (after `after`: the (opened_at, id) of the last one shown),
        each with its record, and whether more follow. A page ends early once what it
        carries reaches `budget` characters: its records' results, its reviews' kept bodies
        and headers, and its records' kept payloads (issue 25, item 8). Those are read after
        the page is cut (their lengths first), so 500 reviews that each keep 64 KiB and whose
        records hold 256 KiB results are never 160 MB, in the answer or in memory."""
        shown = [records.c[n] if n != "result" else func.length(records.c.result)
                 for n in records.c.keys()]
        kept = [c if c.name != "kept" else func.length(V.kept) for c in reviews.c]
        payload = select(func.length(kept_payloads.c.payload)).where(
            kept_payloads.c.record_id == records.c.id,
            kept_payloads.c.incarnation == records.c.incarnation).scalar_subquery()
        stmt = (select(*kept, *shown, payload).join_from(reviews, records,
                                                        V.record_id == records.c.id,
                                                        isouter=True)
                .where(V.tenant_id == tenant_id, V.state == state)
                .order_by(V.opened_at, V.id).limit(limit + 1))
        if kind:
            stmt = stmt.where(V.kind == kind)
        if scope:
            stmt = stmt.where(V.scope == scope)
        if key:
            stmt = stmt.where(V.key == key)
        if opened_before is not None:
            stmt = stmt.where(V.opened_at <= opened_before)
        if after:
            opened_at, last_id = after
            stmt = stmt.where((V.opened_at > opened_at)
                              | ((V.opened_at == opened_at) & (V.id > last_id)))
        d = self.db.engine.dialect
        width = len(reviews.c)
        with self.db.connection() as cur:
            rows = Sql(stmt, d, bound=True).all(cur)
            size, page = 0, []
            for row in rows[:limit]:
                size += (row[KEPT] or 0) + (row[width + RESULT] or 0) + (row[-1] or 0)
                if page and size > budget:
                    break  # the rest comes with the next page
                page.append(row)
            ids = [r[width] for r in page if r[width] is not None and r[width + RESULT]]
            # tenant_id is redundant with the ids (rows of this page): it names the shard.
            results = dict(Sql(select(records.c.id, records.c.result).where(
                records.c.tenant_id == tenant_id, records.c.id.in_(ids)), d,
                bound=True).all(cur)) if ids else {}
            with_kept = [r[0] for r in page if r[KEPT]]
            kept_of = dict(Sql(select(V.id, V.kept).where(
                V.tenant_id == tenant_id, V.id.in_(with_kept)), d,
                bound=True).all(cur)) if with_kept else {}
        out = []
        for row in page:
            review = Review(*row[:KEPT], kept_of.get(row[0]), *row[KEPT + 1:width])
            r = row[width:-1]
            out.append((review, Record(*r[:RESULT], results.get(r[0]), *r[RESULT + 1:])
                        if r[0] is not None else None))
        return out, len(rows) > len(page)

    def open_of(self, cur: Any, record_id: int) -> list[Review]:
        return [Review(*row) for row in self._open_of.all(cur, {"record_id": record_id})]

    def audit(self, cur: Any, **row: Any) -> None:
        self._audit.run(cur, row)


assert [c.name for c in reviews.c] == list(Review.__slots__), "column order = Review"
