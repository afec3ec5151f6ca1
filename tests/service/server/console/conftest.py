"""A real headless Chromium driving the console of a real server.

The browser is the distribution's (``/usr/bin/chromium``, Debian's ``chromium``
package, which ``make install`` installs), driven by the ``playwright`` package; its own
browser downloads are never used. One browser per test module, with a fresh profile
directory; a fresh page (and so a fresh sessionStorage) per console opened. A page that
throws an uncaught JavaScript error or logs one fails its test.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, ConsoleMessage, Error, Page, expect, sync_playwright

from tests.service.conftest import Server

CHROMIUM = Path(os.environ.get("SCEMON_CHROMIUM", "/usr/bin/chromium"))
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1440, "height": 1000}

# The console polls every one or two seconds; a server on two busy cores may take a few.
expect.set_options(timeout=20_000)

OpenConsole = Callable[..., Page]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"no Chromium at {CHROMIUM}: `make install` installs Debian's chromium (or set SCEMON_CHROMIUM)"
        )
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=str(CHROMIUM),
            args=ARGS,
            headless=True,
            viewport=VIEWPORT,  # type: ignore[arg-type]
        )
        yield context
        context.close()


@pytest.fixture
def console(browser: BrowserContext) -> Iterator[OpenConsole]:
    """``console(server)`` → a page showing the server's console, once it has started
    (with auth on: once the token dialog is up, see ``token=``)."""
    pages: list[tuple[Page, list[str]]] = []

    def open_console(server: Server, token: str | None = None) -> Page:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(f"uncaught: {err}"))
        page.on("console", lambda message: _log_error(message, errors))
        pages.append((page, errors))
        page.goto(server.url + "/")
        if token is not None:
            give_token(page, token)
        return page

    yield open_console
    problems = []
    for page, errors in pages:
        try:
            page.close()
        except Error:
            pass
        problems += errors
    assert not problems, "the page logged errors:\n" + "\n".join(problems)


def _log_error(message: ConsoleMessage, errors: list[str]) -> None:
    # A 4xx the console asked for (a query that does not validate, a refused token) is
    # logged by the browser as a failed resource: expected, and shown on the page.
    if message.type == "error" and "Failed to load resource" not in message.text:
        errors.append(f"console: {message.text}")


def give_token(page: Page, token: str) -> None:
    """Answer the console's token dialog."""
    dialog = page.locator("#token-dialog")
    expect(dialog).to_be_visible()
    page.fill("#token-input", token)
    page.click("#token-form button[type=submit]")


def ready(page: Page) -> None:
    """Wait until the console knows who it talks to and has started its pollers."""
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
