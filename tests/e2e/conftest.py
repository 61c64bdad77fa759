from __future__ import annotations

import itertools

import pytest

from keystore_service.storage import migrate
from tests.support import Server, new_token

_tenants = itertools.count()


@pytest.fixture(scope="module",
                params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def e2e_url(request, tmp_path_factory):
    """A database of this module's own, on each backend (the server outlives single tests)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('e2e')}/keystore.db"
        migrate.upgrade(url)
        return url
    return request.getfixturevalue("pg_database")("_e2e")


@pytest.fixture(scope="module")
def server(e2e_url, tmp_path_factory):
    """A real `keystore serve`: gunicorn, 4 gthread workers, started once per module."""
    s = Server(e2e_url, workers=4, threads=4,
               log_path=tmp_path_factory.mktemp("log") / "server.log").start()
    yield s
    s.stop()


@pytest.fixture
def token(e2e_url) -> str:
    """A client token of a tenant of the test's own."""
    return new_token(e2e_url, f"e2e-{next(_tenants)}")
