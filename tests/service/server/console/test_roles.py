"""The console on a service with tokens: it asks for one (and again when it is refused),
keeps it in the tab, and shows only what the token's role may do; a read-only token's
write is refused by the API even when the page is bypassed."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.service.conftest import StartServer
from tests.service.server.console.conftest import OpenConsole, give_token, ready

pytestmark = [pytest.mark.browser, pytest.mark.server]

TOKENS = "adm-secret:admin,prod-secret:producer,read-secret:reader"

# The page's own fetch, with the token it keeps, as a user at the browser's console could.
REGISTER_FROM_THE_PAGE = """async () => {
  const response = await fetch("v1/queries", {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      Authorization: "Bearer " + sessionStorage.getItem("scemon.token"),
    },
    body: JSON.stringify({ name: "sneaky", text: "OR(A)" }),
  });
  return [response.status, (await response.json()).detail.message];
}"""


def test_a_read_only_token_sees_no_writes_and_the_api_refuses_them(
    start_server: StartServer, console: OpenConsole
) -> None:
    server = start_server(tokens=TOKENS)
    admin = server.client("adm-secret")
    admin.register("a", "OR(A)")
    admin.post_events("p", 1, [{"id": "e1", "src": 1, "type": "A", "start": 1}])
    page = console(server)
    # Asked for a token; a wrong one is refused and asked for again.
    give_token(page, "guess")
    expect(page.locator("#token-dialog")).to_be_visible()
    expect(page.locator("#token-error")).to_contain_text("That token was refused: unknown bearer token")
    give_token(page, "read-secret")
    ready(page)
    expect(page.locator("#role")).to_have_text("role: reader")
    # What a reader may do: see the queries, the figures and the matches (over the
    # WebSocket, with the token as a subprotocol)...
    expect(page.locator('#query-rows .qrow[data-name="a"]:not([hidden])')).to_be_visible()
    expect(page.locator('#feed-list li[data-query="a"] .event')).to_have_text("e1")
    expect(page.locator('#facts [data-key="matches"] dd')).to_have_text("1")
    # ...and not register or delete: no editor, no Delete buttons.
    expect(page.locator("#editor")).to_be_hidden()
    expect(page.locator("#query-rows .del")).to_have_count(0)
    # The API refuses the write whoever sends it: the page's own fetch, or anyone.
    status, message = page.evaluate(REGISTER_FROM_THE_PAGE)
    assert status == 403 and "needs the role admin; this token has the role reader" in message
    response = httpx.post(
        f"{server.url}/v1/queries",
        json={"name": "sneaky", "text": "OR(A)"},
        headers={"Authorization": "Bearer read-secret"},
    )
    assert response.status_code == 403
    delete = httpx.delete(f"{server.url}/v1/queries/a", headers={"Authorization": "Bearer read-secret"})
    assert delete.status_code == 403
    assert [q.name for q in admin.queries()] == ["a"]
    # The token is this tab's; forgetting it asks again.
    page.click("#forget-token")
    expect(page.locator("#token-dialog")).to_be_visible()


def test_each_role_sees_what_it_may_do(start_server: StartServer, console: OpenConsole) -> None:
    server = start_server(tokens=TOKENS)
    server.client("adm-secret").register("a", "OR(A)")
    producer = console(server, token="prod-secret")
    ready(producer)
    expect(producer.locator("#role")).to_have_text("role: producer")
    expect(producer.locator("#editor")).to_be_hidden()
    expect(producer.locator("#feed")).to_be_hidden()  # a producer may not read matches
    expect(producer.locator('#query-rows .qrow[data-name="a"]:not([hidden])')).to_be_visible()
    expect(producer.locator("#query-rows .del")).to_have_count(0)
    admin = console(server, token="adm-secret")
    ready(admin)
    expect(admin.locator("#role")).to_have_text("role: admin")
    expect(admin.locator("#editor")).to_be_visible()
    expect(admin.locator("#feed")).to_be_visible()
    expect(admin.locator('#query-rows .qrow[data-name="a"]:not([hidden]) .del')).to_be_visible()
