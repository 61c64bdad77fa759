"""The sealing keys of a process (issue 25, item 4): KEYSTORE_SECRET_KEY, else the key file
(KEYSTORE_SECRET_KEY_FILE, or on SQLite `<database>.key` made beside the database on first
use, never for a database that holds sealed data already), checked against the database's
check value (service/sealing.py). `serve`, `relay` and gunicorn_conf's master call
check_keys() before they start; every process builds its Sealer with sealer_for().

Imports nothing of the web or the gateway: server.py calls it before prometheus_client may
be imported (server.metrics_directory)."""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Optional

from sqlalchemy.engine import make_url

from keystore_service.service.claims import Clock, system_clock
from keystore_service.service.sealing import KeysRefused, Sealer, keys_from
from keystore_service.settings import Settings
from keystore_service.storage.db import Database, create, normalise_url
from keystore_service.storage.migrate import DatabaseProblem
from keystore_service.storage.sealing import CheckStore

log = logging.getLogger("keystore.gateway")


def sealer_for(settings: Settings, database: Database, clock: Clock) -> Sealer:
    """The sealer of this process: the keys of KEYSTORE_SECRET_KEY, else of its key file,
    checked against `database`'s check value. SystemExit (naming the setting) for keys
    that are not keys or a key file that cannot be read."""
    check = CheckStore(database)
    text, origin = _key_file(settings, check)
    try:
        return Sealer(keys_from(settings.secret_key.get_secret_value()
                                if settings.secret_key else None, text), origin, check, clock)
    except ValueError as exc:
        raise SystemExit(f"keystore: {exc}") from None


def check_keys(settings: Settings) -> None:
    """What `serve` and `relay` do before they start (and gunicorn_conf's master): the
    configured keys must open the database's check value. Raises migrate.DatabaseProblem
    with the message (exit 1), naming the setting; SystemExit as sealer_for."""
    database = Database(create(settings.database_url, pool_size=1,
                               sqlite_busy_timeout_ms=settings.sqlite_busy_timeout_ms))
    try:
        sealer_for(settings, database, system_clock).agree()
    except KeysRefused as exc:
        raise DatabaseProblem(exc.message) from None
    finally:
        database.engine.dispose()


def _key_file(settings: Settings, check: CheckStore) -> tuple[Optional[str], str]:
    """The key file's text and what to call the keys in messages: KEYSTORE_SECRET_KEY_FILE,
    else (SQLite, no key set) the key beside the database, made on first use (mode 600;
    O_EXCL, so processes starting at once agree on one key) unless the database holds
    sealed data or a check value already: a new key could not open it (issue 25)."""
    if settings.secret_key:
        return None, "KEYSTORE_SECRET_KEY"
    path = Path(settings.secret_key_file) if settings.secret_key_file else \
        default_key_file(settings.database_url)
    if path is None:
        return None, "KEYSTORE_SECRET_KEY is not set"
    origin = (f"KEYSTORE_SECRET_KEY_FILE ({path})" if settings.secret_key_file else
              f"the key file {path}, made beside the database when KEYSTORE_SECRET_KEY is "
              "not set")
    if not settings.secret_key_file and not path.exists():
        if check.get() is not None or check.sealed_samples():
            return None, ("KEYSTORE_SECRET_KEY is not set; no key file was made beside the "
                          "database, as it holds sealed secrets")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        except OSError:
            return None, "KEYSTORE_SECRET_KEY is not set"  # a read-only directory
        else:
            with os.fdopen(fd, "w") as f:
                f.write(Sealer.new_key() + "\n")
            log.info("made the key that seals webhook sources' secrets: %s (back it up with "
                     "the database, keep it out of database dumps)", path)
    try:
        return path.read_text(), origin
    except OSError as exc:
        raise SystemExit(f"keystore: cannot read the secret key file {path} "
                         f"({exc.strerror})") from None


def default_key_file(database_url: str) -> Optional[Path]:
    """Where `keystore serve` keeps a key of its own for an SQLite store with none
    configured: beside the database file (back it up with the database; keep it apart from
    dumps). None for PostgreSQL: several instances must share one key, so it is set."""
    url = make_url(normalise_url(database_url))
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database).expanduser().resolve().with_suffix(".key")
