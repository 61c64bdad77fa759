"""scripts/serve installs only when it must (issue 25: it reinstalled, and so needed the
package index, on every start): when the venv has no `keystore` yet or pyproject.toml changed
since the last install. Run against a copy of the script with a stand-in venv whose `python`
records what it was asked to do."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _checkout(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "serve", tmp_path / "scripts" / "serve")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    # `python -m pip install ... -e .` makes `keystore`, as the real one does
    _script(bin_ / "python", f'echo "python $*" >> {tmp_path}/calls\n'
            f'case "$*" in *" -e ."*) printf \'#!/bin/sh\\necho "keystore $*" >> '
            f'{tmp_path}/calls\\n\' > {bin_}/keystore; chmod +x {bin_}/keystore;; esac\n')
    return tmp_path


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _serve(checkout: Path) -> list[str]:
    calls = checkout / "calls"
    calls.unlink(missing_ok=True)
    subprocess.run([str(checkout / "scripts" / "serve"), "--port", "18111"], check=True,
                   timeout=30, env={**os.environ, "PATH": "/usr/bin:/bin"})
    return calls.read_text().splitlines()


def test_serve_installs_on_the_first_start_and_when_pyproject_changes_only(tmp_path):
    checkout = _checkout(tmp_path)
    first = _serve(checkout)
    assert any("pip install" in c and "-e ." in c for c in first), first
    assert first[-1] == "keystore serve --port 18111"
    again = _serve(checkout)
    assert again == ["keystore serve --port 18111"]  # no pip: no package index needed
    (checkout / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "2"\n')
    changed = _serve(checkout)
    assert any("-e ." in c for c in changed), changed
    assert _serve(checkout) == ["keystore serve --port 18111"]


def test_serve_reinstalls_when_the_venv_lost_keystore(tmp_path):
    checkout = _checkout(tmp_path)
    _serve(checkout)
    (checkout / ".venv" / "bin" / "keystore").unlink()
    assert any("-e ." in c for c in _serve(checkout))


def test_schemathesis_run_from_the_checkout_keeps_no_cache_in_it(monkeypatch):
    """Its cache (and its crash files) would be written to .schemathesis/ in the checkout and
    left there untracked (issue 25): schemathesis.toml at the top turns it off, for the
    fuzz tests and for `st run` started anywhere in the checkout."""
    from schemathesis.config import SchemathesisConfig
    monkeypatch.chdir(ROOT / "tests" / "fuzz")  # found from a folder below, as from the top
    config = SchemathesisConfig.discover()
    assert config.config_path == str(ROOT / "schemathesis.toml")
    assert config.cache.enabled is False
