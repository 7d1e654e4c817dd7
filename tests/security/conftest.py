"""The dashboard suite's browser fixtures (Debian's Chromium through Playwright), for the XSS tests here."""

from tests.dashboard.conftest import browser, errors, page, pages

__all__ = ["browser", "errors", "page", "pages"]
