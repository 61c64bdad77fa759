"""What every command group shares: the settings, the database it names and checks, the key
store built on it, and the turning of the service's errors into the command's (exit 1)."""
from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any, TypeVar

import click
from pydantic import ValidationError

from keystore_service import errors
from keystore_service.settings import Settings, load
from keystore_service.storage import migrate
from keystore_service.storage.accounts import Accounts
from keystore_service.storage.db import Database
from keystore_service.storage.db import create as engine
from keystore_service.web.api.render import validation_details

T = TypeVar("T")
# the tenant a command of the gateway, the issues or the bulk actions acts for
TENANT = click.option("--tenant", "tenant_name", default="default", show_default=True)


def settings() -> Settings:
    return load()


def say(message: str) -> None:
    """A line for a person: stderr (stdout carries only what a script reads)."""
    click.echo(message, err=True)


def database(create: bool = False) -> Settings:
    """The settings, once their database is said (stderr) and holds the key store's schema.

    A database without the schema is refused (ClickException) unless `create`; an older schema
    is migrated, said in one line. Unreachable: ClickException with the reason."""
    found = settings()
    url = found.database_url
    say(f"keystore: database {migrate.describe(url)}")
    try:
        if not create and migrate.revision(url) is None:
            raise click.ClickException(_no_schema(url))
        done = migrate.upgrade_and_tell(url)
    except migrate.DatabaseProblem as exc:
        raise click.ClickException(str(exc)) from None
    if done.migrated:
        say(done.summary())
    return found


def _no_schema(url: str) -> str:
    missing = " (the file does not exist)" if migrate.sqlite_file_missing(url) else ""
    return (
        f"no key store schema in {migrate.describe(url)}{missing}.\n"
        "Point KEYSTORE_DATABASE_URL at the database the service uses, for example\n"
        "  export KEYSTORE_DATABASE_URL=sqlite:////ABSOLUTE/PATH/keystore.db"
        "   (four slashes: an absolute path)\n"
        "  export KEYSTORE_DATABASE_URL=postgresql://USER@HOST:5432/DB\n"
        "(the default, sqlite:///keystore.db, is keystore.db in the current directory).\n"
        "To start a new, empty key store there instead: `keystore db upgrade`, or "
        "`keystore tenant create NAME --create`.")


def said_url() -> str:
    """The configured database's URL, once said on stderr (the db commands, which check no
    schema first)."""
    url = settings().database_url
    say(f"keystore: database {migrate.describe(url)}")
    return url


def keystore():
    """The key store of the configured database, checked as `database()` checks it."""
    from keystore_service.bootstrap import build
    return build(database())


def accounts(found: Settings) -> tuple[Accounts, Database]:
    """Tenants and tokens alone (one connection), for the account commands."""
    db = Database(engine(found.database_url, pool_size=1,
                         sqlite_busy_timeout_ms=found.sqlite_busy_timeout_ms))
    return Accounts(db), db


def no_tenant(name: str) -> click.ClickException:
    """The error for an unknown tenant, naming the database and how to create it there."""
    url = settings().database_url
    shown = shlex.quote(name) if name.isprintable() else "NAME"  # never a raw CR/LF echoed
    return click.ClickException(
        f"no tenant {name!r} in {migrate.describe(url)}; create it there with "
        f"`keystore tenant create {shown}`")


def tenant(ks: Any, name: str) -> int:
    """The id of the tenant `name` (the gateway's commands: ClickException if none)."""
    tenant_id = ks.accounts.tenant_id(name)
    if tenant_id is None:
        raise click.ClickException(f"no tenant {name!r}")
    return tenant_id


def run(call: Callable[[], T]) -> T:
    """`call()`, with the service's error as the command's (its message, and the field it
    names when the message does not, exit 1)."""
    try:
        return call()
    except errors.KeystoreError as exc:
        field = (exc.details or {}).get("field")
        named = isinstance(field, str) and field.split(".")[0] in exc.message
        raise click.ClickException(exc.message if named or not isinstance(field, str)
                                   else f"{field}: {exc.message}") from None


def validated(model: Any, body: dict[str, Any]) -> Any:
    """`body` as the API's request `model` (the same rules as the endpoint's), or the
    problems as the command's message (exit 1), never a traceback."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(f"{e['field']}: {e['message']}"
                             for e in validation_details(exc)["errors"])
        raise click.ClickException(problems) from None
