"""Load from separate processes on loopback: `wrk` (closed loop, maximum rate) and the
constant-rate generator `bench.rate` (open loop, latency at a fixed rate).

Every run returns a `Run`: requests per second, latency percentiles in microseconds and the
count of each HTTP status, so a scenario can check that it measured what it meant to (a
claim of a new key must answer 201, never 503 "database is locked").
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

LUA = Path(__file__).with_name("wrk.lua")


@dataclass
class Run:
    rps: float
    p50_us: float
    p90_us: float
    p99_us: float
    status: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    requests: int = 0

    def count(self, *codes: int) -> int:
        return sum(self.status.get(str(c), 0) for c in codes)

    @property
    def failures(self) -> int:
        """Server errors plus socket errors and timeouts: what no scenario may have."""
        bad = sum(n for code, n in self.status.items() if code.startswith("5"))
        return bad + sum(v for k, v in self.errors.items() if k != "status")


def ensure_wrk() -> str:
    """The wrk binary; installed with apt-get (Debian's package) when it is missing."""
    found = shutil.which("wrk")
    if found:
        return found
    print("bench: wrk is missing; installing Debian's package", file=sys.stderr, flush=True)
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, timeout=600)
    subprocess.run(["apt-get", "install", "-y", "-q", "wrk"], check=True, env=env, timeout=600)
    found = shutil.which("wrk")
    if not found:
        raise SystemExit("bench: wrk could not be installed")
    return found


def wrk(url: str, mode: str, token: str, prefix: str, *, seconds: float, connections: int,
        threads: int = 2, key_range: int = 1, timeout_s: int = 30,
        extra: tuple[str, ...] = ()) -> Run:
    """A closed-loop wrk run of one mode of bench/wrk.lua against `url` (`extra`: the
    script's further arguments, e.g. the ingest's signature)."""
    cmd = [ensure_wrk(), f"-t{threads}", f"-c{connections}", f"-d{max(1, round(seconds))}s",
           f"--timeout={timeout_s}s", "-s", str(LUA), url, "--", mode, token, prefix,
           str(key_range), *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + timeout_s + 30)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("BENCH_JSON ")), None)
    if out.returncode != 0 or line is None:
        raise RuntimeError(f"wrk {mode} failed ({out.returncode}): {out.stderr[-500:]}")
    data = json.loads(line[len("BENCH_JSON "):])
    lat = data["latency_us"]
    return Run(rps=data["requests"] / (data["duration_us"] / 1e6), p50_us=lat["p50"],
               p90_us=lat["p90"], p99_us=lat["p99"], status=data["status"],
               errors=data["errors"], requests=data["requests"])


def constant_rate(url: str, mode: str, token: str, prefix: str, *, rate: float,
                  seconds: float, connections: int = 16) -> Run:
    """An open-loop run at `rate` requests/s by `python -m bench.rate` in its own process."""
    cmd = [sys.executable, "-m", "bench.rate", "--url", url, "--mode", mode, "--token", token,
           "--prefix", prefix, "--rate", f"{rate:.1f}", "--seconds", str(seconds),
           "--connections", str(connections)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60,
                         cwd=Path(__file__).parent.parent)
    if out.returncode != 0:
        raise RuntimeError(f"bench.rate {mode} failed: {out.stderr[-800:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return Run(rps=data["rps"], p50_us=data["p50_us"], p90_us=data["p90_us"],
               p99_us=data["p99_us"], status=data["status"], errors=data["errors"],
               requests=data["requests"])
