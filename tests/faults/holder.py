"""A lease holder in a process of its own, so that the harness can SIGSTOP it for real.

    python -m tests.faults.holder URL TOKEN KEY ON_STALE SINK PAUSE

It claims KEY (lease 2 s), then at PAUSE (after_claim | after_effect) prints PAUSED and
waits for a line on stdin; the harness stops it there with SIGSTOP, lets the lease run out
and a competitor act, sends SIGCONT and the line. Then it goes on as if nothing happened:
the effect (with its attempt number as the fencing token) and the completion. It prints
one JSON line: what the sink and the key store answered.
"""
from __future__ import annotations

import json
import sys

import requests
from keystore_client import KeyStore, KeyStoreError, RetryPolicy


def pause(where: str, at: str) -> None:
    if where == at:
        print("PAUSED", flush=True)
        sys.stdin.readline()


def main(url: str, token: str, key: str, on_stale: str, sink: str, where: str) -> None:
    ks = KeyStore(url, token, retry=RetryPolicy(tries=3, budget=5))
    claimed = ks.claim("invoice", key, payload={"key": key}, lease_seconds=2, on_stale=on_stale)
    out = {"attempt": claimed.attempt}
    pause(where, "after_claim")
    effect = requests.post(f"{sink}/effects/{key}", json={"attempt": claimed.attempt}, timeout=10)
    out["effect"] = effect.status_code
    pause(where, "after_effect")
    try:
        ks.complete("invoice", key, claimed.lease_token,
                    result={"resource_id": f"holder-{claimed.attempt}"})
        out["complete"] = "ok"
    except KeyStoreError as exc:
        out["complete"] = getattr(exc, "code", type(exc).__name__)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:7])
