"""A separate process that runs one exactly-once operation whose body does its side effect and
then hangs, so that a test can SIGKILL it mid-body.

    python helper_child.py URL TOKEN SCOPE KEY SINK_URL
"""
from __future__ import annotations

import sys
import time

import requests
from keystore_client import KeyStore


def main() -> None:
    url, token, scope, key, effect_url = sys.argv[1:6]
    ks = KeyStore(url, token)

    @ks.exactly_once(scope, key=key, lease_seconds=2)
    def create_invoice() -> dict:
        r = requests.post(effect_url, json={"invoice": key}, timeout=10)
        r.raise_for_status()
        time.sleep(120)  # the effect happened; the process is killed before it can report
        return r.json()

    create_invoice()


if __name__ == "__main__":
    main()
