"""Connections and scopes' settlements (issue 28): `keystore connection
create|list|show|update|delete` and `keystore settlement set|show|delete` (docs/cli.md,
docs/api.md "Connections"). A header's value is read from stdin, one line per `--header`
in their order, never from the command line (where `ps` and the shell's history would keep
it), and never printed. Like the other admin commands they name their database on stderr
and refuse one without the schema."""
from __future__ import annotations

import json
from typing import Any

import click

from keystore_service.cli.common import TENANT, keystore, run, say, tenant, validated
from keystore_service.domain.sends import OnAbsent
from keystore_service.web.api import connection_schemas as cs
from keystore_service.web.api.connection_api import connection_json, settlement_json


@click.group("connection", help="Downstream APIs that POST /v1/send writes to, once per key.")
def connection() -> None:
    pass


def _options(create: bool):
    """The options create and update share (update: each given one changes)."""
    def add(fn):
        for option in reversed([
            click.option("--base-url", required=create, default=None,
                         help="http(s)://host[:port][/path]: a send's path is appended."),
            click.option("--header", "headers", multiple=True, metavar="NAME",
                         help="A header sent with every request (repeat); its value is read "
                              "from stdin, one line per --header in order. On update, the "
                              "given headers replace them all."),
            click.option("--idempotency-header", default=None,
                         help="The header the API dedupes on (e.g. Idempotency-Key)."),
            click.option("--timeout", "timeout_seconds", type=int, default=None,
                         help="Seconds per request, 1-60 (default 10)."),
            click.option("--retry-window", "retry_window_seconds", type=int, default=None,
                         help="Seconds a send is retried with its key (default 86400)."),
            click.option("--max-in-flight", type=int, default=None,
                         help="Requests at once, 1-256 (default 4)."),
            click.option("--per-second", type=int, default=None, help="A rate: per second."),
            click.option("--per-minute", type=int, default=None, help="A rate: per minute."),
            click.option("--check-file", type=click.File("r"), default=None,
                         help="A JSON file holding the connection's check."),
        ]):
            fn = option(fn)
        return fn
    return add


def _body(options: dict[str, Any]) -> dict[str, Any]:
    """The API's body of the options given (None: not given)."""
    body: dict[str, Any] = {k: options[k] for k in (
        "base_url", "idempotency_header", "timeout_seconds", "retry_window_seconds",
        "max_in_flight") if options.get(k) is not None}
    if options.get("headers"):
        stdin = click.get_text_stream("stdin")
        body["headers"] = {name: stdin.readline().rstrip("\r\n")
                           for name in options["headers"]}
    if options.get("per_second") is not None and options.get("per_minute") is not None:
        raise click.UsageError("give --per-second or --per-minute, not both")
    for unit in ("per_second", "per_minute"):
        if options.get(unit) is not None:
            body["rate"] = {unit: options[unit]}
    if options.get("check_file") is not None:
        body["check"] = _json_file(options["check_file"])
    return body


def _json_file(file: Any) -> Any:
    try:
        return json.load(file)
    except ValueError as exc:
        raise click.BadParameter(f"{file.name} is not JSON: {exc}") from None


def _echo(conns: Any, made: Any) -> None:
    click.echo(json.dumps(connection_json(conns, made)))


@connection.command("create", help="Create a connection; prints it as JSON (header names only).")
@TENANT
@click.argument("name")
@_options(create=True)
def connection_create(tenant_name: str, name: str, **options: Any) -> None:
    ks = keystore()
    model = validated(cs.ConnectionCreate, {"name": name, **_body(options)})
    conns = ks.gateway.connections
    _echo(conns, run(lambda: conns.create(tenant(ks, tenant_name), model)))
    say(f"keystore: created connection {name!r} for tenant {tenant_name!r}")


@connection.command("list", help="The tenant's connections (JSON lines; header names only).")
@TENANT
def connection_list(tenant_name: str) -> None:
    ks = keystore()
    conns = ks.gateway.connections
    for found in conns.list(tenant(ks, tenant_name)):
        _echo(conns, found)


@connection.command("show", help="One connection as JSON (header names only).")
@TENANT
@click.argument("name")
def connection_show(tenant_name: str, name: str) -> None:
    ks = keystore()
    conns = ks.gateway.connections
    _echo(conns, run(lambda: conns.get(tenant(ks, tenant_name), name)))


@connection.command("update", help="Change what is given; prints the connection as JSON.")
@TENANT
@click.argument("name")
@_options(create=False)
@click.option("--no-idempotency-header", is_flag=True, help="The API dedupes on nothing.")
@click.option("--no-rate", is_flag=True, help="Drop the rate.")
@click.option("--no-check", is_flag=True, help="Drop the check.")
def connection_update(tenant_name: str, name: str, no_idempotency_header: bool,
                      no_rate: bool, no_check: bool, **options: Any) -> None:
    ks = keystore()
    conns = ks.gateway.connections
    tenant_id = tenant(ks, tenant_name)
    run(lambda: conns.get(tenant_id, name))  # unknown: said before stdin is read
    body = _body(options)
    for flag, field in ((no_idempotency_header, "idempotency_header"), (no_rate, "rate"),
                        (no_check, "check")):
        if flag:
            if field in body:
                raise click.UsageError(f"--no-{field.replace('_', '-')} and a new value")
            body[field] = None
    model = validated(cs.ConnectionChange, body)
    _echo(conns, run(lambda: conns.change(tenant_id, name, model)))
    say(f"keystore: updated connection {name!r}")


@connection.command("delete", help="Delete a connection (refused while sends are in flight).")
@TENANT
@click.argument("name")
def connection_delete(tenant_name: str, name: str) -> None:
    ks = keystore()
    run(lambda: ks.gateway.connections.delete(tenant(ks, tenant_name), name))
    say(f"keystore: deleted connection {name!r} (and the scopes' settlements on it)")


@click.group("settlement", help="A scope's check: its claims' unknown outcomes settled by "
                                "asking the destination.")
def settlement() -> None:
    pass


@settlement.command("set", help="Give a scope a settlement, or replace it; prints it as JSON.")
@TENANT
@click.argument("scope")
@click.option("--connection", "connection_name", required=True)
@click.option("--check-file", type=click.File("r"), required=True,
              help="A JSON file holding the check.")
@click.option("--on-absent", type=click.Choice(tuple(o.value for o in OnAbsent)),
              required=True, help="release: the claim is released; review: a person decides.")
def settlement_set(tenant_name: str, scope: str, connection_name: str, check_file: Any,
                   on_absent: str) -> None:
    ks = keystore()
    model = validated(cs.SettlementPut, {"connection": connection_name, "on_absent": on_absent,
                                         "check": _json_file(check_file)})
    put = run(lambda: ks.gateway.connections.settle_scope(
        tenant(ks, tenant_name), scope, model.connection, model.check, model.on_absent))
    click.echo(json.dumps(settlement_json(*put)))
    say(f"keystore: scope {scope!r} is settled by connection {connection_name!r}")


@settlement.command("show", help="A scope's settlement as JSON.")
@TENANT
@click.argument("scope")
def settlement_show(tenant_name: str, scope: str) -> None:
    ks = keystore()
    found = run(lambda: ks.gateway.connections.settlement(tenant(ks, tenant_name), scope))
    click.echo(json.dumps(settlement_json(*found)))


@settlement.command("delete", help="Remove a scope's settlement.")
@TENANT
@click.argument("scope")
def settlement_delete(tenant_name: str, scope: str) -> None:
    ks = keystore()
    run(lambda: ks.gateway.connections.unsettle_scope(tenant(ks, tenant_name), scope))
    say(f"keystore: scope {scope!r} has no settlement now")


COMMANDS = [connection, settlement]
