"""The console in a real browser: register a query from the editor (in each of the three
syntaxes), see a bad one's error at its line and column before it is sent, watch posted
events' matches arrive in the feed and the counters rise, pause and resume the feed by
seq, filter it by query, and delete a query after confirming."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Locator, Page, Route, expect

from api.client import ApiError, Client
from tests.service.conftest import StartServer
from tests.service.server.console.conftest import OpenConsole, ready

pytestmark = [pytest.mark.browser, pytest.mark.server]


def feed_seqs(page: Page) -> list[int]:
    return [
        int(seq)
        for seq in page.locator("#feed-list li").evaluate_all("items => items.map(i => i.dataset.seq)")
    ]


def row(page: Page, name: str) -> Locator:
    return page.locator(f'#query-rows .qrow[data-name="{name}"]:not([hidden])')


def test_register_a_query_in_each_syntax_through_the_page(
    start_server: StartServer, console: OpenConsole
) -> None:
    server = start_server()
    page = console(server)
    ready(page)
    examples = (
        ("scemon", "dinner_and_a_movie"),
        ("sase", "bar_hopping"),
        ("zstream", "splurge_after_dinner"),
    )
    for example, name in examples:
        page.select_option("#q-example", example)
        expect(page.locator("#q-name")).to_have_value(name)
        expect(page.locator("#q-status")).to_contain_text("Valid")
        expect(page.locator("#q-canonical")).to_contain_text("PATTERN")
        page.click("#q-submit")
        expect(page.locator("#q-status")).to_have_text(f"Registered {name}.")
        expect(row(page, name)).to_be_visible()
    # Typed by hand, key by key, as a user would.
    page.fill("#q-name", "typed")
    page.locator("#q-text").press_sequentially("A; B; C WITHIN 90 s")
    expect(page.locator("#q-status")).to_contain_text("Valid: seq over A, B, C, within 1.5 min")
    page.locator("#q-text").press("Control+Enter")
    expect(row(page, "typed")).to_be_visible()
    expect(page.locator("#query-count")).to_have_text("4 queries")
    listed = {q.name: q for q in server.client().queries()}
    assert list(listed) == [name for _, name in examples] + ["typed"]
    assert listed["splurge_after_dinner"].mode == "all" and listed["bar_hopping"].window == 4 * 3600
    assert listed["typed"].text == server.client().validate("A; B; C WITHIN 90 s").text


def test_a_bad_query_shows_its_error_in_place_before_it_is_sent(
    start_server: StartServer, console: OpenConsole
) -> None:
    server = start_server()
    client = server.client()
    client.register("taken", "OR(A)")
    page = console(server)
    ready(page)
    page.fill("#q-name", "late_night")
    page.fill("#q-text", "PATTERN SEQ(A a, B b)\nWHERE a.x >\nWITHIN 5 s")
    status = page.locator("#q-status")
    expect(status).to_contain_text("line 3, column 1")
    expect(status).to_have_class("status bad")
    # The place: line 3 marked in the gutter, the character at column 1 in the text.
    expect(page.locator("#q-code .gutter .bad")).to_have_text("3")
    expect(page.locator("#q-code .backdrop mark")).to_have_text("W")
    expect(page.locator("#q-submit")).to_be_disabled()
    # Nothing was registered by checking.
    assert [q.name for q in client.queries()] == ["taken"]
    with pytest.raises(ApiError):
        client.query("late_night")
    # Mended: the mark goes and Register comes on.
    page.fill("#q-text", "PATTERN SEQ(A a, B b)\nWHERE a.x > b.x\nWITHIN 5 s")
    expect(status).to_contain_text("Valid")
    expect(page.locator("#q-code .backdrop mark")).to_have_count(0)
    expect(page.locator("#q-submit")).to_be_enabled()
    # A name already taken is refused before sending, on the name.
    page.fill("#q-name", "taken")
    expect(status).to_contain_text("already registered")
    expect(page.locator("#q-name")).to_have_class("bad")
    expect(page.locator("#q-submit")).to_be_disabled()
    # An @name that names nothing: marked where it is written.
    page.fill("#q-name", "reads")
    page.fill("#q-text", "SEQ(A, @nobody) WITHIN 5 s")
    expect(status).to_contain_text("@nobody names no registered query")
    expect(page.locator("#q-code .backdrop mark")).to_have_text("@")


def test_matches_appear_in_the_feed_and_the_counters_rise(
    start_server: StartServer, console: OpenConsole
) -> None:
    server = start_server()
    client = server.client()
    client.register("ab", "SEQ(A a, B b) WITHIN 10 s")
    client.register("quiet", "SEQ(C, D) WITHIN 10 s")
    page = console(server)
    ready(page)
    expect(page.locator("#feed-status")).to_have_text("Live: all queries")
    matches = row(page, "ab").locator(".matches")
    expect(matches).to_have_text("0")
    client.post_events(
        "p",
        1,
        [
            {"id": "tx1", "src": "card-1", "type": "A", "start": 1, "attrs": {"amount": 30}},
            {"id": "tx2", "src": "card-1", "type": "B", "start": 2},
        ],
    )
    item = page.locator('#feed-list li[data-query="ab"]')
    expect(item).to_have_count(1)
    expect(item.locator(".event")).to_have_text(["tx1", "tx2"])
    expect(item.locator(".src")).to_have_text("card-1")
    expect(matches).to_have_text("1")
    client.post_events(
        "p",
        2,
        [
            {"id": "tx3", "src": "card-2", "type": "A", "start": 3},
            {"id": "tx4", "src": "card-2", "type": "B", "start": 4},
        ],
    )
    expect(item).to_have_count(2)
    expect(item.first.locator(".event")).to_have_text(["tx3", "tx4"])  # newest first
    expect(matches).to_have_text("2")
    expect(row(page, "ab").locator(".rate")).not_to_have_text("0")
    expect(row(page, "quiet").locator(".matches")).to_have_text("0")
    expect(page.locator('#facts [data-key="matches"] dd')).to_have_text("2")
    expect(page.locator("#headline")).to_contain_text("2 queries · 2 matches")


def test_pause_keeps_the_place_and_resume_continues_from_the_next_seq(
    start_server: StartServer, console: OpenConsole
) -> None:
    server = start_server()
    client = server.client()
    client.register("a", "OR(A)")
    page = console(server)
    ready(page)
    client.post_events("p", 1, [{"src": 1, "type": "A", "start": t} for t in (1, 2)])
    expect(page.locator("#feed-list li")).to_have_count(2)
    page.click("#feed-pause")
    expect(page.locator("#feed-status")).to_contain_text("Paused at #1")
    expect(page.locator("#feed-pause")).to_have_text("Resume")
    client.post_events("p", 2, [{"src": 1, "type": "A", "start": t} for t in (3, 4, 5)])
    expect(row(page, "a").locator(".matches")).to_have_text("5")  # the page is live, the feed is not
    time.sleep(1.0)
    assert feed_seqs(page) == [1, 0]
    page.click("#feed-pause")
    expect(page.locator("#feed-list li")).to_have_count(5)
    assert feed_seqs(page) == [4, 3, 2, 1, 0]  # nothing missed, nothing twice
    client.post_events("p", 3, [{"src": 1, "type": "A", "start": 6}])
    expect(page.locator("#feed-list li")).to_have_count(6)
    assert feed_seqs(page) == [5, 4, 3, 2, 1, 0]


def test_the_feed_filters_by_query(start_server: StartServer, console: OpenConsole) -> None:
    server = start_server()
    client = server.client()
    client.register("a", "OR(A)")
    client.register("b", "OR(B)")
    page = console(server)
    ready(page)
    client.post_events("p", 1, [{"src": 1, "type": "A", "start": 1}, {"src": 1, "type": "B", "start": 2}])
    expect(page.locator("#feed-list li")).to_have_count(2)
    page.fill("#feed-filter", "b")
    page.press("#feed-filter", "Enter")
    expect(page.locator("#feed-status")).to_have_text("Live: b")
    expect(page.locator("#feed-list li")).to_have_count(1)
    client.post_events("p", 2, [{"src": 1, "type": "A", "start": 3}, {"src": 1, "type": "B", "start": 4}])
    expect(page.locator("#feed-list li")).to_have_count(2)
    expect(page.locator("#feed-list li .query")).to_have_text(["b", "b"])
    # A query's name in the list shows its matches in the feed.
    row(page, "a").locator(".name").click()
    expect(page.locator("#feed-filter")).to_have_value("a")
    expect(page.locator("#feed-list li .query")).to_have_text(["a", "a"])


def test_delete_a_query_after_confirming(start_server: StartServer, console: OpenConsole) -> None:
    server = start_server()
    client: Client = server.client()
    client.register("doomed", "OR(A)")
    client.register("kept", "OR(B)")
    page = console(server)
    ready(page)
    dialog = page.locator("#confirm-dialog")
    row(page, "doomed").locator(".del").click()
    expect(dialog).to_be_visible()
    expect(page.locator("#confirm-title")).to_have_text("Delete the query doomed?")
    page.click("#confirm-cancel")
    expect(dialog).to_be_hidden()
    assert client.query("doomed").name == "doomed"
    row(page, "doomed").locator(".del").click()
    page.click("#confirm-ok")
    expect(row(page, "doomed")).to_have_count(0)
    expect(page.locator("#query-message")).to_have_text("Deleted doomed.")
    with pytest.raises(ApiError) as caught:
        client.query("doomed")
    assert caught.value.status == 404
    assert [q.name for q in client.queries()] == ["kept"]


def test_figures_a_newer_service_reports_are_shown(start_server: StartServer, console: OpenConsole) -> None:
    """The console shows every figure ``/v1/stats`` has, known or not: the kernel in use
    and late events (which a newer service reports) appear when the field does. Here
    the real answer is extended on its way to the page."""
    server = start_server()
    page = console(server)

    def newer(route: Route) -> None:
        response = route.fetch()
        figures = response.json()
        figures["kernel"] = "compiled"
        figures["late_events"] = 3
        figures["engine"]["reorder_buffer"] = 12
        route.fulfill(response=response, json=figures)

    page.route("**/v1/stats", newer)
    ready(page)
    expect(page.locator('#facts [data-key="kernel"] dd')).to_have_text("compiled")
    expect(page.locator("#headline")).to_contain_text("kernel compiled")
    late = page.locator('#facts [data-key="late_events"]')
    expect(late.locator("dd")).to_have_text("3")
    expect(late).to_have_class("warn")  # not zero: look at it
    expect(page.locator('#facts [data-key="engine.reorder_buffer"]')).to_have_text("Reorder buffer12")
    # What this service reports itself is there too.
    expect(page.locator('#facts [data-key="store_bytes"] dd')).to_contain_text("KiB")
    expect(page.locator('#facts [data-key="uptime"] dd')).to_contain_text("s")
