"""The `keystore` command: serve, db, tenant and token, the records' jobs and the gateway's.

A new token is printed alone on stdout (so `TOKEN=$(keystore token create ...)` works);
everything meant for a person goes to stderr. Every command says which database it uses
(KEYSTORE_DATABASE_URL; a SQLite path made absolute, a password masked). The admin commands
refuse a database without the key store's schema (a relative SQLite path run from another
directory would otherwise get a fresh, empty store); `serve` and `db upgrade` create it.

One module per command group, each with its `COMMANDS`: records (reconcile, sweep, report),
accounts (tenant, token), db, sources (source, deliveries, redeliver), config (config,
secret-key), serve (serve, relay), issues (issue, channel), bulk (delivery bulk,
job) and connections (connection, settlement); `common` holds what they share and `params` the
command line's numbers.
"""
from __future__ import annotations

import click

from keystore_service import logs
from keystore_service.cli import (
    accounts,
    bulk,
    config,
    connections,
    db,
    issues,
    records,
    serve,
    sources,
)

__all__ = ["main"]


@click.group(help="Idempotency Key Store: exactly-once effects for at-least-once deliveries.")
@click.version_option(package_name="keystore-service", prog_name="keystore")
def main() -> None:
    logs.configure("INFO")  # one formatter: request input escaped, no exception messages


for _group in (serve, records, db, accounts, config, sources, issues, bulk, connections):
    for _command in _group.COMMANDS:
        main.add_command(_command)
for _command in bulk.DELIVERY_COMMANDS:  # `keystore delivery bulk`
    sources.delivery.add_command(_command)
