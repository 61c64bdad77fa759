"""The test suite's own layout (tests/README.md): no test module imports another test module
(what tests share lives in tests/support/ or a folder's support.py), and the tests do not
import the benchmark harness, bench/ (bench may borrow from tests/support/, never the reverse).
"""
from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
# The harness's own tests: what they test is bench/, so they import it.
BENCH_TESTS = {"tests/unit/test_bench.py"}


def imported(path: Path, root: Path = REPO) -> set[str]:
    """The dotted names of the modules a file imports, relative imports resolved (for
    `from X import a`, both X and X.a: `a` may be a module)."""
    package = path.relative_to(root).with_suffix("").parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)
    return found


def modules_of_tests(root: Path) -> set[str]:
    return {".".join(p.relative_to(root).with_suffix("").parts)
            for p in (root / "tests").rglob("test_*.py")}


def violations(root: Path) -> list[str]:
    tests = modules_of_tests(root)
    found = []
    for path in sorted((root / "tests").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        names = imported(path, root)
        found += [f"{rel} imports the test module {name}" for name in sorted(names & tests)]
        if rel not in BENCH_TESTS:
            found += [f"{rel} imports {name}" for name in sorted(names)
                      if name == "bench" or name.startswith("bench.")]
    for path in sorted((root / "bench").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        found += [f"{rel} imports {name}: bench borrows only from tests/support/"
                  for name in sorted(imported(path, root))
                  if name.split(".")[0] == "tests" and not name.startswith("tests.support")]
    return found


def test_no_test_module_imports_another_and_the_tests_do_not_import_bench():
    assert violations(REPO) == []


def test_the_check_finds_each_kind_of_import(tmp_path):
    """The check can fail: a relative and an absolute import of a test module, a test
    importing bench/, and bench importing a test module are each found."""
    (tmp_path / "tests" / "ui").mkdir(parents=True)
    (tmp_path / "bench").mkdir()
    (tmp_path / "tests" / "ui" / "test_a.py").write_text("X = 1\n")
    (tmp_path / "tests" / "ui" / "test_b.py").write_text("from .test_a import X\n")
    (tmp_path / "tests" / "ui" / "test_c.py").write_text("from tests.ui import test_a\n")
    (tmp_path / "tests" / "ui" / "support.py").write_text("from bench.nginx import Nginx\n")
    (tmp_path / "bench" / "proxy.py").write_text("from tests.ui.test_a import X\n"
                                                 "from tests.support.nginx import Nginx\n")
    assert violations(tmp_path) == [
        "tests/ui/support.py imports bench.nginx",
        "tests/ui/support.py imports bench.nginx.Nginx",
        "tests/ui/test_b.py imports the test module tests.ui.test_a",
        "tests/ui/test_c.py imports the test module tests.ui.test_a",
        "bench/proxy.py imports tests.ui.test_a: bench borrows only from tests/support/",
        "bench/proxy.py imports tests.ui.test_a.X: bench borrows only from tests/support/"]
