"""Migration 0024 up and down with rows, on both backends: a delivery_failed review is a
delivery's (issue 29), so a record may have one open per destination."""
from __future__ import annotations

import pytest
from sqlalchemy import create_engine, insert, text
from sqlalchemy.exc import IntegrityError

from keystore_service.storage.db import normalise_url
from keystore_service.storage.tables import records

from .migration_support import row
from .migration_support import to_revision as _to

REVIEW = ("INSERT INTO reviews (id, tenant_id, record_id, scope, key, incarnation, attempt, "
          "kind, state, opened_at, updated_at, count{column}) VALUES ({id}, 1, 1, 'hook:s', "
          "'e1', 1, 1, 'delivery_failed', 'open', 0, 0, 1{value})")


def review(pk: int, destination: str | None = None) -> str:
    """A review's row; at 0024 with its destination."""
    if destination is None:
        return REVIEW.format(id=pk, column="", value="")
    return REVIEW.format(id=pk, column=", destination", value=f", '{destination}'")


def _run(url: str, sql: str) -> list:
    engine = create_engine(normalise_url(url))
    with engine.begin() as conn:
        result = conn.execute(text(sql))
        rows = [tuple(r) for r in result] if result.returns_rows else []
    engine.dispose()
    return rows


def test_0024_names_each_failed_reviews_destination_and_back(own_url):  # noqa: F811
    _to(own_url, "0023_deliveries", down=True)
    _run(own_url, "INSERT INTO tenants (id, name, created_at) VALUES (1, 't', 0)")
    _run(own_url, "INSERT INTO hook_sources (id, tenant_id, name, provider, ingest_hash, "
                  "sealed, config, ttl_seconds, retry_window_seconds, keep_body_seconds, state, "
                  "created_at, updated_at) VALUES (3, 1, 's', 'generic', 'h', 'x', '{}', "
                  "999999, 3600, 0, 'active', 0, 0)")
    for did, name, position in ((5, "billing", 0), (6, "crm", 1)):
        _run(own_url, "INSERT INTO hook_destinations (id, tenant_id, source_id, name, "
                      "position, url, timeout_seconds, max_in_flight) VALUES "
                      f"({did}, 1, 3, '{name}', {position}, 'http://127.0.0.1/', 10, 4)")
    engine = create_engine(normalise_url(own_url))
    with engine.begin() as conn:
        conn.execute(insert(records).values(row(scope="hook:s", key="e1", id=1)))
    engine.dispose()
    for pk, did, state in ((1, 5, "delivered"), (2, 6, "failed")):
        _run(own_url, "INSERT INTO hook_events (id, tenant_id, source_id, record_id, event_id, "
                      "state, headers, received_at, window_start, attempts, destination_id) "
                      f"VALUES ({pk}, 1, 3, 1, 'e1', '{state}', '[]', 1, 1, 1, {did})")
    _run(own_url, review(1))
    with pytest.raises(IntegrityError):  # at 0023: one open review per (record, kind)
        _run(own_url, review(2))
    _to(own_url, "0024_delivery_reviews")
    # the existing review is its failed delivery's (crm), not the first destination's
    assert _run(own_url, "SELECT id, destination FROM reviews") == [(1, "crm")]
    _run(own_url, review(2, "billing"))
    with pytest.raises(IntegrityError):  # still one per (record, kind, destination)
        _run(own_url, review(3, "billing"))
    assert _run(own_url, "SELECT id, destination, state FROM reviews ORDER BY id") == [
        (1, "crm", "open"), (2, "billing", "open")]
    _to(own_url, "0023_deliveries", down=True)  # the later one is resolved, the first stays
    assert _run(own_url, "SELECT id, state, resolution FROM reviews ORDER BY id") == [
        (1, "open", None), (2, "resolved", "downgraded")]
    _to(own_url, "0024_delivery_reviews")  # a downgrade forgot whose the second one was
    assert _run(own_url, "SELECT id, destination, state FROM reviews ORDER BY id") == [
        (1, "crm", "open"), (2, "crm", "resolved")]
