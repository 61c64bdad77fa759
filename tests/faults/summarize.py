"""Print the figures of the last fault-suite run (test-artifacts/faults/*.json) as the
markdown table docs/reliability.md keeps:  python -m tests.faults.summarize"""
from __future__ import annotations

import json

from tests.faults.harness import ARTIFACTS

ROWS = [
    ("worker_kills", "100 SIGKILLs of gunicorn workers mid-request (PostgreSQL, 4 workers)"),
    ("database_restarts", "3 abrupt PostgreSQL stops (-m immediate) under load, 2 instances"),
    ("paused_holders", "20 lease holders SIGSTOPped past their lease, then SIGCONTed"),
    ("same_key_races_sqlite", "1,000 races of 16 claimers, SQLite, 4 workers on one file"),
    ("same_key_races_postgres", "1,000 races of 16 claimers, PostgreSQL, 2 instances"),
]


def cell(figures: dict, name: str, default: str = "-") -> str:
    value = figures.get(name)
    return default if value is None else str(value)


def main() -> None:
    print("| scenario | operations | effects | duplicate effects | acknowledged completions "
          "lost | unresolved (surfaced as) | recovery after the fault |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, title in ROWS:
        path = ARTIFACTS / f"{name}.json"
        if not path.exists():
            print(f"| {title} | not run | | | | | |")
            continue
        f = json.loads(path.read_text())
        operations = f.get("operations") or f.get("claims") or f.get("trials")
        surfaced = ", ".join(f"{n} {k}" for k, n in (f.get("unresolved_surfaced_as") or {})
                             .items()) or "0"
        if "recovery_seconds_median" in f:
            recovery = f"median {f['recovery_seconds_median']} s, max {f['recovery_seconds_max']} s"
        elif "recovery_seconds" in f:
            recovery = ", ".join(f"{r} s" for r in f["recovery_seconds"])
        else:
            recovery = "-"
        print(f"| {title} | {operations} | {cell(f, 'effects')} | "
              f"{cell(f, 'duplicate_effects')} | {cell(f, 'acknowledged_completions_lost', '0')}"
              f" | {f.get('unresolved', 0)} ({surfaced}) | {recovery} |")


if __name__ == "__main__":
    main()
