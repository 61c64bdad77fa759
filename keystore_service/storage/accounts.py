"""Tenants and their bearer tokens. Only a token's SHA-256 is stored; the token is shown once.

A token is 256 random bits, so a plain SHA-256 (no salt, no slow hash) is the right tool:
nothing can be guessed, and a lookup by hash stays one indexed read.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Optional

from sqlalchemy import bindparam, func, select

from keystore_service.storage.db import Database
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import tenants, tokens

ROLES = ("client", "operator")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the tenant is taken from the token, never from the request."""

    tenant_id: int
    tenant: str
    role: str
    token_name: str
    token_id: int = 0

    @property
    def is_operator(self) -> bool:
        return self.role == "operator"


class AccountError(ValueError):
    """A tenant or token request that cannot be carried out (clear message for the CLI)."""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class Accounts:
    def __init__(self, db: Database):
        self.db = db
        d = db.engine.dialect
        t, k = tenants.c, tokens.c
        self._by_hash = Sql(
            select(k.token_hash, k.tenant_id, t.name, k.role, k.name, k.id)
            .join_from(tokens, tenants, k.tenant_id == t.id)
            .where(k.token_hash == bindparam("h"), k.revoked_at.is_(None)), d)
        self._tenant_id = Sql(select(t.id).where(t.name == bindparam("name")), d)
        self._tenant_name = Sql(select(t.name).where(t.id == bindparam("id")), d)
        self._count_tenants = Sql(select(func.count()).select_from(tenants), d)
        self._add_tenant = Sql(tenants.insert().values(
            name=bindparam("name"), created_at=bindparam("now")).returning(t.id), d)
        self._add_token = Sql(tokens.insert().values(
            tenant_id=bindparam("tenant_id"), name=bindparam("name"), role=bindparam("role"),
            token_hash=bindparam("h"), created_at=bindparam("now")), d)
        self._revoke = Sql(tokens.update().where(
            k.tenant_id == bindparam("tenant_id"), k.name == bindparam("name"),
            k.revoked_at.is_(None)).values(revoked_at=bindparam("now")).returning(k.id), d)
        self._names = Sql(select(k.name).where(k.tenant_id == bindparam("tenant_id")), d)

    def principal(self, token: str) -> Optional[Principal]:
        """The principal of a valid, unrevoked token, or None. Compared in constant time."""
        digest = hash_token(token)
        with self.db.connection() as cur:
            row = self._by_hash.one(cur, {"h": digest})
        if row is None or not hmac.compare_digest(row[0], digest):
            return None
        return Principal(tenant_id=row[1], tenant=row[2], role=row[3], token_name=row[4],
                         token_id=row[5])

    def tenant_name(self, tenant_id: int) -> str:
        """The tenant's name ("-" for none); names never change, so callers may cache."""
        with self.db.connection() as cur:
            row = self._tenant_name.one(cur, {"id": tenant_id})
        return row[0] if row else "-"

    def tenant_id(self, name: str) -> Optional[int]:
        with self.db.connection() as cur:
            row = self._tenant_id.one(cur, {"name": name})
        return row[0] if row else None

    def tenant_count(self) -> int:
        with self.db.connection() as cur:
            return self._count_tenants.one(cur)[0]

    def create_tenant(self, name: str, now: int) -> int:
        if not 1 <= len(name) <= 64 or not name.isprintable():
            raise AccountError("a tenant name is 1-64 printable characters")
        with self.db.transaction() as cur:
            if self._tenant_id.one(cur, {"name": name}) is not None:
                raise AccountError(f"tenant {name!r} exists already")
            return self._add_tenant.one(cur, {"name": name, "now": now})[0]

    def create_token(self, tenant: str, role: str, name: Optional[str], now: int) -> str:
        """A new token for `tenant`; the only time the token itself is ever seen."""
        if role not in ROLES:
            raise AccountError(f"the role is one of {', '.join(ROLES)}")
        token = "ks_" + secrets.token_urlsafe(32)
        with self.db.transaction() as cur:
            row = self._tenant_id.one(cur, {"name": tenant})
            if row is None:
                raise AccountError(f"no tenant {tenant!r}; create it with `keystore tenant create`")
            taken = {r[0] for r in self._names.all(cur, {"tenant_id": row[0]})}
            name = name or _free_name(role, taken)
            if name in taken:
                raise AccountError(f"tenant {tenant!r} has a token named {name!r} already")
            self._add_token.run(cur, {"tenant_id": row[0], "name": name, "role": role,
                                      "h": hash_token(token), "now": now})
        return token

    def revoke_token(self, tenant: str, name: str, now: int) -> None:
        with self.db.transaction() as cur:
            row = self._tenant_id.one(cur, {"name": tenant})
            if row is None or self._revoke.one(cur, {"tenant_id": row[0], "name": name,
                                                      "now": now}) is None:
                raise AccountError(f"tenant {tenant!r} has no live token named {name!r}")

    def bootstrap(self, now: int) -> Optional[str]:
        """On a store with no tenant at all: tenant `default` and one operator token."""
        if self.tenant_count():
            return None
        try:
            self.create_tenant("default", now)
        except (AccountError, self.db.integrity_errors):
            return None  # another instance starting at the same moment won the race
        return self.create_token("default", "operator", "bootstrap-operator", now)


def _free_name(role: str, taken: set) -> str:
    n = 1
    while f"{role}-{n}" in taken:
        n += 1
    return f"{role}-{n}"
