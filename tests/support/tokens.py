"""The one token helper: a tenant's token made with the service's own accounts code, in
process (the `keystore token create` command does the same, at ~2 s of start-up a call)."""
from __future__ import annotations

from typing import Optional

from .clock import T0


def new_token(database_url: str, tenant: str, role: str = "client",
              name: Optional[str] = None, now: int = T0) -> str:
    """A token of `role` called `name` for `tenant` (created if missing), made at `now`, in
    the migrated database at `database_url`."""
    from keystore_service.storage.accounts import AccountError, Accounts
    from keystore_service.storage.db import Database, create
    database = Database(create(database_url, pool_size=1))
    try:
        accounts = Accounts(database)
        try:
            accounts.create_tenant(tenant, now)
        except AccountError:
            pass  # exists already
        return accounts.create_token(tenant, role, name, now)
    finally:
        database.engine.dispose()
