"""Debian's Chromium (/usr/bin/chromium) driven by Playwright, for the page's browser tests
(test_browser.py, test_browser_hooks.py): one browser per module, a fresh page per test,
signing in, and where the screenshots go (test-artifacts/ui/, git-ignored)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("KEYSTORE_TEST_CHROMIUM", "/usr/bin/chromium")
# As root in a sandboxed machine with no network but loopback: no sandbox, no GPU, and no
# background connections (they are refused here, many at a time).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"
WAIT_MS = 20_000  # a slow page on a busy 2-core machine, not a hang


@pytest.fixture(scope="module")
def chromium():
    """One Chromium for this module (closed with it, before other modules' tests run)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Debian's Chromium is required at {CHROMIUM} for the page's browser tests "
                    "(apt-get install chromium; scripts/ensure-chromium does it)", pytrace=False)
    from playwright.sync_api import expect, sync_playwright
    expect.set_options(timeout=WAIT_MS)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                    timeout=60_000)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium):
    context = chromium.new_context(viewport={"width": 1200, "height": 860})
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    yield page
    context.close()


def sign_in(page, served, token: str) -> None:
    """Sign in at `served.url` (a server, or a fixture that has its url) with `token`."""
    page.goto(served.url + "/ui/")
    page.get_by_label("Operator token").fill(token)
    page.get_by_role("button", name="Sign in").click()
