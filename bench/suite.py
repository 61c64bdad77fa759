"""`python -m bench [suite] [--smoke] [--backend sqlite|postgres] [--out DIR] [--no-docs]`.

The key store's scenarios on both backends (bench/scenarios.py), the default of `python -m
bench` and what `bench/run` runs. The full run writes bench/results/<date>.json, the charts under docs/img/ and the table in
docs/benchmarks.md. `--smoke` (what CI runs) is a few seconds per scenario on small tables,
writes into a temporary directory unless --out is given, and fails (exit 1) if any request
failed or answered an unexpected status: the harness cannot rot unnoticed.
"""
from __future__ import annotations

import argparse
import datetime as dt
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import loadgen, report, scenarios, tables
from .common import ROOT
from .profiles import PROFILES


def say(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench [suite]",
                                description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="seconds per scenario, small tables")
    p.add_argument("--backend", action="append", choices=report.BACKENDS,
                   help="only this backend (repeatable); default both")
    p.add_argument("--out", type=Path, help="where the JSON and charts go")
    p.add_argument("--no-docs", action="store_true", help="leave docs/benchmarks.md alone")
    a = p.parse_args(argv)
    profile = PROFILES["smoke" if a.smoke else "full"]
    loadgen.ensure_wrk()
    started, date = time.monotonic(), dt.datetime.now(dt.UTC)
    workdir = Path(tempfile.mkdtemp(prefix="keystore-bench-"))
    write_docs = not (a.smoke or a.no_docs)
    out = a.out or (ROOT / "bench" / "results" if not a.smoke else workdir)
    say(f"bench: {profile.name} run, work files in {workdir}")
    results = {}
    try:
        for backend in a.backend or report.BACKENDS:
            results[backend] = scenarios.run_backend(backend, profile, workdir, say)
    except BaseException:
        say(f"bench: failed; server logs kept in {workdir}")
        raise
    command = "python -m bench " + shlex.join(argv if argv is not None else sys.argv[1:])
    doc = {"date": date.strftime("%Y-%m-%d %H:%M UTC"), "command": command.strip(),
           "profile": profile.name, "elapsed_s": time.monotonic() - started,
           "machine": report.machine(), "results": results}
    doc["derived"] = report.derive(results)
    stem = date.strftime("%Y-%m-%d") + ("-smoke" if a.smoke else "")
    json_path = out / f"{stem}.json"
    report.write_json(doc, json_path)
    img_dir = ROOT / "docs" / "img" if write_docs else out
    images = report.charts(results, doc["derived"], img_dir, "benchmarks")
    table = tables.markdown(doc, [f"img/{i.name}" if write_docs else str(i) for i in images])
    if write_docs:
        report.update_docs(ROOT / "docs" / "benchmarks.md", table)
    else:
        (out / f"{stem}.md").write_text(table + "\n")
    say(f"bench: results in {json_path}" + (" and docs/benchmarks.md" if write_docs else ""))
    for t in doc["derived"]["targets"]:
        state = {True: "met", False: "MISSED", None: "not measured"}[t["met"]]
        say(f"  target {t['target']}: {t['value']} ({state})")
    bad = [(b, s, c[s]["failures"], c[s]["unexpected"]) for b, r in results.items()
           for c in [r["closed"]] for s in scenarios.CLOSED
           if c[s]["failures"] or c[s]["unexpected"]]
    for b, s, f, u in bad:
        say(f"bench: {b} {s}: {f} failed requests, {u} unexpected statuses")
    if not bad:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if bad and a.smoke else 0

