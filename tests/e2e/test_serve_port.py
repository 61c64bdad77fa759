"""`keystore serve` on a port another process holds: it fails at once and clearly (issue 25,
the new user's second server beside the README's), before it says "serving on"."""
from __future__ import annotations

import socket
import subprocess
import time

from tests.support import KEYSTORE, free_port


def test_serve_on_a_taken_port_fails_at_once_naming_the_address(tmp_path):
    port = free_port()
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
    holder.bind(("127.0.0.1", port))
    holder.listen()
    try:
        url = f"sqlite:///{tmp_path}/keystore.db"
        t0 = time.monotonic()
        done = subprocess.run([KEYSTORE, "serve", "--port", str(port), "--workers", "1"],
                              env={"KEYSTORE_DATABASE_URL": url, "PATH": "/usr/bin:/bin"},
                              capture_output=True, text=True, timeout=60)
        took = time.monotonic() - t0
    finally:
        holder.close()
    text = done.stdout + done.stderr
    assert done.returncode != 0, text
    assert took < 5, took  # gunicorn alone retries the bind for 5 s
    assert "serving on" not in text
    assert "Address already in use" not in text  # gunicorn's own retries: not shown
    assert text.count(f"127.0.0.1:{port}") == 1, text
    assert "already in use" in text and "--port" in text, text


def test_serve_on_a_host_it_cannot_bind_fails_clearly(tmp_path):
    url = f"sqlite:///{tmp_path}/keystore.db"
    done = subprocess.run([KEYSTORE, "serve", "--host", "192.0.2.1", "--port", "18999",
                           "--workers", "1"],
                          env={"KEYSTORE_DATABASE_URL": url, "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)
    text = done.stdout + done.stderr
    assert done.returncode != 0 and "serving on" not in text, text
    assert "192.0.2.1:18999" in text and "Traceback" not in text, text
