"""docs/polling.md works as written: its shell recipe runs unchanged, with tiny stand-ins for
`fetch-orders` (prints a window of orders) and `create-invoice` (counts the invoices it is
asked for), and its Python recipe runs against the real service with the effect sink as the
billing API. Each part works in a tenant of its own: the recipes' scope is `orders`."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import new_token

from .conftest import REPO
from .support import code_blocks

PAGE = REPO / "docs" / "polling.md"
FETCH_ORDERS = '#!/bin/sh\ncat "$ORDERS_FILE"\n'
CREATE_INVOICE = '#!/bin/sh\ncat >> "$INVOICES_FILE"\n'  # the order line, one per invoice


def test_the_pages_blocks_parse():
    for block in code_blocks(PAGE, "bash"):
        subprocess.run(["bash", "-n"], input=block, text=True, check=True, timeout=30)
    for block in code_blocks(PAGE, "python"):
        ast.parse(block)


def test_the_shell_recipe_runs_as_written(service, tmp_path):
    recipe, = [b for b in code_blocks(PAGE, "bash") if "keystore-client each" in b]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("fetch-orders", FETCH_ORDERS), ("create-invoice", CREATE_INVOICE)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    orders, invoices = tmp_path / "orders.jsonl", tmp_path / "invoices.jsonl"
    env = {"PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin",
           "KEYSTORE_URL": service.url,
           "KEYSTORE_TOKEN": new_token(service.database_url, "polling-shell"),
           "ORDERS_FILE": str(orders), "INVOICES_FILE": str(invoices), "HOME": str(tmp_path),
           "LANG": os.environ.get("LANG", "C.UTF-8")}

    def poll(*window) -> list:
        orders.write_text("".join(json.dumps(o) + "\n" for o in window))
        r = subprocess.run(["bash", "-c", recipe], env=env, capture_output=True, text=True,
                           timeout=90)
        assert r.returncode == 0, r.stderr
        return [(o["id"], o["total"]) for o in map(json.loads, invoices.read_text()
                                                    .splitlines())]

    a = {"id": 1041, "updated_at": "2026-11-30T10:02:11Z", "total": 120}
    b = {"id": 1042, "updated_at": "2026-11-30T10:03:00Z", "total": 80}
    c = {"id": 1043, "updated_at": "2026-11-30T10:06:40+01:00", "total": 15}
    assert poll(a, b) == [(1041, 120), (1042, 80)]
    assert poll(a, b, c) == [(1041, 120), (1042, 80), (1043, 15)]  # the window overlaps
    b2 = {**b, "updated_at": "2026-11-30T10:07:30Z", "total": 95}  # changed since
    assert poll(b, c, b2) == [(1041, 120), (1042, 80), (1043, 15), (1042, 95)]


def test_the_python_recipe_runs(service, sink, scope, monkeypatch):
    monkeypatch.setenv("KEYSTORE_URL", service.url)
    monkeypatch.setenv("KEYSTORE_TOKEN", new_token(service.database_url, "polling-python"))
    setup, recipe = code_blocks(PAGE, "python")
    ns: dict = {}
    exec(compile(setup, "polling.md#setup", "exec"), ns)
    ns["BILLING_URL"] = f"{sink.url}/{scope}"  # the billing API is the effect sink here
    exec(compile(recipe, "polling.md#poll", "exec"), ns)
    poll, invoices = ns["poll"], f"{scope}/invoices"

    a = {"id": 7, "updated_at": "2026-11-30T10:00:00Z", "total": 10}
    b = {"id": 8, "updated_at": "2026-11-30T11:00:00+01:00", "total": 20}
    sink.fail_next(invoices, 1, status=503)  # the billing API is busy for the first one
    assert poll([a, b]) == {"invoiced": 1, "skipped": 0, "retry_later": 1, "refused": 0}
    assert poll([a, b]) == {"invoiced": 1, "skipped": 1, "retry_later": 0, "refused": 0}
    assert poll([a, b]) == {"invoiced": 0, "skipped": 2, "retry_later": 0, "refused": 0}
    a2 = {**a, "updated_at": "2026-11-30T10:05:00Z", "total": 12}
    assert poll([a, b, a2]) == {"invoiced": 1, "skipped": 2, "retry_later": 0, "refused": 0}
    assert [i["body"]["total"] for i in sink.items(invoices)] == [20, 10, 12]
    assert [i["idempotency_key"] for i in sink.items(invoices)] == [
        "order-8@2026-11-30T10:00:00Z", "order-7@2026-11-30T10:00:00Z",
        "order-7@2026-11-30T10:05:00Z"]
