"""What the page's tests through Flask's test client share: the scope and record links
they use, the API's open reviews, every form of a page, and the edge values every form and
query field is probed with (and what a calm answer to them is)."""
from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import quote

SCOPE = "create_invoice"

def record_url(key: str, scope: str = SCOPE) -> str:
    return f"/ui/record?scope={scope}&key={key}"


def open_reviews(http, **filters) -> list:
    status, body, _ = http.get("/v1/reviews", **filters)
    assert status == 200, body
    return body["reviews"]


class Forms(HTMLParser):
    """Every <form>: its method, and the hidden fields it carries."""

    def __init__(self):
        super().__init__()
        self.forms: list[dict] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.forms.append({"method": (a.get("method") or "get").lower(),
                               "action": a.get("action"), "hidden": {}})
        elif tag == "input" and a.get("type") == "hidden" and self.forms:
            self.forms[-1]["hidden"][a.get("name")] = a.get("value")


def forms(html: str) -> list[dict]:
    parser = Forms()
    parser.feed(html)
    return parser.forms


EDGES = {
    "superscript two": "%C2%B2", "arabic-indic two": "%D9%A2", "fullwidth one": "%EF%BC%91",
    "2^63": "9223372036854775808", "forty nines": "9" * 40, "negative": "-1", "zero": "0",
    "CR/LF": "%2Fui%2F%0D%0ASet-Cookie:%20x=1", "LF": "a%0Ab", "NUL": "%00",
    "lone surrogate": "%ED%A0%80", "invalid UTF-8": "%FF%FE", "long": "x" * 20_000,
    "blank": "%20%09", "empty": "", "markup": "%3Cscript%3Ex%3C%2Fscript%3E",
}
SERVER_ERROR = re.compile(r"Something went wrong|could not be shown|Traceback")


def query(fields: dict, name: str, edge: str) -> str:
    return "&".join(f"{k}={edge if k == name else quote(v, safe='')}"
                    for k, v in fields.items())


def assert_a_calm_page(resp, what) -> None:
    assert resp.status_code < 500 and resp.mimetype == "text/html", what
    assert not SERVER_ERROR.search(resp.get_data(as_text=True)), what
    for name, value in resp.headers.items():
        assert "\r" not in value and "\n" not in value and "\x00" not in value, (what, name)
