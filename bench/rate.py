"""A constant-rate (open-loop) HTTP load generator, run as its own process:

    python -m bench.rate --url http://127.0.0.1:P --mode claim --token T --prefix X \
        --rate 400 --seconds 10 --connections 16

Debian's wrk has no `-R` (that is wrk2), and wrk's Lua `delay()` only pauses after a
response, so a slow response delays the next request and the slow moment is sampled less:
"coordinated omission". Here, as in wrk2, request i is due at `t0 + i / rate` on connection
`i mod C`, and its latency is measured from that due time, not from when it could be sent:
a stall shows up in the latency of every request that was due during it. One line of JSON
goes to stdout: achieved rate, percentiles in microseconds, counts per HTTP status.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from urllib.parse import urlsplit

PAYLOAD = ('{"order":"ORD-2026-000042","amount":1250,"currency":"EUR",'
           '"customer":"cus_9f8e7d6c5b","note":"bench"}')  # the same bytes as bench/wrk.lua


def request_bytes(mode: str, host: str, token: str, key: str) -> bytes:
    """The same request as bench/wrk.lua sends in `mode` (noop or claim)."""
    body = (f'{{"scope":"bench","key":"{key}","lease_seconds":300,"payload":{PAYLOAD}}}'
            ).encode()
    path = "/bench/noop" if mode == "noop" else "/v1/claim"
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


async def _read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    if length:
        await reader.readexactly(length)
    return status


async def _connection(n: int, a: argparse.Namespace, t0: float, total: int,
                      latencies: list[float], status: Counter, errors: Counter) -> None:
    url = urlsplit(a.url)
    reader = writer = None
    for i in range(n, total, a.connections):
        due = t0 + i / a.rate
        pause = due - time.perf_counter()
        if pause > 0:
            await asyncio.sleep(pause)
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(url.hostname, url.port)
            writer.write(request_bytes(a.mode, url.netloc, a.token, f"{a.prefix}-{i}"))
            code = await asyncio.wait_for(_read_response(reader), 30)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
            errors["timeout" if isinstance(exc, asyncio.TimeoutError) else "read"] += 1
            if writer is not None:
                writer.close()
            reader = writer = None
            continue
        latencies.append(time.perf_counter() - due)
        status[str(code)] += 1
    if writer is not None:
        writer.close()


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p / 100))]


async def main_async(a: argparse.Namespace) -> dict:
    total = max(1, int(a.rate * a.seconds))
    latencies: list[float] = []
    status: Counter = Counter()
    errors: Counter = Counter()
    t0 = time.perf_counter() + 0.2
    await asyncio.gather(*(_connection(n, a, t0, total, latencies, status, errors)
                           for n in range(a.connections)))
    elapsed = time.perf_counter() - t0
    latencies.sort()
    return {"rps": len(latencies) / elapsed, "requests": len(latencies),
            "p50_us": percentile(latencies, 50) * 1e6, "p90_us": percentile(latencies, 90) * 1e6,
            "p99_us": percentile(latencies, 99) * 1e6, "max_us": (latencies or [0])[-1] * 1e6,
            "status": dict(status), "errors": dict(errors)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True)
    p.add_argument("--mode", choices=["noop", "claim"], required=True)
    p.add_argument("--token", default="-")
    p.add_argument("--prefix", required=True)
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--connections", type=int, default=16)
    print(json.dumps(asyncio.run(main_async(p.parse_args()))))


if __name__ == "__main__":
    main()
