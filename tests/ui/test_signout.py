"""Signing out ends the session in the database (issue 13): a copy of the cookie, taken
before, is refused afterwards by every worker and instance, on both backends; and what else
a stale cookie could still reach."""
from __future__ import annotations

import pytest
from itsdangerous import URLSafeSerializer
from sqlalchemy import func, select

from keystore_service.app import create_app
from keystore_service.storage.tables import ui_sessions

from .conftest import Browser, mismatch
from .support import SCOPE, open_reviews, record_url

COOKIE = "keystore_ui"


def cookie_of(browser: Browser) -> str:
    return browser.client.get_cookie(COOKIE, path="/ui").value


def with_cookie(app, value: str) -> Browser:
    """Another browser (or machine) that carries a copy of a cookie."""
    copy = Browser(app.test_client())
    copy.client.set_cookie(COOKIE, value, path="/ui")
    return copy


@pytest.fixture
def second_instance(ui_settings, clock):
    """A second service on the same database: another worker, another host."""
    other = create_app(ui_settings, clock)
    yield other
    other.extensions["keystore"].database.engine.dispose()


def assert_signed_out(copy: Browser, reason: str = "signed_out") -> None:
    resp = copy.get("/ui/")
    assert resp.status_code == 303 and f"reason={reason}" in resp.headers["Location"]
    copy.get(resp.headers["Location"])
    assert 'name="token"' in copy.html and "Sign out" not in copy.html
    assert {"signed_out": "You are signed out.", "revoked": "token was revoked"}[reason] \
        in copy.html


def test_a_copied_cookie_is_refused_after_sign_out_on_every_instance(
        app, second_instance, browser, acme, operator, tokens):
    mismatch(acme, SCOPE, "evt_1")
    browser.sign_in(tokens["ana"])
    browser.get("/ui/")
    copied = cookie_of(browser)
    here, there = with_cookie(app, copied), with_cookie(second_instance, copied)
    assert here.get("/ui/").status_code == 200 and there.get("/ui/").status_code == 200
    here.get(record_url("evt_1"))  # a form of the copy, left open
    assert browser.post("/ui/signout").status_code == 303
    assert_signed_out(with_cookie(app, copied))
    assert_signed_out(with_cookie(second_instance, copied))
    # the copy's open form: back to the sign-in page, nothing changed
    resp = here.post("/ui/resolve", {"scope": SCOPE, "key": "evt_1", "action": "dismiss"})
    assert resp.status_code == 303 and "reason=signed_out" in resp.headers["Location"]
    assert len(open_reviews(operator)) == 1
    resp = with_cookie(app, copied).get("/ui/signin")
    assert resp.status_code == 200  # a signed-out page, not a redirect to the queue


def test_signing_in_again_does_not_revive_an_old_copy(app, browser, tokens):
    browser.sign_in(tokens["ana"])
    browser.get("/ui/")
    old = cookie_of(browser)
    browser.post("/ui/signout")
    browser.sign_in(tokens["ana"])
    assert browser.get("/ui/").status_code == 200
    assert_signed_out(with_cookie(app, old))
    # the old copy's own sign-out form ends nothing but itself
    stale = with_cookie(app, old)
    stale.get("/ui/signin")
    stale.post("/ui/signout")
    assert browser.get("/ui/").status_code == 200


def test_signing_out_ends_that_session_only(app, tokens):
    first, second = Browser(app.test_client()), Browser(app.test_client())
    first.sign_in(tokens["ana"])
    second.sign_in(tokens["ana"])  # the same operator in another browser
    first.get("/ui/")
    first.post("/ui/signout")
    assert first.get("/ui/").status_code == 303
    assert second.get("/ui/").status_code == 200


def test_a_cookie_without_a_session_row_is_refused(app, browser, tokens, clock):
    """A cookie signed with the right key but naming no session (as cookies did before
    sessions were kept in the database) does not sign anyone in."""
    browser.sign_in(tokens["ana"])
    key = app.extensions["keystore"].secrets.get_or_create("ui_session_key", lambda: "")
    signer = URLSafeSerializer(key, salt="keystore-ui-session")
    fields = signer.loads(cookie_of(browser))
    for sid in (None, "made-up", ""):
        forged = signer.dumps({**fields, "sid": sid})
        assert_signed_out(with_cookie(app, forged))
    before_sessions = {k: v for k, v in fields.items() if k != "sid"}
    assert_signed_out(with_cookie(app, signer.dumps(before_sessions)))
    assert browser.get("/ui/").status_code == 200  # the real one is untouched


def test_a_revoked_token_ends_copies_too(app, browser, tokens, clock):
    browser.sign_in(tokens["ana"])
    browser.get("/ui/")
    copied = cookie_of(browser)
    app.extensions["keystore"].accounts.revoke_token("acme", "ana", clock())
    assert_signed_out(with_cookie(app, copied), "revoked")
    assert_signed_out(browser, "revoked")


def session_rows(app) -> int:
    with app.extensions["keystore"].database.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(ui_sessions)).scalar_one()


def test_sessions_are_forgotten_when_they_end(app, tokens, clock):
    browsers = [Browser(app.test_client()) for _ in range(3)]
    for b in browsers:
        b.sign_in(tokens["ana"])
    assert session_rows(app) == 3
    browsers[0].get("/ui/")
    browsers[0].post("/ui/signout")
    assert session_rows(app) == 2
    clock.advance(13 * 3600 + 1)  # past the 12-hour limit, and an hour for clock skew
    browsers[0].sign_in(tokens["ana"])  # a sign-in clears out sessions that can no longer live
    assert session_rows(app) == 1
    assert browsers[1].get("/ui/").status_code == 303
