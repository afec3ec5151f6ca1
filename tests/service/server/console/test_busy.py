"""The console of a busy service: 3,000 queries (the paper's credit-card workload) and
a stream of payments. The list keeps only the rows in view in the page however many
queries there are, and still sorts, filters and scrolls to the last one; the charts
move while events arrive. The test ends with a screenshot: into a temporary folder, or
to the file ``SCEMON_CONSOLE_SCREENSHOT`` names (how ``docs/console.png`` is made)."""

from __future__ import annotations

import os
import threading
import time
from itertools import islice
from pathlib import Path

import pytest
from playwright.sync_api import expect

from ecq.evaluation.workload import credit_card_workload
from tests.service.conftest import StartServer
from tests.service.server.console.conftest import OpenConsole, ready

pytestmark = [pytest.mark.browser, pytest.mark.server]

QUERIES = 3000
EVENTS = 40_000
BATCH = 500


def screenshot_path(tmp_path: Path) -> Path:
    wanted = os.environ.get("SCEMON_CONSOLE_SCREENSHOT")
    return Path(wanted) if wanted else tmp_path / "console.png"


def test_thousands_of_queries_and_a_busy_stream(
    start_server: StartServer, console: OpenConsole, tmp_path: Path
) -> None:
    server = start_server()
    client = server.client()
    queries, events = credit_card_workload(n_queries=QUERIES - 2, n_events=EVENTS, seed=7)
    client.register_bulk([{"name": name, "text": text} for name, text in queries])
    names = sorted(name for name, _ in queries)
    page = console(server)
    ready(page)
    count = page.locator("#query-count")
    expect(count).to_have_text("3,000 queries")
    visible = page.locator("#query-rows .qrow:not([hidden])")
    # Only the rows in view, and a few either side, are in the page.
    assert 0 < visible.count() <= 40
    assert page.locator("#query-rows .qrow").count() <= 40

    # Sorted by name, both ways; scrolled to the bottom, the last row is there.
    page.click('.qhead [data-sort="name"]')
    expect(visible.first).to_have_attribute("data-name", names[0])
    page.click('.qhead [data-sort="name"]')
    expect(page.locator('.qhead [data-sort="name"]')).to_have_attribute("aria-sort", "descending")
    expect(visible.first).to_have_attribute("data-name", names[-1])
    page.locator("#query-rows").evaluate("viewport => { viewport.scrollTop = viewport.scrollHeight; }")
    expect(page.locator(f'#query-rows .qrow[data-name="{names[0]}"]:not([hidden])')).to_be_visible()
    assert page.locator("#query-rows .qrow").count() <= 40

    # Filtered by name or by text.
    page.fill("#query-filter", "cc01234")
    expect(count).to_have_text("1 of 3,000")
    expect(visible).to_have_count(1)
    page.fill("#query-filter", "BRND_A, BRND_B, BRND_C")
    expect(count).not_to_have_text("3,000 queries")
    assert visible.count() >= 1
    page.fill("#query-filter", "")
    expect(count).to_have_text("3,000 queries")

    # A stream of payments, posted from a thread while the page is watched, until the
    # picture is taken (or the payments run out).
    failures: list[BaseException] = []
    stop = threading.Event()

    def stream() -> None:
        try:
            for k in range(EVENTS // BATCH):
                if stop.is_set():
                    return
                batch = [e.to_dict() for e in islice(events, BATCH)]
                client.post_events("payments", k, batch)
                time.sleep(0.2)
        except BaseException as err:  # reported by the test below
            failures.append(err)

    poster = threading.Thread(target=stream, name="test-console-stream")
    poster.start()
    try:
        expect(page.locator("#chart-events output")).not_to_have_text("0")
        expect(page.locator("#feed-list li").first).to_be_visible()
        page.click('.qhead [data-sort="matches"]')
        time.sleep(12.0)  # some seconds of the charts moving, for the picture
        page.screenshot(path=str(screenshot_path(tmp_path)))
    finally:
        stop.set()
        poster.join()
    assert not failures, failures
    # Once the stream stops, the busiest query is on top and its count is the service's.
    busiest = max(client.queries(), key=lambda q: (q.matches, q.name))
    assert busiest.matches > 0
    expect(page.locator(f'#query-rows .qrow[data-name="{busiest.name}"] .matches')).to_have_text(
        f"{busiest.matches:,}"
    )
    top = [q.matches for q in client.queries()]
    expect(visible.first.locator(".matches")).to_have_text(f"{max(top):,}")
    assert screenshot_path(tmp_path).stat().st_size > 10_000
