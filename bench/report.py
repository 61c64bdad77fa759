"""Results out: the JSON file, the PNG charts, the targets, and the table in docs/benchmarks.md
(only the part between the `bench:begin` and `bench:end` markers is rewritten)."""
from __future__ import annotations

import json
import os
import platform
import re
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Optional

BACKENDS = ("sqlite", "postgres")
NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
SCENARIOS = ("claim_new", "claim_new_64", "replay", "cycle", "hot_keys", "lookup", "batch",
             "ingest")
# The figures of the run before issue 17 (group commit), for "no worse than before".
BEFORE = Path(__file__).resolve().parent / "results" / "2026-11-30.json"


def machine() -> dict:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text()
                .splitlines() if ln.startswith("model name")), platform.processor())
    mem = next(int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines()
               if ln.startswith("MemTotal"))

    def version(cmd: list[str]) -> str:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            return (out.stdout or out.stderr).splitlines()[0].strip()
        except (OSError, IndexError):
            return "?"
    pkgs = {p: metadata.version(p) for p in ("flask", "gunicorn", "sqlalchemy", "psycopg",
                                              "pydantic", "werkzeug")}
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gib": round(mem / 2**20, 1),
            "kernel": platform.release(), "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version, "postgres": version(["pg_config", "--version"]),
            "wrk": version(["wrk", "-v"]).split(" [")[0], "pgbench": version(["pgbench", "--version"]),
            "packages": pkgs, "load_average": os.getloadavg()}


def ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b else 0.0


def derive(results: dict) -> dict:
    """The ratios of every backend, and each target: met or by how much it is missed."""
    ratios, targets = {}, []
    for b in BACKENDS:
        r = results.get(b)
        if not r:
            continue
        c = r["closed"]
        noop, lookup = c["noop"]["rps"], c["lookup"]["rps"]
        ratios[b] = {s: {"vs_noop": ratio(c[s]["rps"], noop),
                         "vs_lookup": ratio(c[s]["rps"], lookup),
                         "vs_limit": ratio(c[s].get("keys_per_s", c[s]["rps"]), c[s]["limit"])
                         if "limit" in c[s] else None} for s in SCENARIOS if s in c}
        lat = c["_latency"]
        ratios[b]["p99_half_rate"] = ratio(lat["claim"]["p99_ms"], lat["noop"]["p99_ms"])
        g = r["growth"]
        sizes = [k for k in g if not k.startswith("_")]
        lo, hi = g[sizes[0]], g[sizes[-1]]
        ratios[b]["growth_claim_p50"] = ratio(hi["claim_new"]["p50_ms"], lo["claim_new"]["p50_ms"])
        ratios[b]["growth_lookup_p50"] = ratio(hi["lookup"]["p50_ms"], lo["lookup"]["p50_ms"])
        name = NAMES[b]
        locked = c["claim_new"]["status"].get("503", 0) + c["_locked_in_log"]
        # issue 17: the lookup (one round trip) is the reference
        targets.append(_t(f"{name}: claims of new keys / lookup",
                          ratios[b]["claim_new"]["vs_lookup"], ">=", 0.85))
        targets.append(_t(f"{name}: replays / lookup", ratios[b]["replay"]["vs_lookup"],
                          ">=", 0.95))
        targets.append(_t(f"{name}: claims/s with 64 connections / with 16",
                          ratio(c["claim_new_64"]["rps"], c["claim_new"]["rps"]), ">", 1.0))
        before = _before(b)
        if before:
            targets.append(_t(f"{name}: hot keys / no-op, vs {before['hot_keys']:.2f} before",
                              ratios[b]["hot_keys"]["vs_noop"], ">=",
                              round(before["hot_keys"] * 0.9, 3)))
            targets.append(_t(f"{name}: batch keys/s / DB limit, vs {before['batch']:.2f} "
                              "before", ratios[b]["batch"]["vs_limit"], ">=",
                              round(before["batch"] * 0.9, 3)))
        if b == "sqlite":
            targets.append(_t(f"{name}: 'database is locked' failures", locked, "<=", 0))
        targets.append(_t(f"{name}: claim p99 / no-op p99 at half the max rate",
                          ratios[b]["p99_half_rate"], "<=", 2.0))
        targets.append(_t(f"{name}: batch keys/s / raw insert keys/s",
                          ratios[b]["batch"]["vs_limit"], ">=", 0.5))
        targets.append(_t(f"{name}: claim p50 {sizes[-1]} rows / {sizes[0]} rows",
                          ratios[b]["growth_claim_p50"], "<=", 1.2))
        targets.append(_t(f"{name}: lookup p50 {sizes[-1]} rows / {sizes[0]} rows",
                          ratios[b]["growth_lookup_p50"], "<=", 1.2))
        sw = g.get("_sweep", {})
        if sw.get("ran"):
            targets.append(_t(f"{name}: claim p99 during the sweep / before",
                              ratio(sw["p99_during_ms"], sw["p99_before_ms"]), "<=", 2.0))
        else:
            targets.append({"target": f"{name}: claim p99 during the sweep / before",
                            "value": None, "limit": 2.0, "met": None,
                            "note": sw.get("reason", "not run")})
        targets.append(_t(f"{name}: max RSS per worker (MiB)", round(r["rss_mb_max"], 1),
                          "<", 120))
    return {"ratios": ratios, "targets": targets}


def _before(backend: str) -> dict:
    """Hot keys ÷ no-op and batch ÷ DB limit of the run before group commit (the targets
    allow 10% of run-to-run noise below them)."""
    try:
        ratios = json.loads(BEFORE.read_text())["derived"]["ratios"][backend]
        return {"hot_keys": ratios["hot_keys"]["vs_noop"], "batch": ratios["batch"]["vs_limit"]}
    except (OSError, KeyError, ValueError):
        return {}


def _t(name: str, value: float, op: str, limit: float) -> dict:
    met = {">=": value >= limit, "<=": value <= limit, "<": value < limit,
           ">": value > limit}[op]
    return {"target": f"{name} {op} {limit:g}", "value": value, "limit": limit, "met": met}


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display), or None, saying so,
    where matplotlib (the bench extra) is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing (the bench extra): no chart")
        return None
    return plt


@contextmanager
def figure(plt, path: Path, **subplots) -> Iterator[tuple]:
    """(figure, axes) of `plt.subplots(**subplots)`; at the end of the block the figure is
    laid out, saved to `path` (its folder made) at the figure's dpi, and closed."""
    fig, axes = plt.subplots(**subplots)
    try:
        yield fig, axes
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    finally:
        plt.close(fig)
    print(f"wrote {path}")


def todays(results: Path, bench: str, day: Optional[str] = None) -> dict:
    """The results of `bench` run today (or on `day`), by backend: the files
    <results>/<bench>-<backend>-<day>.json that exist."""
    day = day or time.strftime("%Y-%m-%d")
    return {b: json.loads(f.read_text()) for b in BACKENDS
            if (f := results / f"{bench}-{b}-{day}.json").exists()}


def charts(results: dict, derived: dict, outdir: Path, stem: str) -> list[Path]:
    plt = pyplot()
    if plt is None:
        raise ImportError("matplotlib (the bench extra) draws the charts")
    backends = [b for b in BACKENDS if b in derived["ratios"]]
    paths = [outdir / f"{stem}-ratios.png", outdir / f"{stem}-growth.png"]
    with figure(plt, paths[0], ncols=2, figsize=(11, 4), dpi=90) as (fig, axes):
        for ax, key, title in ((axes[0], "vs_lookup", "requests/s ÷ lookup (one round trip)"),
                               (axes[1], "vs_limit", "rate ÷ database limit (no HTTP)")):
            names = [s for s in SCENARIOS if any(derived["ratios"][b].get(s, {}).get(key)
                                                 is not None
                                                 for b in backends)
                     and not (key == "vs_noop" and s == "batch")]  # keys/s: vs raw inserts
            names = [s for s in names if s != "claim_new_64"]
            width = 0.8 / max(1, len(backends))
            for i, b in enumerate(backends):
                vals = [derived["ratios"][b].get(s, {}).get(key) or 0 for s in names]
                ax.bar([x + i * width for x in range(len(names))], vals, width,
                       label=NAMES[b])
            ax.set_xticks([x + width * (len(backends) - 1) / 2 for x in range(len(names))],
                          names, rotation=20)
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_title(title)
            ax.legend()
    with figure(plt, paths[1], figsize=(7, 4), dpi=90) as (fig, ax):
        for b in backends:
            g = results[b]["growth"]
            sizes = [k for k in g if not k.startswith("_")]
            for s, style in (("claim_new", "-o"), ("lookup", "--s")):
                ax.plot([int(x) for x in sizes], [g[x][s]["p50_ms"] for x in sizes], style,
                        label=f"{NAMES[b]} {s}")
        ax.set_xscale("log")
        ax.set_xlabel("rows in the table")
        ax.set_ylabel("p50 latency (ms), 4 connections")
        ax.set_title("latency vs table size")
        ax.legend()
    return paths


def write_json(doc: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def update_docs(doc_path: Path, table: str) -> None:
    text = doc_path.read_text() if doc_path.exists() else "<!-- bench:begin -->\n<!-- bench:end -->\n"
    new = re.sub(r"<!-- bench:begin -->.*<!-- bench:end -->",
                 lambda _: f"<!-- bench:begin -->\n{table}\n<!-- bench:end -->", text,
                 flags=re.S)
    doc_path.write_text(new)
