"""Sizes the next maintainer can read (issue 26, "Done when"): no function in keystore_service/
of 60 lines or more, no module of 400 lines or more, the migrations included. A function is
counted from its `def` (decorators not included) to its last line, a nested one on its own
as well as inside the function that holds it.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "keystore_service"
MAX_FUNCTION_LINES = 59
MAX_MODULE_LINES = 399


def _modules() -> list[Path]:
    found = sorted(PACKAGE.rglob("*.py"))
    assert len(found) > 50, f"keystore_service/ not found at {PACKAGE}"
    return found


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def long_functions(source: str) -> list[tuple[str, int, int]]:
    """(name, first line, length) of each function of `source` longer than allowed."""
    return [(node.name, node.lineno, node.end_lineno - node.lineno + 1)
            for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def test_no_function_is_60_lines_or_longer():
    offenders = [f"{_name(path)}:{line} {name} is {length} lines"
                 for path in _modules()
                 for name, line, length in long_functions(path.read_text(encoding="utf-8"))]
    assert not offenders, (f"split these (at most {MAX_FUNCTION_LINES} lines each): "
                           + "; ".join(offenders))


def test_no_module_is_400_lines_or_longer():
    offenders = [f"{_name(path)} is {length} lines" for path in _modules()
                 if (length := len(path.read_text(encoding="utf-8").splitlines()))
                 > MAX_MODULE_LINES]
    assert not offenders, (f"split these (at most {MAX_MODULE_LINES} lines each): "
                           + "; ".join(offenders))


def test_the_function_rule_counts_from_def_to_the_last_line():
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
    assert long_functions(f"def fits():\n{body}") == []
    assert long_functions(f"async def too_long():\n{body}    return 1\n") == [
        ("too_long", 1, MAX_FUNCTION_LINES + 1)]
    nested = f"class C:\n    def method(self):\n{body.replace('    ', '        ')}" \
             "        return 1\n"
    assert long_functions(nested) == [("method", 2, MAX_FUNCTION_LINES + 1)]
