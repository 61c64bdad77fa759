"""What the send tests share (issue 28): a connection to a downstream API, a send through it,
and a table's rows as the database holds them."""
from __future__ import annotations

from sqlalchemy import select

SECRET = "sk_live_Zq81nUfVb0"  # the connection's Authorization, never to appear anywhere


def connection(gw, base_url, **over):
    body = {"name": "billing", "base_url": base_url,
            "headers": {"Authorization": f"Bearer {SECRET}"}, "timeout_seconds": 2,
            "idempotency_header": None, **over}
    status, made, _ = gw.post("/v1/connections", body)
    assert status == 201, made
    return made["connection"]


def send(gw, key="k1", token=..., wait=10, **over):
    body = {"scope": "billing", "key": key, "connection": "billing",
            "request": {"method": "POST", "path": "/invoices",
                        "json": {"amount": 100, "reference": f"billing:{key}"}},
            "resource_id_pointer": "/id", "wait_seconds": wait, **over}
    return gw.post("/v1/send", body, token=token)


def rows(gw_app, table):
    with gw_app.extensions["keystore"].database.engine.connect() as conn:
        return [r._asdict() for r in conn.execute(select(table).order_by(table.c.id))]
