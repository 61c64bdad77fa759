"""nginx as the TLS proxy of deploy/nginx/keystore.conf, run as a real process on loopback
for the proxy tests (tests/deploy/test_nginx.py) and the proxy benchmark (bench/proxy.py,
which borrows it from here: the tests never import bench/).

The shipped recipe is used as it is, with only its ports, addresses and certificate paths
replaced; each replaced line must occur exactly once, so the recipe and what is tested
cannot drift apart silently."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .server import free_port

RECIPE = Path(__file__).resolve().parents[2] / "deploy" / "nginx" / "keystore.conf"


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx")
                                      else None)
    if not found:
        raise RuntimeError("nginx is missing: scripts/ensure-nginx installs Debian's package")
    return found


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost (the command docs show)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


POOL = "    keepalive 32;\n    keepalive_requests 20;\n"


def render(recipe: str, *, https_port: int, http_port: int, upstream: str, cert: Path,
           key: Path, pool: Optional[str] = None) -> str:
    """The recipe with this run's ports, upstream and certificate; `pool` replaces its
    upstream keep-alive lines ("" for a connection per request)."""
    swaps = {
        POOL: POOL if pool is None else pool,
        "    server 127.0.0.1:8080;\n": f"    server {upstream};\n",
        "    listen 443 ssl;\n": f"    listen 127.0.0.1:{https_port} ssl;\n",
        "    listen [::]:443 ssl;\n": "",
        "    listen 80;\n": f"    listen 127.0.0.1:{http_port};\n",
        "    listen [::]:80;\n": "",
        "    ssl_certificate /etc/ssl/keystore/cert.pem;\n": f"    ssl_certificate {cert};\n",
        "    ssl_certificate_key /etc/ssl/keystore/key.pem;\n":
            f"    ssl_certificate_key {key};\n",
    }
    for old, new in swaps.items():
        if recipe.count(old) != 1:
            raise ValueError(f"the nginx recipe should contain {old.strip()!r} once")
        recipe = recipe.replace(old, new)
    return recipe


@dataclass
class Nginx:
    """nginx in the foreground (its own process group), everything under `directory`."""

    directory: Path
    upstream: str
    pool: Optional[str] = None  # replaces the recipe's keepalive lines (bench/proxy.py)
    workers: int = 1
    https_port: int = field(default_factory=free_port)
    http_port: int = field(default_factory=free_port)
    proc: Optional[subprocess.Popen] = None
    cert: Optional[Path] = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.https_port}"

    @property
    def access_log(self) -> Path:
        return self.directory / "access.log"

    def start(self, timeout: float = 15) -> Nginx:
        d = self.directory
        (d / "tmp").mkdir(parents=True, exist_ok=True)
        self.cert, key = self_signed(d)
        (d / "keystore.conf").write_text(render(
            RECIPE.read_text(), https_port=self.https_port, http_port=self.http_port,
            upstream=self.upstream, cert=self.cert, key=key, pool=self.pool))
        temp = "\n".join(f"  {kind}_temp_path {d}/tmp/{kind};"
                         for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        (d / "nginx.conf").write_text(f"""daemon off;
{'user root root;' if os.geteuid() == 0 else ''}
worker_processes {self.workers};
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log {self.access_log};
{temp}
  default_type application/octet-stream;
  include {d}/keystore.conf;
}}
""")
        binary = nginx_binary()
        check = subprocess.run([binary, "-t", "-q", "-p", str(d), "-c", str(d / "nginx.conf")],
                               capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"nginx -t: {check.stderr}")
        self.proc = subprocess.Popen([binary, "-p", str(d), "-c", str(d / "nginx.conf")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited: {(d / 'error.log').read_text()[-1000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.https_port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("nginx did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGQUIT)  # graceful: finish requests in flight
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
