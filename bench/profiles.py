"""How long and how big: the full run and the smoke run that CI uses so the harness cannot rot."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    seconds: float  # one closed-loop wrk run
    rounds: int  # runs behind every figure (its median); scenarios interleave within a round
    rate_seconds: float  # one constant-rate run
    base_rows: int  # loaded rows that replays and lookups pick from
    sizes: tuple[int, ...]  # table sizes of the growth scenario
    sweep_rows: int  # expired rows the sweep purges while claims run
    connections: int = 16  # wrk -c16: the prototype figures used it
    hot_connections: int = 64  # "many claimers" of 100 hot keys
    batch_connections: int = 8  # as many as pgbench's clients for the raw insert rate
    growth_connections: int = 4  # latency, not throughput: a light closed loop
    workers: int = 4
    threads: int = 16  # the service's default (keystore_service.server.THREADS)
    instance_rounds: int = 3  # rounds of the 1-and-2-instances comparison (restarts each)


FULL = Profile("full", seconds=8, rounds=3, rate_seconds=10, base_rows=10_000,
               sizes=(10_000, 1_000_000, 5_000_000), sweep_rows=1_000_000)
SMOKE = Profile("smoke", seconds=1, rounds=3, rate_seconds=2, base_rows=1_000,
                sizes=(1_000, 5_000), sweep_rows=2_000, instance_rounds=1,
                # CI checks that the harness works, not how fast: fewer concurrent batches
                # keep SQLite's 5 s busy timeout out of reach on a loaded CI machine
                hot_connections=16, batch_connections=2)
PROFILES = {p.name: p for p in (FULL, SMOKE)}
