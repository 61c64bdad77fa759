"""The migrations create what tables.py describes, and enforce the rules themselves."""
from __future__ import annotations

import time

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, insert
from sqlalchemy.exc import DataError, IntegrityError

from keystore_service.storage import migrate
from keystore_service.storage.db import normalise_url
from keystore_service.storage.tables import metadata, records, tenants

from .migration_support import row
from .migration_support import to_revision as _to

HOUR = 3600 * 1_000_000


@pytest.fixture
def engine(database_url):
    e = create_engine(normalise_url(database_url))
    yield e
    e.dispose()


def test_the_migrated_schema_matches_the_table_definitions(engine):
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    assert diff == []


def test_upgrade_is_idempotent(database_url):
    assert migrate.upgrade(database_url) == migrate.upgrade(database_url) == migrate.head()


@pytest.mark.parametrize("bad", [
    {"scope": ""}, {"scope": "s" * 129}, {"scope": "has space"}, {"key": ""},
    {"key": "k" * 513}, {"state": "done"}, {"on_stale": "never"}, {"attempt": 0},
    {"lease_expires_at": None}, {"tenant_id": None}, {"key": None}, {"fingerprint": ""},
])
def test_the_database_refuses_rows_that_break_the_rules(engine, bad):
    with engine.begin() as conn:
        conn.execute(insert(tenants).values(id=1, name="t", created_at=0))
    with pytest.raises((IntegrityError, DataError)), engine.begin() as conn:  # PG: too long
        conn.execute(insert(records).values(row(**bad)))


def test_the_unique_constraint_and_exact_key_comparison(engine):
    with engine.begin() as conn:
        conn.execute(insert(tenants).values(id=1, name="t", created_at=0))
        for key in ("Key", "key", "key ", "kéy", "ke\u0301y"):  # case, space, NFC vs NFD
            conn.execute(insert(records).values(row(key=key)))
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(insert(records).values(row(key="key")))


def test_upgrading_from_0001_keeps_the_records(tmp_path):
    from alembic import command
    from sqlalchemy import select, text

    url = f"sqlite:///{tmp_path}/old.db"
    engine = create_engine(url)
    with engine.begin() as conn:
        cfg = migrate._config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
        conn.execute(text("INSERT INTO tenants (id, name, created_at) VALUES (1, 't', 0)"))
        conn.execute(text(
            "INSERT INTO records (tenant_id, scope, key, state, attempt, incarnation, on_stale, "
            "first_seen_at, last_seen_at, expires_at, duplicate_count, result) VALUES "
            "(1, 's', 'k', 'succeeded', 1, 1, 'retry', 0, 0, 9, 3, '{}')"))
    engine.dispose()
    assert migrate.upgrade(url) == migrate.head()
    engine = create_engine(url)
    with engine.connect() as conn:
        row = conn.execute(select(records)).one()
    engine.dispose()
    assert (row.key, row.duplicate_count, row.version_kind, row.version) == ("k", 3, None, None)


def test_an_upgrade_cuts_a_pause_stored_before_the_bound(tmp_path):
    """A source paused until 2058 by a Retry-After before the bound existed is paused for
    an hour after the upgrade at most (migration 0009)."""
    from alembic import command
    from sqlalchemy import create_engine, text

    url = f"sqlite:///{tmp_path}/old.db"
    engine = create_engine(url)
    with engine.begin() as conn:
        cfg = migrate._config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0008_late_repeats")
        conn.execute(text("INSERT INTO tenants (id, name, created_at) VALUES (1, 't', 0)"))
        conn.execute(text(
            "INSERT INTO hook_sources (tenant_id, name, provider, ingest_hash, sealed, config, "
            "destination_url, timeout_seconds, ttl_seconds, retry_window_seconds, "
            "max_in_flight, keep_body_seconds, state, created_at, updated_at, paused_until) "
            "VALUES (1, 's', 'generic', 'h', 'x', '{}', 'http://127.0.0.1/', 10, 999999, 3600, "
            "4, 0, 'active', 0, 0, 2800000000000000)"))  # 2058
    engine.dispose()
    before = time.time()
    migrate.upgrade(url)
    engine = create_engine(url)
    with engine.connect() as conn:
        until, bound = conn.execute(text(  # the pause is the destination's since 0020
            "SELECT d.paused_until, s.max_pause_seconds FROM hook_sources s "
            "JOIN hook_destinations d ON d.source_id = s.id")).one()
    engine.dispose()
    assert bound == 3600
    assert before * 1e6 + HOUR <= until <= time.time() * 1e6 + HOUR


def _add_source(conn, sid: int, name: str, config: str, **destination) -> None:
    """A source row at head, with its destination (hook_destinations since 0020)."""
    from keystore_service.storage.route_tables import hook_destinations
    from keystore_service.storage.tables import hook_sources
    conn.execute(insert(hook_sources).values(
        id=sid, tenant_id=1, name=name, provider="generic", ingest_hash=f"h{sid}", sealed="x",
        config=config, ttl_seconds=999999, retry_window_seconds=3600, keep_body_seconds=0,
        state="active", created_at=0, updated_at=0))
    conn.execute(insert(hook_destinations).values(  # its id the source's: events name it
        id=sid, tenant_id=1, source_id=sid, name="default", position=0, url="http://127.0.0.1/",
        timeout_seconds=10, max_in_flight=4, **destination))


def test_0015_lets_an_event_be_filtered_and_its_downgrade_makes_it_delivered(own_url):
    """0015 up and down with rows on both backends: `filtered` is a state at 0015 only (a
    downgrade makes each filtered event delivered, delivered_at still null), the other
    events and their attempts stay, and a state neither knows is refused at both."""
    from sqlalchemy import inspect, select, update

    from keystore_service.storage.tables import hook_attempts, hook_events, hook_sources
    engine = create_engine(normalise_url(own_url))

    def event(n: int, state: str, **over) -> dict:
        return {"tenant_id": 1, "source_id": 1, "destination_id": 1, "record_id": n,
                "event_id": f"e{n}",
                "state": state, "headers": "[]", "received_at": n, "window_start": n,
                "attempts": 1, **over}
    with engine.begin() as conn:
        conn.execute(insert(tenants).values(id=1, name="t", created_at=0))
        _add_source(conn, 1, "s", "{}")
        for n in (1, 2, 3):
            conn.execute(insert(records).values(row(scope="hook:s", key=f"e{n}", id=n)))
        conn.execute(insert(hook_events).values(event(1, "filtered", attempts=0, body=b"{}")))
        conn.execute(insert(hook_events).values(event(2, "delivered", delivered_at=5)))
        conn.execute(insert(hook_attempts).values(event_pk=2, number=1, at=5, duration_ms=3,
                                                  status_code=200))
    engine.dispose()

    def refused(state: str) -> bool:
        e = create_engine(normalise_url(own_url))
        at_0021 = "destination_id" in {c["name"] for c in inspect(e).get_columns("hook_events")}
        given = {k: v for k, v in event(3, state).items() if at_0021 or k != "destination_id"}
        try:
            with e.begin() as conn:
                conn.execute(insert(hook_events).values(given))
            with e.begin() as conn:  # it went in: take it out again
                conn.execute(hook_events.delete().where(hook_events.c.event_id == "e3"))
            return False
        except IntegrityError:
            return True
        finally:
            e.dispose()

    def rows() -> list:
        e = create_engine(normalise_url(own_url))
        with e.connect() as conn:
            found = conn.execute(select(hook_events.c.event_id, hook_events.c.state,
                                        hook_events.c.delivered_at, hook_events.c.body)
                                 .order_by(hook_events.c.id)).all()
            found.append(conn.execute(select(hook_attempts.c.event_pk,
                                             hook_attempts.c.status_code)).all())
        e.dispose()
        return [tuple(r) if not isinstance(r, list) else r for r in found]
    assert refused("bogus") and not refused("filtered")
    _to(own_url, "0014_sends", down=True)
    assert rows() == [("e1", "delivered", None, b"{}"), ("e2", "delivered", 5, None),
                      [(2, 200)]]
    assert refused("filtered") and refused("bogus")
    _to(own_url, "0015_filtered_events")
    assert migrate.revision(own_url) == "0015_filtered_events"
    assert not refused("filtered") and refused("bogus")
    engine = create_engine(normalise_url(own_url))
    with engine.begin() as conn:  # a filtered event again, as the relay writes one
        conn.execute(update(hook_events).where(hook_events.c.event_id == "e1")
                     .values(state="filtered"))
    engine.dispose()
    assert rows()[0] == ("e1", "filtered", None, b"{}")


def test_0016_adds_a_sources_rate_and_its_downgrade_drops_it_from_the_options(own_url):
    """0016 up and down with rows on both backends: a source's rate interval and debt are
    columns at 0016 only, an interval under 1 us is refused there, and a downgrade takes the
    `rate` out of the forward options (0015 knows none), the source and its other options
    kept; an upgrade again gives the source no rate."""
    import json

    from sqlalchemy import text, update

    from keystore_service.storage.route_tables import hook_destinations
    forward = {"filter": {"event_types": ["a.*"]}, "rate": {"per_second": 5}}
    engine = create_engine(normalise_url(own_url))
    with engine.begin() as conn:
        conn.execute(insert(tenants).values(id=1, name="t", created_at=0))
        for sid, rate in ((1, 200_000), (2, None)):
            _add_source(conn, sid, f"s{sid}", json.dumps({"forward": forward if rate else {}}),
                        rate_interval_us=rate, rate_tat=123 if rate else None)
        with pytest.raises(IntegrityError), conn.begin_nested():
            conn.execute(update(hook_destinations).where(hook_destinations.c.source_id == 2)
                         .values(rate_interval_us=0))
    engine.dispose()

    def columns() -> set:
        e = create_engine(normalise_url(own_url))
        with e.connect() as conn:
            found = set(conn.execute(text("SELECT * FROM hook_sources")).keys())
        e.dispose()
        return found
    _to(own_url, "0015_filtered_events", down=True)
    assert not {"rate_interval_us", "rate_tat"} & columns()
    e = create_engine(normalise_url(own_url))
    with e.connect() as conn:
        configs = dict(conn.execute(text("SELECT id, config FROM hook_sources")).all())
    e.dispose()
    assert json.loads(configs[1]) == {"forward": {"filter": {"event_types": ["a.*"]}}}
    assert json.loads(configs[2]) == {"forward": {}}
    _to(own_url, "0016_delivery_rates")
    assert {"rate_interval_us", "rate_tat"} <= columns()
    e = create_engine(normalise_url(own_url))
    with e.connect() as conn:
        assert conn.execute(text("SELECT id, rate_interval_us, rate_tat FROM hook_sources "
                                 "ORDER BY id")).all() == [(1, None, None), (2, None, None)]
    e.dispose()


def test_0017_adds_superseded_and_the_versions_and_its_downgrade_undoes_them(own_url):
    """0017 up and down with rows on both backends: `superseded` is a state and
    hook_versions a table at 0017 only; a downgrade makes each superseded event delivered
    (delivered_at still null), drops the stored versions and takes the `ordering` out of the
    forward options (0016 knows none), the other events, options and attempts kept."""
    import json

    from sqlalchemy import inspect, select, text

    from keystore_service.storage.route_tables import hook_versions
    from keystore_service.storage.tables import hook_attempts, hook_events, hook_sources
    forward = {"filter": {"event_types": ["a.*"]},
               "ordering": {"key": "/id", "mode": "newer_wins", "version": "/v"}}
    engine = create_engine(normalise_url(own_url))
    with engine.begin() as conn:
        conn.execute(insert(tenants).values(id=1, name="t", created_at=0))
        _add_source(conn, 1, "s", json.dumps({"forward": forward}))
        for n, state in ((1, "superseded"), (2, "delivered")):
            conn.execute(insert(records).values(row(scope="hook:s", key=f"e{n}", id=n)))
            conn.execute(insert(hook_events).values(
                tenant_id=1, source_id=1, destination_id=1, record_id=n, event_id=f"e{n}",
                state=state, headers="[]", received_at=n, window_start=n, attempts=n - 1,
                body=b"{}", delivered_at=5 if n == 2 else None))
        conn.execute(insert(hook_attempts).values(event_pk=2, number=1, at=5, duration_ms=3,
                                                  status_code=200))
        conn.execute(insert(hook_versions).values(tenant_id=1, destination_id=1,
                                                  ordering_key="sha256:" + "a" * 64,
                                                  version=str(2 ** 63), event_pk=2, at=5))
        with pytest.raises(IntegrityError), conn.begin_nested():  # one version per key
            conn.execute(insert(hook_versions).values(tenant_id=1, destination_id=1,
                                                      ordering_key="sha256:" + "a" * 64,
                                                      version="1", event_pk=1, at=6))
        with pytest.raises(IntegrityError), conn.begin_nested():
            conn.execute(text("UPDATE hook_events SET state = 'bogus' WHERE id = 1"))
    engine.dispose()

    def look() -> tuple:
        e = create_engine(normalise_url(own_url))
        with e.connect() as conn:
            events = [tuple(r) for r in conn.execute(select(
                hook_events.c.event_id, hook_events.c.state, hook_events.c.delivered_at)
                .order_by(hook_events.c.id))]
            attempts = [tuple(r) for r in conn.execute(select(hook_attempts.c.event_pk))]
            config = json.loads(conn.execute(text("SELECT config FROM hook_sources")).scalar())
            tables = set(inspect(conn).get_table_names())
        e.dispose()
        return events, attempts, config, tables
    _to(own_url, "0016_delivery_rates", down=True)
    events, attempts, config, tables = look()
    assert events == [("e1", "delivered", None), ("e2", "delivered", 5)] and attempts == [(2,)]
    assert config == {"forward": {"filter": {"event_types": ["a.*"]}}}
    assert "hook_versions" not in tables
    e = create_engine(normalise_url(own_url))
    with pytest.raises(IntegrityError), e.begin() as conn:  # 0016 knows no superseded
        conn.execute(text("UPDATE hook_events SET state = 'superseded' WHERE id = 1"))
    e.dispose()
    _to(own_url, "0017_ordering")
    assert migrate.revision(own_url) == "0017_ordering"
    e = create_engine(normalise_url(own_url))
    with e.begin() as conn:  # a superseded event again, as the relay writes one
        conn.execute(text("UPDATE hook_events SET state = 'superseded' WHERE id = 1"))
        assert conn.execute(text("SELECT count(*) FROM hook_versions")).scalar() == 0  # none
        # came back (0017's table is keyed by source: 0022 keys it by destination)
    e.dispose()
    assert look()[0][0] == ("e1", "superseded", None)


def test_0018_keeps_a_serial_key_and_its_downgrade_drops_the_serial_ordering(own_url):
    """0018 up and down with rows on both backends: an event's `ordering_key` is a column
    at 0018 only, indexed for the events that have one; a downgrade drops it, makes a parked
    event (queued without a next attempt) due, and takes a serial `ordering` out of the
    forward options (0017 refuses serial), a newer_wins one and the events kept; an upgrade
    again finds every key null."""
    import json

    from sqlalchemy import inspect, select, text

    from keystore_service.storage.tables import hook_events, hook_sources
    orderings = {1: {"key": "/id", "mode": "serial"},
                 2: {"key": "/id", "mode": "newer_wins", "version": "/v"}}
    engine = create_engine(normalise_url(own_url))
    with engine.begin() as conn:
        conn.execute(insert(tenants).values(id=1, name="t", created_at=0))
        for sid, ordering in orderings.items():
            _add_source(conn, sid, f"s{sid}", json.dumps({"forward": {"ordering": ordering}}))
            conn.execute(insert(records).values(row(scope=f"hook:s{sid}", key="e", id=sid)))
            conn.execute(insert(hook_events).values(
                tenant_id=1, source_id=sid, destination_id=sid, record_id=sid, event_id="e",
                state="queued",
                headers="[]", received_at=sid, window_start=1, attempts=0, body=b"{}",
                next_attempt_at=None if sid == 1 else 7,  # the first one parked
                ordering_key="sha256:" + "b" * 64 if sid == 1 else None))
    assert "ix_hook_events_serial" in {i["name"] for i in inspect(engine).get_indexes(
        "hook_events")}
    engine.dispose()

    def look() -> tuple:
        e = create_engine(normalise_url(own_url))
        with e.connect() as conn:
            cols = set(conn.execute(text("SELECT * FROM hook_events")).keys())
            configs = {i: json.loads(c) for i, c in conn.execute(
                text("SELECT id, config FROM hook_sources")).all()}
            events = conn.execute(text("SELECT next_attempt_at FROM hook_events ORDER BY id")
                                  ).scalars().all()
        e.dispose()
        return cols, configs, events
    _to(own_url, "0017_ordering", down=True)
    cols, configs, events = look()
    assert "ordering_key" not in cols and events == [1, 7]  # its received_at: due
    assert configs == {1: {"forward": {}}, 2: {"forward": {"ordering": orderings[2]}}}
    _to(own_url, "0018_serial")
    assert "ordering_key" in look()[0]
    e = create_engine(normalise_url(own_url))
    with e.connect() as conn:
        assert conn.execute(select(hook_events.c.ordering_key)).scalars().all() == [None, None]
    e.dispose()


def test_0019_keeps_the_mode_of_a_key_and_its_downgrade_forgets_newer_wins_keys(own_url):
    """0019 up and down with rows on both backends: at 0019 each keyed event has the mode it
    is held under, 'serial' for those 0018 keyed; a downgrade forgets the keys of newer_wins
    events (0018 would hold them as serial) and makes a parked one due, keeping serial's."""
    from sqlalchemy import text

    from keystore_service.storage.tables import hook_events, hook_sources
    engine = create_engine(normalise_url(own_url))
    key = "sha256:" + "c" * 64
    with engine.begin() as conn:
        conn.execute(insert(tenants).values(id=1, name="t", created_at=0))
        _add_source(conn, 1, "s", "{}")
        for n, mode in enumerate(("serial", "newer_wins", "newer_wins"), start=1):
            conn.execute(insert(records).values(row(scope="hook:s", key=f"e{n}", id=n)))
            conn.execute(insert(hook_events).values(
                tenant_id=1, source_id=1, destination_id=1, record_id=n, event_id=f"e{n}",
                state="queued",
                headers="[]", received_at=10 * n, window_start=1, attempts=0, body=b"{}",
                next_attempt_at=None if n == 3 else 7, ordering_key=key, ordering_mode=mode))
    engine.dispose()

    def look() -> list:
        e = create_engine(normalise_url(own_url))
        with e.connect() as conn:
            cols = ", ".join(c for c in ("ordering_key", "next_attempt_at", "ordering_mode")
                             if c in conn.execute(text("SELECT * FROM hook_events")).keys())
            rows = [tuple(r) for r in conn.execute(
                text(f"SELECT {cols} FROM hook_events ORDER BY id"))]
        e.dispose()
        return rows
    _to(own_url, "0018_serial", down=True)
    assert look() == [(key, 7), (None, 7), (None, 30)]  # e3 was parked: due at received_at
    _to(own_url, "0019_newer_wins_turns")
    assert look() == [(key, 7, "serial"), (None, 7, None), (None, 30, None)]


def test_0020_moves_each_sources_destination_to_a_row_and_its_downgrade_moves_it_back(
        own_url):
    """0020 up and down with rows on both backends: at 0019 a source holds its destination
    and where its forwarding is; at 0020 each source has one destination, `default` at
    position 0, with every one of those values, and the columns left hook_sources; a
    downgrade puts them back on the source as they were, NOT NULL where they were."""
    from sqlalchemy import inspect, text
    moved = ["destination_url", "timeout_seconds", "max_in_flight", "paused_until",
             "last_error", "last_error_at", "last_taken_at", "operator_paused_at",
             "operator_paused_until", "pause_reason", "failing_since", "probe_at",
             "rate_interval_us", "rate_tat"]
    values = {1: ["http://127.0.0.1:1/a", 7, 3, 11, "status 503", 12, 13, 14, 15, "deploy", 16,
                  17, 200_000, 18],
              2: ["http://127.0.0.1:2/b", 30, 9] + [None] * 11}
    _to(own_url, "0019_newer_wins_turns", down=True)
    engine = create_engine(normalise_url(own_url))
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO tenants (id, name, created_at) VALUES (1, 't', 0)"))
        for sid, given in values.items():
            conn.execute(text(
                "INSERT INTO hook_sources (id, tenant_id, name, provider, ingest_hash, sealed, "
                "config, ttl_seconds, retry_window_seconds, keep_body_seconds, state, "
                f"created_at, updated_at, {', '.join(moved)}) VALUES (:id, 1, :name, 'generic',"
                " :h, 'x', '{}', 999999, 3600, 0, 'active', 0, 0, "
                f"{', '.join(':' + c for c in moved)})"),
                {"id": sid, "name": f"s{sid}", "h": f"h{sid}", **dict(zip(moved, given))})
    engine.dispose()

    def rows(sql: str) -> list:
        e = create_engine(normalise_url(own_url))
        with e.connect() as conn:
            found = [tuple(r) for r in conn.execute(text(sql))]
        e.dispose()
        return found
    _to(own_url, "0020_destinations")
    dest = ", ".join(["url"] + moved[1:])
    assert rows(f"SELECT source_id, tenant_id, name, position, {dest} FROM hook_destinations "
                "ORDER BY source_id") == [(sid, 1, "default", 0, *given)
                                          for sid, given in values.items()]
    e = create_engine(normalise_url(own_url))
    assert not set(moved) & {c["name"] for c in inspect(e).get_columns("hook_sources")}
    e.dispose()
    _to(own_url, "0019_newer_wins_turns", down=True)
    assert rows(f"SELECT id, {', '.join(moved)} FROM hook_sources ORDER BY id") == [
        (sid, *given) for sid, given in values.items()]
    e = create_engine(normalise_url(own_url))
    nullable = {c["name"]: c["nullable"] for c in inspect(e).get_columns("hook_sources")}
    assert not inspect(e).has_table("hook_destinations")
    e.dispose()
    assert [nullable[c] for c in moved[:3]] == [False] * 3 and nullable["paused_until"]
    _to(own_url, "0020_destinations")


def test_0021_gives_each_event_its_sources_first_destination_and_its_downgrade_drops_it(
        own_url):
    """0021 up and down with rows on both backends: at 0020 an event names only its source;
    at 0021 it goes to its source's destination at position 0 (not another one the source
    has), which it must name; a downgrade drops the column and keeps the events."""
    from sqlalchemy import inspect, text
    _to(own_url, "0020_destinations", down=True)
    engine = create_engine(normalise_url(own_url))
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO tenants (id, name, created_at) VALUES (1, 't', 0)"))
        for sid in (1, 2):
            conn.execute(text(
                "INSERT INTO hook_sources (id, tenant_id, name, provider, ingest_hash, sealed, "
                "config, ttl_seconds, retry_window_seconds, keep_body_seconds, state, "
                "created_at, updated_at) VALUES (:id, 1, :name, 'generic', :h, 'x', '{}', "
                "999999, 3600, 0, 'active', 0, 0)"), {"id": sid, "name": f"s{sid}",
                                                      "h": f"h{sid}"})
        # source 1's destination at position 0 is made after one at position 1
        for did, sid, position in ((7, 1, 1), (8, 1, 0), (9, 2, 0)):
            conn.execute(text(
                "INSERT INTO hook_destinations (id, tenant_id, source_id, name, position, url, "
                "timeout_seconds, max_in_flight) VALUES (:d, 1, :s, :n, :p, "
                "'http://127.0.0.1/', 10, 4)"), {"d": did, "s": sid, "n": f"d{did}",
                                                 "p": position})
        for n, sid in ((1, 1), (2, 2), (3, 1)):
            conn.execute(insert(records).values(row(scope=f"hook:s{sid}", key=f"e{n}", id=n)))
            conn.execute(text(
                "INSERT INTO hook_events (id, tenant_id, source_id, record_id, event_id, state, "
                "headers, received_at, window_start, attempts) VALUES (:n, 1, :s, :n, :e, "
                "'queued', '[]', :n, :n, 0)"), {"n": n, "s": sid, "e": f"e{n}"})
    engine.dispose()

    def rows() -> list:
        e = create_engine(normalise_url(own_url))
        with e.connect() as conn:
            columns = {c["name"] for c in inspect(e).get_columns("hook_events")}
            chosen = "destination_id" if "destination_id" in columns else "NULL"
            found = [tuple(r) for r in conn.execute(text(
                f"SELECT id, source_id, event_id, {chosen} FROM hook_events ORDER BY id"))]
        e.dispose()
        return found
    _to(own_url, "0021_event_destinations")
    assert rows() == [(1, 1, "e1", 8), (2, 2, "e2", 9), (3, 1, "e3", 8)]
    e = create_engine(normalise_url(own_url))
    with pytest.raises(IntegrityError), e.begin() as conn:
        conn.execute(text("UPDATE hook_events SET destination_id = NULL WHERE id = 1"))
    e.dispose()
    _to(own_url, "0020_destinations", down=True)
    assert rows() == [(1, 1, "e1", None), (2, 2, "e2", None), (3, 1, "e3", None)]
    _to(own_url, "0021_event_destinations")
    assert rows() == [(1, 1, "e1", 8), (2, 2, "e2", 9), (3, 1, "e3", 8)]


def test_0022_keys_each_version_by_its_sources_first_destination_and_back(own_url):
    """0022 up and down with rows on both backends: at 0021 a newer_wins key's version is its
    source's; at 0022 it is its source's first destination's, one per (destination, key);
    two destinations of a source keep a version each for one key; a downgrade keeps the
    first destination's and forgets the other's."""
    from sqlalchemy import text
    key = "sha256:" + "d" * 64
    _to(own_url, "0021_event_destinations", down=True)
    engine = create_engine(normalise_url(own_url))
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO tenants (id, name, created_at) VALUES (1, 't', 0)"))
        conn.execute(text(
            "INSERT INTO hook_sources (id, tenant_id, name, provider, ingest_hash, sealed, "
            "config, ttl_seconds, retry_window_seconds, keep_body_seconds, state, created_at, "
            "updated_at) VALUES (3, 1, 's', 'generic', 'h', 'x', '{}', 999999, 3600, 0, "
            "'active', 0, 0)"))
        conn.execute(text(
            "INSERT INTO hook_destinations (id, tenant_id, source_id, name, position, url, "
            "timeout_seconds, max_in_flight) VALUES (5, 1, 3, 'default', 0, "
            "'http://127.0.0.1/', 10, 4)"))
        conn.execute(text("INSERT INTO hook_versions (tenant_id, source_id, ordering_key, "
                          "version, event_pk, at) VALUES (1, 3, :k, '17', 9, 4)"), {"k": key})
    engine.dispose()

    def versions() -> list:
        e = create_engine(normalise_url(own_url))
        with e.connect() as conn:
            owner = "destination_id" if migrate.revision(own_url) >= "0022" else "source_id"
            found = [tuple(r) for r in conn.execute(text(
                f"SELECT {owner}, ordering_key, version FROM hook_versions ORDER BY 1"))]
        e.dispose()
        return found

    def run(sql: str) -> None:
        e = create_engine(normalise_url(own_url))
        with e.begin() as conn:
            conn.execute(text(sql), {"k": key})
        e.dispose()
    _to(own_url, "0022_destination_versions")
    assert versions() == [(5, key, "17")]
    run("INSERT INTO hook_destinations (id, tenant_id, source_id, name, position, url, "
        "timeout_seconds, max_in_flight) VALUES (6, 1, 3, 'second', 1, 'http://127.0.0.1/', "
        "10, 4)")
    run("INSERT INTO hook_versions (tenant_id, destination_id, ordering_key, version, "
        "event_pk, at) VALUES (1, 6, :k, '3', 10, 5)")
    with pytest.raises(IntegrityError):  # one version per (destination, key)
        run("INSERT INTO hook_versions (tenant_id, destination_id, ordering_key, version, "
            "event_pk, at) VALUES (1, 6, :k, '4', 11, 6)")
    assert versions() == [(5, key, "17"), (6, key, "3")]
    _to(own_url, "0021_event_destinations", down=True)
    assert versions() == [(3, key, "17")]
    _to(own_url, "0022_destination_versions")
    assert versions() == [(5, key, "17")]


def test_0023_lets_an_event_have_a_delivery_per_destination_and_back(own_url):
    """0023 up and down with rows on both backends: at 0022 a record has one event row; at
    0023 one per (record, destination), never two to one destination, and a destination
    may keep its own options and sealed secrets; a downgrade keeps each record's delivery to
    its source's first destination (with its attempts) and drops the later destinations."""
    from sqlalchemy import text
    _to(own_url, "0022_destination_versions", down=True)
    engine = create_engine(normalise_url(own_url))
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO tenants (id, name, created_at) VALUES (1, 't', 0)"))
        conn.execute(text(
            "INSERT INTO hook_sources (id, tenant_id, name, provider, ingest_hash, sealed, "
            "config, ttl_seconds, retry_window_seconds, keep_body_seconds, state, created_at, "
            "updated_at) VALUES (3, 1, 's', 'generic', 'h', 'x', '{}', 999999, 3600, 0, "
            "'active', 0, 0)"))
        conn.execute(text(
            "INSERT INTO hook_destinations (id, tenant_id, source_id, name, position, url, "
            "timeout_seconds, max_in_flight) VALUES (5, 1, 3, 'default', 0, "
            "'http://127.0.0.1/', 10, 4)"))
        conn.execute(insert(records).values(row(scope="hook:s", key="e1", id=1)))
    engine.dispose()

    def run(sql: str) -> None:
        e = create_engine(normalise_url(own_url))
        with e.begin() as conn:
            conn.execute(text(sql))
        e.dispose()

    def event(pk: int, did: int) -> str:
        return ("INSERT INTO hook_events (id, tenant_id, source_id, record_id, event_id, "
                "state, headers, received_at, window_start, attempts, destination_id) VALUES "
                f"({pk}, 1, 3, 1, 'e1', 'delivered', '[]', 1, 1, 1, {did})")

    def deliveries() -> list:
        e = create_engine(normalise_url(own_url))
        with e.connect() as conn:
            found = [tuple(r) for r in conn.execute(text(
                "SELECT e.id, e.destination_id, (SELECT count(*) FROM hook_attempts a WHERE "
                "a.event_pk = e.id) FROM hook_events e ORDER BY e.id"))]
        e.dispose()
        return found
    run(event(1, 5))
    run("INSERT INTO hook_destinations (id, tenant_id, source_id, name, position, url, "
        "timeout_seconds, max_in_flight) VALUES (6, 1, 3, 'crm', 1, 'http://127.0.0.1/', 10, 4)")
    with pytest.raises(IntegrityError):  # at 0022: one row per record
        run(event(2, 6))
    run("DELETE FROM hook_destinations WHERE id = 6")
    _to(own_url, "0023_deliveries")
    run("INSERT INTO hook_destinations (id, tenant_id, source_id, name, position, url, "
        "timeout_seconds, max_in_flight, config, sealed) VALUES (6, 1, 3, 'crm', 1, "
        "'http://127.0.0.1/', 10, 4, '{}', 'y')")
    run(event(2, 6))
    run("INSERT INTO hook_attempts (event_pk, number, at, duration_ms, status_code) VALUES "
        "(1, 1, 5, 3, 200), (2, 1, 5, 3, 200)")
    with pytest.raises(IntegrityError):  # two deliveries of a record to one destination
        run(event(3, 6))
    assert deliveries() == [(1, 5, 1), (2, 6, 1)]
    _to(own_url, "0022_destination_versions", down=True)
    assert deliveries() == [(1, 5, 1)]
    _to(own_url, "0023_deliveries")
    assert deliveries() == [(1, 5, 1)]
