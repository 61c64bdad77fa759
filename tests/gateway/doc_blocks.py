"""docs/webhooks/README.md's sh blocks, run as written against a real `keystore serve` (its
relay on) on a fresh SQLite database and a real receiver: only the receiver's address
(127.0.0.1:9999 on the page) and the /tmp files are changed. The filter's, the rate's and the
ordering's doc tests share it."""
from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from keystore_service.storage import migrate
from tests.support import Server, new_token

from .support import KEY, Sink

PAGE = Path(__file__).resolve().parents[2] / "docs" / "webhooks" / "README.md"


def block(heading: str) -> str:
    """The first sh block after `heading` on the page."""
    section = PAGE.read_text().split(heading, 1)[1]
    return re.search(r"```sh\n(.*?)```", section, flags=re.S).group(1)


@dataclass
class Ran:
    done: subprocess.CompletedProcess
    server: Server
    token: str


@contextmanager
def run_block(tmp_path: Path, heading: str, sink: Sink, tmp_file: str,
              second: Sink | None = None) -> Iterator[Ran]:
    """Run the block under `heading` (its /tmp/`tmp_file` moved into tmp_path) with $KS and
    $TOKEN set; the serve lives until the `with` ends, for what the caller checks after.
    `second` is the receiver at 127.0.0.1:9998 on the page, when the block has two."""
    url = f"sqlite:///{tmp_path}/keystore.db"
    migrate.upgrade(url)
    token = new_token(url, "acme", "operator", "ana")
    server = Server(url, workers=1, threads=4, env={"KEYSTORE_SECRET_KEY": KEY},
                    log_path=tmp_path / "server.log")
    server.start()
    try:
        script = block(heading).replace("http://127.0.0.1:9999/", sink.url).replace(
            f"/tmp/{tmp_file}", f"{tmp_path}/{tmp_file}")
        if second is not None:
            script = script.replace("http://127.0.0.1:9998/", second.url)
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True,
                              text=True, timeout=60, env={"PATH": "/usr/bin:/bin",
                                                          "KS": server.url, "TOKEN": token})
        assert done.returncode == 0, done.stderr[-2000:]
        yield Ran(done, server, token)
    finally:
        server.kill()
        sink.close()
        if second is not None:
            second.close()
