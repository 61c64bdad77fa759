"""The operators' /v1/connections and /v1/scopes/<scope>/settlement (issue 28). Parse, call
the gateway's Connections, render; nothing else lives here. A header's value is never in an
answer: connection_json is Connections.shown with its times spelt."""
from __future__ import annotations

from flask import Blueprint, g

from keystore_service.gateway.connections import Connections
from keystore_service.service.auth import require_operator
from keystore_service.storage.connections import Connection
from keystore_service.storage.settlements import ScopeSettlement
from keystore_service.web.api import connection_schemas as cs
from keystore_service.web.api import parsing
from keystore_service.web.api.render import respond, rfc3339
from keystore_service.web.context import keystore

v1 = Blueprint("connections_v1", __name__, url_prefix="/v1")


def _connections() -> Connections:
    require_operator(g.principal)
    return keystore().gateway.connections


@v1.post("/connections")
def create_connection():
    conns = _connections()
    made = conns.create(g.principal.tenant_id, parsing.body(cs.ConnectionCreate))
    return respond({"connection": connection_json(conns, made)}, 201)


@v1.get("/connections")
def list_connections():
    conns = _connections()
    return respond({"connections": [connection_json(conns, c)
                                    for c in conns.list(g.principal.tenant_id)]})


@v1.get("/connections/<name>")
def show_connection(name: str):
    conns = _connections()
    return respond({"connection": connection_json(conns, conns.get(g.principal.tenant_id,
                                                                   name))})


@v1.patch("/connections/<name>")
def change_connection(name: str):
    conns = _connections()
    conns.get(g.principal.tenant_id, name)  # 404 before the body is looked at
    changed = conns.change(g.principal.tenant_id, name, parsing.body(cs.ConnectionChange))
    return respond({"connection": connection_json(conns, changed)})


@v1.delete("/connections/<name>")
def delete_connection(name: str):
    conns = _connections()
    gone = conns.delete(g.principal.tenant_id, name)
    return respond({"connection": connection_json(conns, gone)})


@v1.get("/scopes/<scope>/settlement")
def show_settlement(scope: str):
    conns = _connections()
    return respond({"settlement": settlement_json(*conns.settlement(g.principal.tenant_id,
                                                                    scope))})


@v1.put("/scopes/<scope>/settlement")
def put_settlement(scope: str):
    conns = _connections()
    body = parsing.body(cs.SettlementPut)
    put = conns.settle_scope(g.principal.tenant_id, scope, body.connection, body.check,
                             body.on_absent)
    return respond({"settlement": settlement_json(*put)})


@v1.delete("/scopes/<scope>/settlement")
def delete_settlement(scope: str):
    conns = _connections()
    return respond({"settlement": settlement_json(*conns.unsettle_scope(
        g.principal.tenant_id, scope))})


def connection_json(conns: Connections, connection: Connection) -> dict:
    return {**conns.shown(connection), "created_at": rfc3339(connection.created_at),
            "updated_at": rfc3339(connection.updated_at)}


def settlement_json(settlement: ScopeSettlement, connection: Connection) -> dict:
    return {"scope": settlement.scope, "connection": connection.name,
            "check": settlement.check, "on_absent": settlement.on_absent,
            "created_at": rfc3339(settlement.created_at),
            "updated_at": rfc3339(settlement.updated_at)}
