"""The commands that run until stopped: `keystore serve` (migrate, then HTTP with gunicorn)
and `keystore relay` (forward the gateway's accepted events; as many as you like)."""
from __future__ import annotations

import signal
import threading
import time
from typing import Optional

import click

from keystore_service import server
from keystore_service.cli.common import keystore, run, say, settings
from keystore_service.cli.params import Finite, Whole
from keystore_service.storage import migrate


@click.command("serve", help="Migrate the database, then serve HTTP with gunicorn (gthread "
                             "workers).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=Whole(1, 65535))
@click.option("--workers", default=server.default_workers(), show_default=True,
              type=Whole(1, 64))
@click.option("--threads", default=server.THREADS, show_default=True,
              type=Whole(1, 64))
def serve(host: str, port: int, workers: int, threads: int) -> None:
    found = settings()
    try:
        server.check_bind(host, port)  # before anything is said or migrated
    except server.PortTaken as exc:
        raise click.ClickException(str(exc)) from None
    try:
        revision = server.prepare_database(found)
    except migrate.DatabaseProblem as exc:
        raise click.ClickException(str(exc)) from None
    server.metrics_directory()  # removed when this process exits
    say(f"keystore: schema at revision {revision}; serving on http://{host}:{port} "
        f"({workers} workers x {threads} threads)")
    server.Server(found, host, port, workers, threads).run()


@click.command("relay", help="Forward accepted events until stopped (SIGTERM or Ctrl-C); run "
                             "as many as you like, on any hosts sharing the database.")
@click.option("--concurrency", type=Whole(1, 256), default=None,
              help="Forwards at once (default KEYSTORE_RELAY_CONCURRENCY).")
@click.option("--progress", type=Finite(0, 86400), default=10.0, show_default=True,
              help="Seconds between progress lines on stderr (0: none).")
def relay(concurrency: Optional[int], progress: float) -> None:
    ks = keystore()
    run(ks.gateway.sealer.agree)  # keys that cannot open the database's: no start
    found = ks.settings
    if concurrency:
        found = found.model_copy(update={"relay_concurrency": concurrency})
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    running = ks.gateway.start_relay(found)
    say(f"keystore relay: forwarding as {running.holder} "
        f"({found.relay_concurrency} at once); stop with SIGTERM or Ctrl-C")
    started = time.monotonic()
    while not stop.wait(progress or None):
        say(f"keystore relay: {_counts(running.counts)} in "
            f"{time.monotonic() - started:.0f} s")
    running.stop()
    say(f"keystore relay: stopped; {_counts(running.counts)}")


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items())


COMMANDS = (serve, relay)
