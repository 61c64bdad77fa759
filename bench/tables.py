"""The Markdown tables of a run, for docs/benchmarks.md."""
from __future__ import annotations

from .report import BACKENDS, NAMES, SCENARIOS

LABELS = {"noop": "no-op endpoint (ceiling)", "claim_new": "claims of new keys",
          "replay": "replays of completed keys", "cycle": "claim -> complete (requests)",
          "hot_keys": "hot keys (100 keys, 64 claimers)", "lookup": "lookups",
          "batch": "batch claims (keys/s)", "claim_new_64": "claims of new keys, 64 connections",
          "ingest": "webhook ingest (gateway, 202)"}


def _f(x, digits: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    return f"{x:,}"


def markdown(doc: dict, images: list[str]) -> str:
    m, results, d = doc["machine"], doc["results"], doc["derived"]
    backends = [b for b in BACKENDS if b in results]
    out = [f"Run of {doc['date']} (`{doc['command']}`, profile `{doc['profile']}`, "
           f"{doc['elapsed_s']:.0f} s).", "",
           f"Machine: {m['cpu']}, {m['cores']} cores, {m['mem_gib']} GiB, Linux {m['kernel']}, "
           f"load average at start {m['load_average'][0]:.1f} (shared with other runs). "
           f"Python {m['python']}, SQLite {m['sqlite']}, {m['postgres']}, {m['wrk']}, "
           f"{m['pgbench']}; " + ", ".join(f"{k} {v}" for k, v in m["packages"].items()) + ".",
           "", "### Throughput (closed loop, wrk; median of the runs)", "",
           "| scenario | " + " | ".join(f"{NAMES[b]} req/s | ÷ lookup | ÷ no-op | ÷ DB limit "
                                          "| p50 / p99 ms" for b in backends) + " |",
           "|---|" + "---:|---:|---:|---:|---:|" * len(backends)]
    for s in ("noop",) + SCENARIOS:
        if not all(s in results[b]["closed"] for b in backends):
            continue
        row = [LABELS[s]]
        for b in backends:
            c = results[b]["closed"][s]
            rate = c.get("keys_per_s", c["rps"])
            r = d["ratios"][b].get(s, {})
            lim = f" ({_f(c['limit'], 0)}/s)" if "limit" in c else ""
            vs_noop = {"noop": "1", "batch": "-"}.get(s) or _f(r.get("vs_noop"), 2)
            vs_lookup = {"lookup": "1", "batch": "-"}.get(s) or _f(
                r.get("vs_lookup", c["rps"] / results[b]["closed"]["lookup"]["rps"]), 2)
            row += [_f(rate, 0), vs_lookup, vs_noop,
                    (_f(r.get("vs_limit"), 2) + lim) if "limit" in c else "-",
                    f"{c['p50_ms']:.1f} / {c['p99_ms']:.1f}"]
        out.append("| " + " | ".join(row) + " |")
    out += ["", "Statuses and failures (5xx, socket errors, timeouts) over all runs:", ""]
    for b in backends:
        c = results[b]["closed"]
        parts = [f"{s} {c[s]['status']} failures {c[s]['failures']}" for s in ("noop",) + SCENARIOS
                 if s in c]
        out.append(f"- {NAMES[b]}: " + "; ".join(parts) + f"; 'database is locked' in the log: "
                   f"{c['_locked_in_log']}; wrk's connections per worker, sampled mid-run "
                   f"(no-op and claims, each round): {c.get('_connection_spread')}.")
    out += ["", "### Latency at half the claims' maximum rate (open loop, bench.rate)", "",
            "| backend | rate /s | claim p50 / p99 ms | no-op p50 / p99 ms | p99 ratio |",
            "|---|---:|---:|---:|---:|"]
    for b in backends:
        lat = results[b]["closed"]["_latency"]
        out.append(f"| {NAMES[b]} | {lat['rate']:.0f} | {lat['claim']['p50_ms']:.1f} / "
                   f"{lat['claim']['p99_ms']:.1f} | {lat['noop']['p50_ms']:.1f} / "
                   f"{lat['noop']['p99_ms']:.1f} | {d['ratios'][b]['p99_half_rate']:.2f} |")
    out += ["", "### Growth: rows already in the table (4 connections)", "",
            "| backend | rows | load s | claim req/s | claim p50 / p99 ms | lookup req/s | "
            "lookup p50 / p99 ms |", "|---|---:|---:|---:|---:|---:|---:|"]
    for b in backends:
        g = results[b]["growth"]
        for size in (k for k in g if not k.startswith("_")):
            c, lk = g[size]["claim_new"], g[size]["lookup"]
            out.append(f"| {NAMES[b]} | {int(size):,} | {g[size]['load_seconds']} | "
                       f"{c['rps']:,.0f} | {c['p50_ms']:.2f} / {c['p99_ms']:.2f} | "
                       f"{lk['rps']:,.0f} | {lk['p50_ms']:.2f} / {lk['p99_ms']:.2f} |")
    if "instances" in results.get("postgres", {}):
        inst = results["postgres"]["instances"]
        out += ["", "### Instances on one PostgreSQL (claims of new keys, wrk -c16 in total)",
                "", "| instances x workers | claims/s | runs |", "|---|---:|---|"]
        for name, v in inst.items():
            out.append(f"| {name} | {v['rps']:,.0f} | {v['runs_rps']} |")
    out += ["", "### Sweep and memory", ""]
    for b in backends:
        sw = results[b]["growth"].get("_sweep", {})
        text = (f"{sw['rows']:,} expired rows purged in {sw['seconds']} s ({sw['rows_left']} "
                f"left), claim p99 {sw['p99_before_ms']:.1f} ms before, "
                f"{sw['p99_during_ms']:.1f} ms during" if sw.get("ran")
                else f"not run: {sw.get('reason')}")
        out.append(f"- {NAMES[b]}: sweep {text}; max RSS of a worker "
                   f"{results[b]['rss_mb_max']:.1f} MiB.")
    out += ["", "### Targets", "", "| target | value | met |", "|---|---:|---|"]
    for t in d["targets"]:
        met = {True: "yes", False: "**no**", None: "not measured"}[t["met"]]
        out.append(f"| {t['target']} | {_f(t['value'], 3)} | {met}"
                   f"{' (' + t['note'] + ')' if t.get('note') else ''} |")
    out += [""] + [f"![{i}]({i})" for i in images]
    return "\n".join(out)
