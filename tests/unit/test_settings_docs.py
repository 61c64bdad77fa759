"""docs/deployment.md documents every KEYSTORE_ setting, in one table, with its real default."""
from __future__ import annotations

import re
from pathlib import Path

from keystore_service.settings import Settings

PAGE = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"


def documented() -> dict[str, str]:
    section = PAGE.read_text().split("## Configuration", 1)[1].split("\n## ", 1)[0]
    return {name: default for name, default in
            re.findall(r"^\| `(KEYSTORE_[A-Z_]+)` \| ([^|]+) \|", section, flags=re.M)}


def test_every_setting_is_in_the_table_and_nothing_else():
    assert set(documented()) == {f"KEYSTORE_{n.upper()}" for n in Settings.model_fields}


def test_the_documented_defaults_are_the_real_ones():
    table = documented()
    for name, field in Settings.model_fields.items():
        shown = table[f"KEYSTORE_{name.upper()}"].split()[0].strip("`")
        default = field.default
        if default is None:
            assert shown == "(none)", name
        elif default == "":
            assert shown == "(empty)", name
        elif isinstance(default, bool):
            assert shown == str(default).lower(), name
        elif isinstance(default, (int, float)):
            assert float(shown) == default, name
        else:
            assert shown == default, name
