"""`keystore config`: the effective settings, where each came from, secrets masked.

For deploy scripts: it reads the environment exactly as `keystore serve` does (through
`settings.Settings`), and reports every invalid value instead of stopping at the first, so
a script can check a configuration before it starts or replaces anything.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import parse_qsl, urlencode

from pydantic import ValidationError
from sqlalchemy.engine import make_url

from keystore_service.settings import Settings

MASK = "****"
# Settings whose whole value is secret, by the end of their name (none today: the database
# URL's password is the only secret, masked within the URL).
SECRET_SUFFIXES = ("_secret", "_password", "_token", "_key")
# Query parameters of a database URL that carry a secret (libpq's and psycopg's names).
SECRET_PARAMS = {"password", "sslpassword", "passfile"}


@dataclass(frozen=True)
class Item:
    name: str  # the environment variable
    value: str  # shown as text, masked where secret; for an invalid one, what was given
    source: str  # "environment" or "default"
    error: Optional[str] = None


def report(**overrides: Any) -> list[Item]:
    """One Item per setting, in declaration order. `overrides` act as the environment
    would (tests)."""
    errors: dict[str, tuple[str, Any]] = {}
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        for e in exc.errors():
            field = str(e["loc"][0]) if e["loc"] else ""
            errors.setdefault(field, (e["msg"], e.get("input")))
        # The valid ones, with each invalid value replaced by its default.
        defaults = {f: Settings.model_fields[f].default for f in errors
                    if f in Settings.model_fields}
        settings = Settings(**{**overrides, **defaults})
    items = []
    for field in Settings.model_fields:
        env = f"KEYSTORE_{field.upper()}"
        if field in errors:
            message, given = errors[field]
            items.append(Item(env, shown(field, given), "environment", message))
            continue
        source = "environment" if field in settings.model_fields_set else "default"
        items.append(Item(env, shown(field, getattr(settings, field)), source))
    return items


def shown(field: str, value: Any) -> str:
    """The value as text safe to print: secrets masked, control characters escaped."""
    text = value if isinstance(value, str) else _plain(value)
    if field.endswith(SECRET_SUFFIXES):
        text = MASK if text else ""
    elif field.endswith("_url"):
        text = mask_url(text)
    return text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def mask_url(url: str) -> str:
    """A database URL with its password (and any secret query parameter) masked."""
    try:
        u = make_url(url)
    except Exception:  # not a URL at all: show nothing of it, it may hold a secret
        return MASK
    text = u.render_as_string(hide_password=True)  # the password as ***
    if u.query:
        base = text.split("?", 1)[0]
        query = [(k, MASK if k.lower() in SECRET_PARAMS else v)
                 for k, v in parse_qsl(text.split("?", 1)[1], keep_blank_values=True)]
        text = f"{base}?{urlencode(query, safe='*/')}"
    return text


def as_table(items: list[Item]) -> str:
    width = max(len(i.name) for i in items)
    lines = []
    for i in items:
        note = f"INVALID: {i.error}" if i.error else i.source
        lines.append(f"{i.name.ljust(width)}  {i.value}  ({note})")
    return "\n".join(lines)


def as_json(items: list[Item]) -> dict:
    return {"valid": not any(i.error for i in items),
            "settings": {i.name: {"value": i.value, "source": i.source,
                                  **({"error": i.error} if i.error else {})} for i in items}}
