"""The attacker's pass over the bulk actions, both backends: globs with "[", "**", LIKE's own
wildcards, huge, NUL; time ranges reversed, empty, at the calendar's limits and past them;
job ids that are not numbers or beyond BIGINT; another tenant's source and job; keys and
fields the schema refuses. Each is a 4xx that changes nothing, or a count that matches only
what it should."""
from __future__ import annotations

import pytest

from keystore_service.storage.bulk_tables import bulk_jobs

from .bulk_support import bulk, events
from .support import count, create_source


@pytest.fixture
def shop(gw, sink):
    source = create_source(gw, gw.token, sink.url)
    events(gw, source, 2, kind="a[1]")
    events(gw, source, 1, kind="a_1%", first=5)
    return source


def matched(gw, token=..., **f):
    status, body, _ = gw.post("/v1/deliveries/bulk", {"action": "retry", "filter": f,
                                                      "dry_run": True}, token=token)
    return status, body


@pytest.mark.parametrize("glob, n", [("a[1]", 2), ("a[12]", 0), ("a?1?", 3), ("**", 3),
                                     ("a*", 3), ("a_1%", 1), ("a%", 0), ("a_*", 1),
                                     ("*]", 2), ("[", 0), ("\\*", 0), ("A*", 0)])
def test_globs_match_as_written(gw, shop, glob, n):
    status, body = matched(gw, event_type=glob)
    assert status == 200 and body["matched"] == n, (glob, body)


@pytest.mark.parametrize("f", [
    {"event_type": ""}, {"event_type": "a\x00"}, {"event_type": "x" * 257},
    {"event_type": "a\nb"}, {"event_type": 5}, {"last_error": "\x7f"},
    {"received_after": "2026-12-02T10:00:00Z", "received_before": "2026-12-01T10:00:00Z"},
    {"received_after": "2026-12-02T10:00:00Z", "received_before": "2026-12-02T10:00:00Z"},
    {"received_after": "2026-02-30T00:00:00Z"}, {"received_after": "10000-01-01T00:00:00Z"},
    {"received_after": "2026-12-02"}, {"received_after": "2026-12-02T10:00:00"},
    {"received_after": "２０２６-12-02T10:00:00Z"}, {"received_after": 1733000000},
    {"received_after": "0000-12-31T23:59:59Z"}, {"destination": "Other dest"},
    {"source": "Shop"}, {"source": "x" * 65}, {"state": "lost"}, {"tenant": "globex"},
])
def test_bad_filters_are_400_and_start_nothing(gw, gw_app, shop, f):
    status, body = matched(gw, **f)
    assert status == 400 and body["error"]["code"] == "invalid_request", (f, body)
    status, _, _ = bulk(gw, {"action": "retry", "filter": f})
    assert status == 400
    assert count(gw_app, bulk_jobs) == 0


def test_the_calendars_limits_are_a_range(gw, shop):
    status, body = matched(gw, received_after="0001-01-01T00:00:00Z",
                           received_before="9999-12-31T23:59:59.999999Z")
    assert status == 200 and body["matched"] == 3
    status, body = matched(gw, received_after="9999-12-31T23:59:59+23:59")
    assert status == 200 and body["matched"] == 0


@pytest.mark.parametrize("body", [
    {"action": "delete"}, {"action": "retry", "force": True}, {"action": "dismiss", "force": 1},
    {"action": "redeliver", "dry_run": "yes"}, {"filter": {}}, {"action": "retry", "x": 1},
    {"action": "retry", "filter": []},
])
def test_bad_requests_are_400(gw, gw_app, shop, body):
    status, answer, _ = gw.post("/v1/deliveries/bulk", body)
    assert status == 400, (body, answer)
    assert count(gw_app, bulk_jobs) == 0


@pytest.mark.parametrize("key", ["", " lead", "trail ", "é", "k" * 256, "a\tb"])
def test_bad_idempotency_keys_are_400(gw, gw_app, shop, key):
    status, _, _ = bulk(gw, {"action": "retry"}, key=key)
    assert status == 400
    assert count(gw_app, bulk_jobs) == 0


def test_another_tenants_sources_and_jobs_are_out_of_reach(gw, shop, op):
    status, body = matched(gw, token=op["globex"], source="shop")
    assert status == 200 and body["matched"] == 0
    status, body, _ = bulk(gw, {"action": "retry", "filter": {"source": "shop"}})
    job_id = body["job"]["id"]
    for path in (f"/v1/jobs/{job_id}", ):
        assert gw.get(path, token=op["globex"])[0] == 404
    assert gw.post(f"/v1/jobs/{job_id}/cancel", token=op["globex"])[0] == 404
    assert gw.get(f"/v1/jobs/{job_id}", token=op["client"])[0] == 403
    assert gw.post("/v1/deliveries/bulk", {"action": "retry"}, token=op["client"])[0] == 403


@pytest.mark.parametrize("job_id", ["abc", "-1", "1.0", str(2**63), "9" * 30, "%00", "１"])
def test_job_ids_that_are_not_ours_are_404(gw, job_id):
    assert gw.get(f"/v1/jobs/{job_id}")[0] == 404
    assert gw.post(f"/v1/jobs/{job_id}/cancel")[0] == 404
