"""docs/operations.md tells a newcomer which buttons to press: those names must be the
page's, and its screenshot must be there."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = (REPO / "docs" / "operations.md").read_text()
TEMPLATES = "\n".join(p.read_text() for p in (
    REPO / "keystore_service" / "web" / "ui" / "templates" / "ui").glob("*.html"))


def test_every_button_and_page_the_walk_through_names_is_on_the_page():
    walk = PAGE.split("## Walk-through", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"\*\*([A-Z][A-Za-z ]+?)\*\*", walk))
    assert {"Sign in", "Review queue", "Dismiss", "Expire record", "Mark succeeded",
            "Mark failed", "Release", "Search", "Filter"} <= named
    for name in named:
        assert re.search(rf">\s*{re.escape(name)}\s*<", TEMPLATES), name
    for label in re.findall(r"\*([A-Z][a-z]+(?: [a-z]+)*)\*", walk):
        if label in ("Operator token", "Scope", "Resource id", "Status code", "Body"):
            assert f">{label}<" in TEMPLATES or f">{label} <" in TEMPLATES, label


def test_the_screenshot_is_committed_and_small():
    shot = REPO / "docs" / "img" / "operations-page.png"
    assert "](img/operations-page.png)" in PAGE
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size < 300_000


def test_the_webhooks_section_names_the_pages_buttons_and_has_its_screenshots():
    part = PAGE.split("### The Webhooks section", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"\*\*([A-Z][A-Za-z ]+?)\*\*", part))
    assert {"Webhooks", "Failed deliveries", "Redeliver", "Redeliver anyway", "Dismiss",
            "Delivery failed", "Expire record"} <= named
    assert "**Held: a changed body under this event id**" in part
    assert ">Held: a changed body under this event id<" in TEMPLATES
    for name in named:
        assert re.search(rf">\s*{re.escape(name)}\s*<", TEMPLATES), name
    for label in ("Queued", "Being forwarded", "Failed", "Pause", "Health", "Source", "State",
                  "Yes, deliver it again"):
        assert f"*{label}*" in part and re.search(rf">\s*{re.escape(label)}\s*<", TEMPLATES), \
            label
    for name in ("webhooks-page.png", "webhooks-held.png"):
        shot = REPO / "docs" / "img" / name
        assert f"](img/{name})" in part
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size < 300_000
