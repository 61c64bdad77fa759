"""What the clients' tests share: the `keystore-client` command and the lines a run
appended, a page's code blocks, and waiting (by polling, never a fixed sleep) until a lease
has run out by the server's clock."""
from __future__ import annotations

import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

CLI = str(Path(sys.executable).with_name("keystore-client"))


def lines(path: Path) -> list:
    return path.read_text().splitlines() if path.exists() else []


def code_blocks(page, language: str) -> list:
    return re.findall(rf"```{language}\n(.*?)```", page.read_text(), flags=re.S)


def wait_until_lease_passed(ks, scope, key, timeout=10.0):
    """Poll (no fixed sleep) until the record's lease is in the past by the server's clock."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = ks.lookup(scope, key)
        if r.lease_expires_at and r.lease_expires_at < datetime.now(UTC):
            time.sleep(0.05)  # one poll interval past the instant, for clock granularity
            return
        time.sleep(0.05)
    raise AssertionError("the lease did not run out")
