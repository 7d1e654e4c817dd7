"""Browser fixtures (a pytest plugin that tests/conftest.py loads): Debian's Chromium driven by Playwright, for the
dashboard tests and the security tests that open the dashboard against a real server (the `running` fixture)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Literal

import pytest
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page, sync_playwright

from tests.support.system import needs

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
Scheme = Literal["light", "dark"]
Pages = Callable[..., Page]  # (color_scheme="light", clipboard=False) -> a fresh page with its own context


@pytest.fixture(scope="module")
@needs("Chromium (/usr/bin/chromium, driven by Playwright)")
def browser() -> Iterator[Browser]:
    # Module scope, not session: Playwright's sync API runs an event loop on the main thread while it is open, and
    # the rest of the suite calls anyio.run / asyncio.run there.
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def errors() -> list[str]:
    """Script errors and console errors any page met: a test that expects none asserts it stays empty."""
    return []


@pytest.fixture
def pages(browser: Browser, errors: list[str]) -> Iterator[Pages]:
    contexts: list[BrowserContext] = []

    def make(color_scheme: Scheme = "light", clipboard: bool = False) -> Page:
        permissions = ["clipboard-read", "clipboard-write"] if clipboard else []
        context = browser.new_context(
            viewport={"width": 1280, "height": 800}, color_scheme=color_scheme, permissions=permissions
        )
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(f"page error: {error}"))

        def console(message: ConsoleMessage) -> None:
            if message.type == "error":
                errors.append(f"console: {message.text}")

        page.on("console", console)
        return page

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def page(pages: Pages) -> Page:
    return pages()
