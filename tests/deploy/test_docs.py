"""docs/deployment.md names only commands and options that exist: each `keystore ...` line
in its code blocks is run with --help (the tests beside this file run the commands
themselves), and every file it points at is in the repository."""
from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.support import KEYSTORE

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "deployment.md").read_text()
BLOCKS = "\n".join(m.group(0) for m in re.finditer(r"(?m)^(    .*\n)+", DOC))


def keystore_lines() -> list[list[str]]:
    found = []
    for line in BLOCKS.replace("\\\n", " ").splitlines():
        line = line.split("#", 1)[0]
        for part in re.split(r"&&|\||;|\$\(", line):
            words = shlex.split(part.replace(")", " "), posix=True)
            while words and ("=" in words[0] or words[0] in ("exec", "podman", "docker")):
                words = words[1:]  # VAR=... prefixes; `podman exec NAME keystore ...`
            if words and Path(words[0]).name == "keystore":
                found.append(words[1:])
    return found


def subcommand(args: list[str]) -> list[str]:
    return [a for a in args if not a.startswith("-") and "/" not in a
            and not a.startswith("keystore-")][:2]


@pytest.mark.parametrize("args", keystore_lines(), ids=" ".join)
def test_each_keystore_command_in_the_docs_exists(args):
    words = subcommand(args)
    group = subprocess.run([KEYSTORE, *words[:1], "--help"], capture_output=True, text=True,
                           timeout=60)  # never without --help: `serve` would serve
    words = words[:2] if len(words) > 1 and "Commands:" in group.stdout else words[:1]
    helped = subprocess.run([KEYSTORE, *words, "--help"], capture_output=True, text=True,
                            timeout=60)
    assert helped.returncode == 0, (words, helped.stderr)
    for option in (a.split("=")[0] for a in args if a.startswith("--")):
        assert option in helped.stdout, (words, option)


def test_the_files_it_points_at_exist():
    for path in ("Containerfile", "compose.yaml", "deploy/nginx/keystore.conf",
                 "deploy/systemd/keystore.service", "scripts/release", "scripts/test-deploy"):
        assert path in DOC and (ROOT / path).exists(), path
    assert len(keystore_lines()) >= 8
