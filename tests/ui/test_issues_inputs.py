"""The Issues section's forms and query with values at the edges of their types (as
test_inputs.py does for the other views): a page, 400 where the value cannot be used, never
a 500; no POST without the CSRF token; an unknown issue or channel is 404; both backends."""
from __future__ import annotations

from .conftest import mismatch
from .support import EDGES, SCOPE, assert_a_calm_page, query

FIELDS = {"/ui/issues/act": {"issue_id": "1", "action": "acknowledge"},
          "/ui/issues/test": {"channel": "ops"}}


def _issue(app, operator):
    mismatch(operator, SCOPE, "evt_1")  # a review: reviews_waiting opens
    app.extensions["keystore"].gateway.issues.watch()
    return app.extensions["keystore"].gateway.issues.page(1, None, None)[0]


def test_no_value_of_any_field_makes_a_server_error(app, browser, tokens, operator):
    issue = _issue(app, operator)
    browser.sign_in(tokens["ana"])
    for label, edge in EDGES.items():
        assert_a_calm_page(browser.client.get(f"/ui/issues?{query({'state': ''}, 'state', edge)}"),
                           ("/ui/issues", label))
    for path, fields in FIELDS.items():
        for name in [*fields, "csrf_token"]:
            for label, edge in EDGES.items():
                browser.get("/ui/issues")
                form = {**fields, "csrf_token": browser.csrf}
                resp = browser.client.post(path, data=query(form, name, edge),
                                           content_type="application/x-www-form-urlencoded")
                assert_a_calm_page(resp, (path, name, label))
    again = app.extensions["keystore"].gateway.issues.page(1, None, None)[0]
    assert (again.id, again.state) == (issue.id, "open")  # nothing was changed


def test_the_buttons_act_and_need_the_csrf_token(app, browser, tokens, operator):
    issue = _issue(app, operator)
    browser.sign_in(tokens["ana"])
    page = browser.get("/ui/issues").get_data(as_text=True)
    assert f'id="issue-{issue.id}"' in page and "reviews_waiting" in page
    assert "/ui/?scope=" in page.replace("&amp;", "&")  # the reviews behind it
    refused = browser.post("/ui/issues/act", {"issue_id": str(issue.id),
                                              "action": "acknowledge"}, csrf=False)
    assert refused.status_code in (400, 403)
    done = browser.post("/ui/issues/act", {"issue_id": str(issue.id), "action": "ignore"})
    assert done.status_code == 303
    shown = app.extensions["keystore"].gateway.issues.page(1, None, None)[0]
    assert shown.state == "ignored"
    browser.get("/ui/issues")
    assert browser.post("/ui/issues/act", {"issue_id": str(issue.id + 1),
                                           "action": "resolve"}).status_code == 404
    assert browser.post("/ui/issues/test", {"channel": "nope"}).status_code == 404
