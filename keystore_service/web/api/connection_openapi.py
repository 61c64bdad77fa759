"""/openapi.json's entries for /v1/connections and /v1/scopes/<scope>/settlement
(openapi.py adds them), from the models of connection_schemas.py."""
from __future__ import annotations

from collections.abc import Callable

from keystore_service.domain.names import NAME_PATTERN
from keystore_service.domain.records import HOOK_SCOPE_PREFIX
from keystore_service.gateway import connections as rules
from keystore_service.web.api import connection_schemas as cs
from keystore_service.web.api import schemas

# A scope of a claim (field_types.Scope), never a webhook source's ("hook:...").
SCOPE_PATTERN = f"^(?!{HOOK_SCOPE_PREFIX})[A-Za-z0-9_.:\\-]{{1,128}}$"


def paths(json_: Callable, errors_: Callable, body_of: Callable) -> dict:
    op = errors_("400", "401", "403", "429", "503")
    name = [{"name": "name", "in": "path", "required": True,
             "schema": {"type": "string", "pattern": NAME_PATTERN}}]
    scope = [{"name": "scope", "in": "path", "required": True,
              "schema": {"type": "string", "pattern": SCOPE_PATTERN}}]
    missing = {"404": json_(schemas.ErrorResponse, "no such connection")}
    one = {"200": json_(cs.ConnectionResponse, "the connection (never a header's value)"),
           **op, **missing}
    settled = {"200": json_(cs.SettlementResponse, "the scope's settlement"), **op,
               "404": json_(schemas.ErrorResponse, "the scope has no settlement")}
    return {
        "/v1/connections": {
            "post": {"summary": "Create a connection: a downstream API that sends go to "
                                "(operator)", "operationId": "createConnection",
                     "requestBody": body_of(cs.ConnectionCreate),
                     "responses": {"201": json_(cs.ConnectionResponse, "created"), **op,
                                   **errors_("413")}},
            "get": {"summary": "The tenant's connections (operator)",
                    "operationId": "listConnections",
                    "responses": {"200": json_(cs.ConnectionsResponse, "ok"), **op}}},
        "/v1/connections/{name}": {
            "get": {"summary": "One connection", "operationId": "showConnection",
                    "parameters": name, "responses": one},
            "patch": {"summary": "Change a connection (headers given replace them all)",
                      "operationId": "changeConnection", "parameters": name,
                      "requestBody": body_of(cs.ConnectionChange),
                      "responses": {**one, **errors_("413")}},
            "delete": {"summary": "Delete a connection (and the scopes' settlements on it)",
                       "operationId": "deleteConnection", "parameters": name,
                       "responses": {**one, "409": json_(
                           schemas.ErrorResponse, "in_progress: it has sends queued, being "
                           "sent or being checked")}}},
        "/v1/scopes/{scope}/settlement": {
            "get": {"summary": "The scope's settlement: the check its claims' unknown "
                               "outcomes are settled by (operator)",
                    "operationId": "showSettlement", "parameters": scope,
                    "responses": settled},
            "put": {"summary": "Give the scope a settlement, or replace it (operator)",
                    "operationId": "putSettlement", "parameters": scope,
                    "requestBody": body_of(cs.SettlementPut),
                    "responses": {**settled, **errors_("413")}},
            "delete": {"summary": "Remove the scope's settlement", "operationId":
                       "deleteSettlement", "parameters": scope, "responses": settled}},
    }
