"""GitHub's own verifier, @octokit/webhooks-methods, installed once per lockfile into the CI
cache outside the clone (like nodes/n8n/scripts/install-n8n.sh) and run on the machine's Node.
Required, never skipped: without Node 20+ and npm the test fails and says why."""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

SPEC = Path(__file__).parent / "octokit"


def _cache_dir(stamp: str) -> Path:
    root = Path(os.environ.get("KEYSTORE_CI_CACHE", "~/.cache/keystore-ci")).expanduser()
    return root / f"octokit-webhooks-methods-{stamp}"


@pytest.fixture(scope="session")
def octokit():
    """run(cases) -> [{"verdict": True | False | "error", "signed": str | None}] for cases
    [{"secrets": [...], "body": str, "signature": str}] (see octokit/verify.mjs)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.fail("Node 20+ and npm are required for GitHub's own verifier "
                    "(@octokit/webhooks-methods)", pytrace=False)
    major = subprocess.run([node, "-p", "process.versions.node.split('.')[0]"],
                           capture_output=True, text=True, check=True).stdout.strip()
    if int(major) < 20:
        pytest.fail(f"@octokit/webhooks-methods needs Node 20+, found {major}", pytrace=False)
    # The files' contents only, so every clone (CI clones afresh) hits the same cache.
    spec_files = [SPEC / "package.json", SPEC / "package-lock.json"]
    stamp = hashlib.sha256(b"".join(p.read_bytes() for p in spec_files)).hexdigest()[:16]
    target = _cache_dir(stamp)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test sessions at once install it once
        installed = target / ".installed"
        if not installed.is_file() or installed.read_text() != stamp:
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            for path in spec_files:
                shutil.copy(path, target)
            subprocess.run([npm, "ci", "--prefer-offline", "--no-audit", "--no-fund",
                            "--loglevel=error"], cwd=target, check=True, timeout=600)
            installed.write_text(stamp)
        shutil.copy(SPEC / "verify.mjs", target)  # next to its node_modules

    def run(cases: list[dict]) -> list[dict]:
        done = subprocess.run([node, str(target / "verify.mjs")], input=json.dumps(cases),
                              capture_output=True, text=True, timeout=120, check=True)
        return json.loads(done.stdout)
    return run
