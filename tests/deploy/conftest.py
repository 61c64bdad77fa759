"""Fixtures for the deployment tests: empty (unmigrated) databases on both backends."""
from __future__ import annotations

import os
import secrets

import pytest
from sqlalchemy.engine import make_url

from tests.conftest import PG_ADMIN_URL


@pytest.fixture
def empty_database(request, database_url, tmp_path):
    """A factory of new, empty databases (no schema) on the backend of `database_url`, so a
    test that uses both runs once per backend."""
    made: list[str] = []

    def make() -> str:
        if database_url.startswith("sqlite"):
            return f"sqlite:///{tmp_path}/empty-{len(made)}-{secrets.token_hex(2)}.db"
        admin = request.getfixturevalue("pg_admin")
        name = f"keystore_deploy_{os.getpid()}_{secrets.token_hex(3)}"
        admin.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    yield make
    if made:
        admin = request.getfixturevalue("pg_admin")
        for name in made:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
