"""Each of these constants is written once (issue 26 move 3), so a change to it is one edit:

- a result body's limit, `MAX_RESULT_BYTES` in domain/records.py;
- the gateway's scope prefix, `HOOK_SCOPE_PREFIX` in domain/records.py;
- the delivery states, `DeliveryState` in domain/deliveries.py.

Found by parsing keystore_service/ (migrations keep the text they were written with). Dict
keys and subscripts that spell a state name a field of a queue's counts (the API's `queue`
object), not a state, and are left alone.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from keystore_service.domain.deliveries import DeliveryState

PACKAGE = Path(__file__).resolve().parents[2] / "keystore_service"
RECORDS = PACKAGE / "domain" / "records.py"
DELIVERIES = PACKAGE / "domain" / "deliveries.py"
# The alert notices' states (domain/issues.NoticeState) are words of their own that share
# "queued" with the deliveries': spelt once there, as the deliveries' are in DELIVERIES.
NOTICES = PACKAGE / "domain" / "issues.py"
# The outbound sends' states (domain/sends.SendState) share "queued" too, and are spelt there.
SENDS = PACKAGE / "domain" / "sends.py"
# The two words only the deliveries use ("delivered" and "failed" are also an attempt's
# outcome, and "failed" a record's state).
ONLY_DELIVERIES = {DeliveryState.QUEUED.value, DeliveryState.DELIVERING.value}
STATES = "|".join(s.value for s in DeliveryState)


def sources() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts]


def keys(tree: ast.AST) -> set[int]:
    """ids of the constants used as a dict's keys or a subscript."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            found.update(id(k) for k in node.keys if k is not None)
        elif isinstance(node, ast.Subscript):
            found.add(id(node.slice))
    return found


def test_the_result_limit_is_written_once():
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and \
                    {getattr(node.left, "value", None), getattr(node.right, "value", None)} \
                    == {256, 1024}:
                assert path == RECORDS, f"{path.relative_to(PACKAGE)}:{node.lineno}"


def test_the_hook_scope_prefix_is_written_once():
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    node.value.startswith(("hook:", "^hook:")):
                assert path == RECORDS, f"{path.relative_to(PACKAGE)}:{node.lineno}"
    for path in (PACKAGE / "web" / "ui" / "templates").rglob("*.html"):
        assert not re.search(r"""['"]hook:""", path.read_text()), path.name


def test_the_delivery_states_are_spelt_in_the_domain():
    for path in sources():
        if path in (DELIVERIES, NOTICES, SENDS):
            continue
        tree = ast.parse(path.read_text())
        named = keys(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and id(node) not in named:
                assert node.value not in ONLY_DELIVERIES, \
                    f"{path.relative_to(PACKAGE)}:{node.lineno} spells {node.value!r}"
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    re.search(rf"state\s*(=|<>|IN)\s*\(?'({STATES})'", node.value):
                raise AssertionError(f"{path.relative_to(PACKAGE)}:{node.lineno}: SQL text "
                                     "names a state: bind it from DeliveryState")
    for path in (PACKAGE / "web" / "ui" / "templates").rglob("*.html"):
        found = re.search(rf"""state\s*(==|in)\s*\(?\s*['"]({STATES})['"]""", path.read_text())
        assert not found, f"{path.name}: {found.group(0)} (use t.Delivery)"
