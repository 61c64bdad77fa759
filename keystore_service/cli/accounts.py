"""Tenants and tokens: `keystore tenant create` and `keystore token create|revoke`. A new token
is printed alone on stdout, so that `TOKEN=$(keystore token create ...)` works."""
from __future__ import annotations

from typing import Optional

import click

from keystore_service.cli.common import accounts, database, no_tenant, say
from keystore_service.service.claims import system_clock
from keystore_service.storage.accounts import AccountError


@click.group("tenant", help="Tenants: separate customers of one key store.")
def tenant() -> None:
    pass


@tenant.command("create")
@click.argument("name")
@click.option("--create", is_flag=True,
              help="Create the key store's schema if the database has none (a new store).")
def tenant_create(name: str, create: bool) -> None:
    found, _ = accounts(database(create=create))
    try:
        found.create_tenant(name, system_clock())
    except AccountError as exc:
        raise click.ClickException(str(exc)) from None
    say(f"keystore: created tenant {name!r}")


@click.group("token", help="Bearer tokens (only their hashes are stored).")
def token() -> None:
    pass


@token.command("create", help="Create a token and print it once, alone on stdout.")
@click.option("--tenant", "tenant_name", required=True)
@click.option("--role", type=click.Choice(["client", "operator"]), default="client",
              show_default=True)
@click.option("--name", default=None, help="A name for the audit trail (default: ROLE-N).")
def token_create(tenant_name: str, role: str, name: Optional[str]) -> None:
    found, _ = accounts(database())
    if found.tenant_id(tenant_name) is None:
        raise no_tenant(tenant_name)
    try:
        value = found.create_token(tenant_name, role, name, system_clock())
    except AccountError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(value)
    article = "an" if role == "operator" else "a"
    say(f"keystore: created {article} {role} token for tenant {tenant_name!r}; store it now, "
        "it is not shown again")


@token.command("revoke", help="Revoke a token by its name (effective within the cache time).")
@click.option("--tenant", "tenant_name", required=True)
@click.option("--name", required=True)
def token_revoke(tenant_name: str, name: str) -> None:
    found, _ = accounts(database())
    try:
        found.revoke_token(tenant_name, name, system_clock())
    except AccountError as exc:
        raise click.ClickException(str(exc)) from None
    say(f"keystore: revoked token {name!r} of tenant {tenant_name!r}")


COMMANDS = (tenant, token)
