"""The event-type glob (domain/bulk.py's glob_parts) as SQL: LIKE on PostgreSQL (its text is
compared in collation C: case-sensitive, and a literal prefix is a range of the index), GLOB
on SQLite (whose LIKE ignores ASCII case)."""
from __future__ import annotations

from typing import Any

from keystore_service.domain.bulk import glob_parts


def type_glob(column: Any, pattern: str, sqlite: bool) -> Any:
    """`column` matches the glob `pattern` (a bound parameter: never SQL text)."""
    parts = glob_parts(pattern)
    if sqlite:
        # SQLite's GLOB: * and ? as ours; "[" opens a class there, so it is written "[[]"
        # (a class of one "["); "]" alone is itself.
        text = "".join(p if p in "*?" else p.replace("[", "[[]") for p in parts)
        return column.op("GLOB")(text)
    # LIKE: % and _ are its wildcards; ours are escaped with "\" where they are literal.
    text = "".join("%" if p == "*" else "_" if p == "?" else
                   p.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
                   for p in parts)
    return column.like(text, escape="\\")
