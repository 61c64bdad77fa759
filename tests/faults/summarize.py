"""Print the figures of the last fault-suite run (test-artifacts/faults/*.json) as the
markdown tables docs/reliability.md keeps:  python -m tests.faults.summarize"""
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


GATEWAY_ROWS = [
    ("simulated_provider_sqlite", "Simulated provider, workflow failing, SQLite"),
    ("simulated_provider_postgres", "Simulated provider, workflow failing, PostgreSQL"),
    ("gateway_kills_sqlite", "Relay and worker SIGKILLs under load, SQLite"),
    ("gateway_kills_postgres", "Relay and worker SIGKILLs under load, PostgreSQL"),
    ("gateway_database_restarts", "3 abrupt PostgreSQL stops under load, 2 relays"),
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


def faults(f: dict) -> str:
    """What was done to the run, from its figures."""
    if "relay_kills" in f:
        return (f"{f['relay_kills']} relay SIGKILLs ({f['relay_kills_mid_forward']} "
                f"mid-forward), {f['worker_kills']} worker SIGKILLs "
                f"({f['worker_kills_mid_forward']} mid-forward)")
    if "database_restarts" in f:
        down = ", ".join(f"{s}" for s in f["database_down_seconds"])
        return f"{f['database_restarts']} stops (-m immediate), down {down} s"
    if "sink_phases" in f:
        return "workflow " + ", ".join(f["sink_phases"])
    return "-"


def gateway() -> None:
    print("| scenario | events | provider sends (resends) | acknowledged | faults | forwards "
          "| repeats (cause) | forwards not allowed | acknowledged lost | double effects "
          "| drained after |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, title in GATEWAY_ROWS:
        path = ARTIFACTS / f"{name}.json"
        if not path.exists():
            print(f"| {title} | not run | | | | | | | | | |")
            continue
        f = json.loads(path.read_text())
        causes = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in
                           f["repeats_by_cause"].items()) or "-"
        print(f"| {title} | {f['events']} | {f['provider_sends']} ({f['provider_resends']}) "
              f"| {f['acknowledged']} | {faults(f)} | {f['forwards']} | {f['repeats']} "
              f"({causes}) | {f['forwards_not_allowed']} | {f['acknowledged_lost']} "
              f"| {f['double_effects']} | {f['drain_seconds']} s |")


if __name__ == "__main__":
    main()
    print()
    gateway()
