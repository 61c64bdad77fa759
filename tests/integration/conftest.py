"""Fixtures for these tests live in tests/conftest.py (shared with tests/security), and here
the one the migration tests share."""
from __future__ import annotations

import pytest

from keystore_service.storage import migrate


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def own_url(request, tmp_path):
    """A migrated database of the test's own, which it may migrate down."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/own.db"
        migrate.upgrade(url)
        return url
    return request.getfixturevalue("pg_database")("_own")
