"""The configuration's commands: `keystore config` (the effective settings and where each came
from, secrets masked) and `keystore secret-key` (a new KEYSTORE_SECRET_KEY)."""
from __future__ import annotations

import json
import sys

import click

from keystore_service import config_report
from keystore_service.service.sealing import Sealer


@click.command("config", help="Print the effective settings and where each came from "
                              "(secrets masked); exit 1 if any is invalid.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
def config(as_json: bool) -> None:
    items = config_report.report()
    click.echo(json.dumps(config_report.as_json(items), indent=2) if as_json
               else config_report.as_table(items))
    if any(item.error for item in items):
        sys.exit(1)


@click.command("secret-key", help="Print a new key for KEYSTORE_SECRET_KEY (Fernet).")
def secret_key() -> None:
    click.echo(Sealer.new_key())


COMMANDS = (config, secret_key)
