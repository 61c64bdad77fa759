"""What several parts of the harness share, and nothing that imports them back.

The suite's ingest scenario (scenarios.py) and the gateway's own run (gateway.py) sign their
deliveries the same way, and both take medians: those live here, so that no scenario module
imports another (gateway.py -> scenarios.py -> sweep.py -> scenarios.py was a cycle).
This module imports only the standard library and bench.rate, a leaf.
"""
from __future__ import annotations

import hashlib
import hmac
import statistics
from pathlib import Path
from typing import Callable

from .rate import PAYLOAD

ROOT = Path(__file__).resolve().parent.parent  # the repository
Progress = Callable[[str], None]  # where a run says what it is doing (stderr, with the time)

# The benchmark source's signing secret (generic provider, HMAC-SHA256 of the raw body).
SECRET = "bench-signing-secret-0123456789"
# One body for every event: the event id travels in a header, so the signature (over the
# raw body) is the same for all, and each delivery is still checked in full.
BODY = f'{{"type":"invoice.paid","payload":{PAYLOAD}}}'
SIGNATURE = "sha256=" + hmac.new(SECRET.encode(), BODY.encode(), hashlib.sha256).hexdigest()


def median(values: list[float]) -> float:
    """The median, 0.0 of nothing (a scenario that did not run)."""
    return statistics.median(values) if values else 0.0
