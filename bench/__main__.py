"""`python -m bench <what> [options]`: the harness's one entry point (`bench/run <what> ...`
installs what it needs first). `python -m bench <what> --help` gives each one's options.

    suite     the key store's scenarios on both backends (the default: `python -m bench
              --smoke` is `python -m bench suite --smoke`); writes docs/benchmarks.md's results
    gateway   the webhook gateway: ingest, accept-to-first-forward, forwarding throughput
    recovery  the alerts' watchers on vs off, and the drain after a destination's outage
    sends     outbound sends beside the gateway's forwards, and what a check costs
    ordering  a destination's serial ordering per key against none, and a held backlog's cost
    fanout    forwarding to three destinations against one
    layouts   group commit on/off and workers x threads, side by side
    ab        a baseline revision against the working tree, round by round
    profile   py-spy on every worker while wrk drives one scenario
    proxy     the service behind the nginx TLS recipe against direct
    rate      the open-loop constant-rate generator (the harness runs it in its own process)
    dblimit   SQLite's limit for one statement, no HTTP (the same)

`python -m bench.<module>` still runs each of them: the harness starts its own processes
that way (rate, dblimit, the gateway's sink), and the commands recorded in the older files
of bench/results/ are spelt so.
"""
from __future__ import annotations

import importlib
import sys

COMMANDS = ("suite", "gateway", "recovery", "sends", "ordering", "fanout", "layouts", "ab", "profile", "proxy", "rate", "dblimit")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help", "help"):
        print(__doc__)
        return 0
    what = args.pop(0) if args and not args[0].startswith("-") else "suite"
    if what not in COMMANDS:
        print(f"python -m bench: no {what!r}; one of {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    # Each command parses sys.argv as `python -m bench.<what>` did; its usage line names
    # the new spelling.
    sys.argv = [f"python -m bench {what}", *args]
    code = importlib.import_module(f"bench.{what}").main()
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
