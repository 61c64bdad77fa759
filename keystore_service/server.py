"""Run the app under gunicorn from `keystore serve` (gthread workers, app built per worker)."""
from __future__ import annotations

import os
from typing import Any

from gunicorn.app.base import BaseApplication

from .settings import Settings


def default_workers() -> int:
    return max(2, 2 * (os.cpu_count() or 1))


class Server(BaseApplication):
    """Each worker builds its own app, engine and pool after the fork: no connection is
    ever shared between processes (and `post_fork` would dispose any that were)."""

    def __init__(self, settings: Settings, host: str, port: int, workers: int, threads: int,
                 **extra: Any):
        self.settings = settings
        self.options = {
            "bind": f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
            "workers": workers, "worker_class": "gthread", "threads": threads,
            "preload_app": False, "timeout": 60, "graceful_timeout": 20, "keepalive": 5,
            "accesslog": None, "errorlog": "-", "loglevel": settings.log_level.lower(),
            "proc_name": "keystore",
            # the proxies trusted for X-Forwarded-Proto (and, in app.py's access log, for
            # X-Forwarded-For): one setting for both, docs/deployment.md "TLS proxy"
            "forwarded_allow_ips": settings.forwarded_allow_ips, **extra,
        }
        super().__init__()

    def load_config(self) -> None:
        for name, value in self.options.items():
            if name in self.cfg.settings:
                self.cfg.set(name, value)
        # gunicorn >= 25.1 opens a control socket at one per-user path; instances side by
        # side would clash on it, and nothing here uses it.
        if "control_socket_disable" in self.cfg.settings:
            self.cfg.set("control_socket_disable", True)
        self.cfg.set("post_fork", _dispose_inherited_pools)
        self.cfg.set("child_exit", _worker_exited)

    def load(self):
        from .app import create_app
        return create_app(self.settings, background_jobs=True)


def _dispose_inherited_pools(_server: Any, worker: Any) -> None:
    app = getattr(worker, "wsgi", None)
    keystore = getattr(app, "extensions", {}).get("keystore") if app else None
    if keystore is not None:
        keystore.database.engine.dispose(close=False)


def _worker_exited(_server: Any, worker: Any) -> None:
    from .metrics import worker_exit
    worker_exit(worker.pid)
