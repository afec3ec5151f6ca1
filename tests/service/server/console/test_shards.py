"""The console of a shard told its cluster (SCEMON_CLUSTER) shows a shard selector that
opens another shard's console; a shard alone shows none."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.service.conftest import Server, StartServer
from tests.service.server.console.conftest import OpenConsole, ready

pytestmark = [pytest.mark.browser, pytest.mark.server]


def test_the_shard_selector_opens_another_shards_console(tmp_path: Path, console: OpenConsole) -> None:
    first, second = Server(tmp_path / "a", {}), Server(tmp_path / "b", {})
    try:
        for server in (first, second):
            server.env = {"SCEMON_TOKENS": "", "SCEMON_CLUSTER": f"{first.url},{second.url}"}
            server.start()
        page = console(first)
        ready(page)
        select = page.locator("#shard")
        expect(select).to_have_attribute("data-shards", "2")
        expect(select).to_be_visible()
        expect(select.locator("option")).to_have_text(
            [f"shard 0 of 2: {first.url}", f"shard 1 of 2: {second.url}"]
        )
        expect(select).to_have_value(first.url)
        select.select_option(second.url)
        page.wait_for_url(second.url + "/")
        ready(page)
        expect(page.locator("#shard")).to_have_value(second.url)
    finally:
        first.stop()
        second.stop()


def test_a_shard_alone_shows_no_selector(start_server: StartServer, console: OpenConsole) -> None:
    page = console(start_server())
    ready(page)
    expect(page.locator("#shard")).to_have_attribute("data-shards", "0")  # asked, and told none
    expect(page.locator("#shard")).to_be_hidden()
