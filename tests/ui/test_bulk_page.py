"""The page's bulk actions through Flask's test client, on both backends: the filter and its
dry run ("N events match"), the confirm step, the job page with its progress bar (a meta
refresh while it runs) and its Cancel button; a form sent twice is one job; bad fields are
a 400 page that starts nothing; another tenant's job is not found."""
from __future__ import annotations

import re
import time

import pytest

from keystore_service.storage.bulk_tables import bulk_jobs
from tests.gateway.support import count

from .hooks_support import create_source, deliver, hooks_settings, pump, text
from .hooks_support import sink as _sink  # noqa: F401 (a fixture)


@pytest.fixture
def ui_settings(database_url):
    return hooks_settings(database_url)


@pytest.fixture
def refusing():
    from tests.gateway.support import Sink
    s = Sink(lambda n, r: 400)
    yield s
    s.close()


@pytest.fixture
def failed(app, operator, tokens, refusing) -> dict:
    """acme's source "shop" with three failed events."""
    source = create_source(operator, tokens["ana"], refusing.url)
    for n in range(3):
        assert deliver(operator.client, source, event_id=f"evt_{n}") == 202
    while pump(app):
        pass
    return source


@pytest.fixture
def ana(browser, tokens):
    browser.sign_in(tokens["ana"])
    return browser


def job_state(operator, job_id: int, until: str = "done") -> dict:
    deadline = time.monotonic() + 20
    while True:
        job = operator.get(f"/v1/jobs/{job_id}")[1]["job"]
        if job["state"] == until or time.monotonic() > deadline:
            return job
        time.sleep(0.05)


def test_count_confirm_and_follow_a_bulk_redelivery(ana, operator, failed):
    page = ana.get("/ui/hooks/bulk", count="1", action="redeliver", state="failed")
    assert page.status_code == 200
    assert "3 events match" in text(ana.html)
    key = re.search(r'name="key" value="([^"]+)"', ana.html).group(1)
    form = {"key": key, "action": "redeliver", "state": "failed", "confirm": "true",
            "csrf_token": ana.csrf}
    sent = ana.post("/ui/hooks/bulk", form)
    assert sent.status_code == 303, ana.html
    job_url = sent.headers["Location"]
    job_id = int(job_url.rsplit("/", 1)[1])
    again = ana.post("/ui/hooks/bulk", form)  # sent twice (a reload): the same job
    assert again.status_code == 303 and again.headers["Location"] == job_url  # one job
    assert job_state(operator, job_id)["done"] == 3
    ana.get(job_url)
    assert "<progress" in ana.html and 'value="3"' in ana.html
    assert "State done : 3 of 3 events handled (3 done, 0 skipped" in text(ana.html)
    assert "Filter: state = failed" in text(ana.html)
    assert 'http-equiv="refresh"' not in ana.html  # it stops refreshing once it ended
    assert "Cancel the job" not in ana.html


def test_a_running_job_refreshes_and_can_be_cancelled(app, ana, operator, failed, op_principal):
    ks = app.extensions["keystore"]
    from keystore_service.domain.bulk import Filter
    job, _ = ks.gateway.bulk.start(op_principal, "redeliver", Filter(), {}, False, None,
                                   background=False)
    ks.gateway.bulk.run(job, limit=1)
    ana.get(f"/ui/hooks/jobs/{job.id}")
    assert 'http-equiv="refresh" content="2"' in ana.html
    assert "1 of 3 events handled" in text(ana.html)
    done = ana.post(f"/ui/hooks/jobs/{job.id}/cancel")
    assert done.status_code == 303
    ana.get(done.headers["Location"])
    assert "State cancelled :" in text(ana.html) and "Cancel asked" in text(ana.html)
    assert ks.gateway.bulk.run(job) is None
    assert operator.get(f"/v1/jobs/{job.id}")[1]["job"]["done"] == 1


def test_a_cancel_after_the_job_ended_says_nothing_was_cancelled(app, ana, operator, failed,
                                                                  op_principal):
    ks = app.extensions["keystore"]
    from keystore_service.domain.bulk import Filter
    job, _ = ks.gateway.bulk.start(op_principal, "redeliver", Filter(), {}, False, None,
                                   background=False)
    ana.get(f"/ui/hooks/jobs/{job.id}")  # the page is open, with its Cancel button
    assert "Cancel the job" in ana.html
    ks.gateway.bulk.run(job)  # and the job ends before the click arrives
    late = ana.post(f"/ui/hooks/jobs/{job.id}/cancel")
    assert late.status_code == 303
    ana.get(late.headers["Location"])
    assert "State done : 3 of 3" in text(ana.html)
    assert "nothing was cancelled" in text(ana.html) and "Cancel asked" not in text(ana.html)


@pytest.fixture
def op_principal(app, tokens):
    return app.extensions["keystore"].auth.authenticate("Bearer " + tokens["ana"])


@pytest.mark.parametrize("query", [
    {"event_type": "a\x00b"}, {"event_type": "x" * 257}, {"received_after": "soon"},
    {"received_after": "2026-12-02T10:00", "received_before": "2026-12-01T10:00"},
    {"action": "delete"}, {"destination": "a\nb"}, {"state": "lost"},
])
def test_bad_fields_are_a_400_page(ana, app, failed, query):
    page = ana.get("/ui/hooks/bulk", count="1", **query)
    assert page.status_code == 400, (query, page.status_code)
    assert count(app, bulk_jobs) == 0


def test_the_confirm_step_is_required_and_nothing_starts_without_it(ana, app, failed):
    ana.get("/ui/hooks/bulk", count="1", action="redeliver")
    key = re.search(r'name="key" value="([^"]+)"', ana.html).group(1)
    assert ana.post("/ui/hooks/bulk", {"key": key, "action": "redeliver"}).status_code == 400
    assert ana.post("/ui/hooks/bulk", {"action": "redeliver", "confirm": "true"}
                    ).status_code == 400
    assert ana.post("/ui/hooks/bulk", {"key": key, "confirm": "true"}, csrf=False
                    ).status_code in (400, 403)
    assert count(app, bulk_jobs) == 0


def test_the_datetime_inputs_are_utc(ana, failed):
    ana.get("/ui/hooks/bulk", count="1", received_after="2000-01-01T00:00")
    assert "3 events match" in text(ana.html)
    ana.get("/ui/hooks/bulk", count="1", received_before="2000-01-01T00:00:00")
    assert "0 events match" in text(ana.html) and "Nothing to do" in text(ana.html)


def test_another_tenants_job_is_not_found(app, browser, tokens, operator, failed):
    status, body, _ = operator.post("/v1/deliveries/bulk", {"action": "redeliver"})
    job_id = body["job"]["id"]
    browser.sign_in(tokens["gus"])
    assert browser.get(f"/ui/hooks/jobs/{job_id}").status_code == 404
    for bad in ("x", "-1", "9" * 30):
        assert browser.get(f"/ui/hooks/jobs/{bad}").status_code == 404
