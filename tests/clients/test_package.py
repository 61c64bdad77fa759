"""The client distribution stays small: it declares `requests` alone, imports nothing else
outside the standard library (urllib3 comes with requests), and parses as Python 3.9 (its
`requires-python`). A full `pip install` into a fresh venv needs the package index, so it is
checked by hand when the dependencies change (docs/python-client.md names the install)."""
from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

from .conftest import REPO

CLIENT = REPO / "clients" / "python"
ALLOWED = {"requests", "urllib3", "keystore_client"}


def modules() -> list[Path]:
    return sorted((CLIENT / "keystore_client").rglob("*.py"))


def test_requests_is_the_only_dependency():
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    assert [d.split(">")[0].split("=")[0] for d in project["dependencies"]] == ["requests"]
    assert project["requires-python"] == ">=3.9"
    assert project["scripts"] == {"keystore-client": "keystore_client._cli:entry_point"}


def test_modules_import_only_the_standard_library_and_requests():
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top in ALLOWED, (path.name, name)


def test_modules_parse_as_python_3_9():
    for path in modules():
        ast.parse(path.read_text(), filename=str(path), feature_version=(3, 9))


def test_modules_stay_small():
    for path in modules():
        assert len(path.read_text().splitlines()) <= 300, path.name
