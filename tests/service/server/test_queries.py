"""Query registration over REST: one, a thousand in bulk (all or nothing), list, show,
delete, and the errors that name the place of the mistake."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from api.client import ApiError
from ecq.evaluation import workload
from tests.service.conftest import Server, StartServer
from tests.service.server.feeds import query_json


def test_bulk_registers_a_thousand_queries(start_server: StartServer) -> None:
    server = start_server()
    client = server.client()
    specs = workload.sequence_queries(workload.Workload(n_queries=1000, n_classes=50, seed=3))
    started = time.monotonic()
    created = client.register_bulk([{"name": name, "text": text} for name, text in specs])
    assert time.monotonic() - started < 30
    assert [q.name for q in created] == [name for name, _ in specs]
    listed = client.queries()
    assert [q.name for q in listed] == [name for name, _ in specs]
    first = client.query(specs[0][0])
    assert first.kind == "seq" and first.mode == "recent" and len(first.classes) == 3
    assert first.window is not None and 200 * 60 <= first.window <= 240 * 60
    assert first.matches == 0 and first.last_match is None
    assert "scemon_queries 1000.0" in client.metrics()


def test_a_bulk_call_with_one_bad_query_registers_none(shared_server: Server) -> None:
    client = shared_server.client()
    before = [q.name for q in client.queries()]
    entries = [{"name": f"bulk{i}", "text": "SEQ(A, B) WITHIN 10 s"} for i in range(5)]
    entries[3]["text"] = "SEQ(A, B WITHIN 10 s"
    with pytest.raises(ApiError) as caught:
        client.register_bulk(entries)
    err = caught.value
    assert err.status == 422
    assert err.detail["index"] == 3 and err.detail["query"] == "bulk3"
    assert err.detail["line"] == 1 and err.detail["column"] == 10
    assert "query 3 ('bulk3')" in err.message
    # A name taken twice in one call: 409, none registered.
    entries[3]["text"] = "SEQ(A, B) WITHIN 10 s"
    entries[4]["name"] = "bulk0"
    with pytest.raises(ApiError) as caught:
        client.register_bulk(entries)
    assert caught.value.status == 409 and caught.value.detail["index"] == 4
    # A query that the engine refuses after others were registered (a semantic error).
    entries[4] = {"name": "bulk4", "text": "SEQ(A a, B b) WHERE c.x > 1 WITHIN 10 s"}
    with pytest.raises(ApiError) as caught:
        client.register_bulk(entries)
    assert caught.value.status == 422 and caught.value.detail["index"] == 4
    assert [q.name for q in client.queries()] == before
    # The same call without the mistake registers all of them.
    entries[4] = {"name": "bulk4", "text": "A; B WITHIN 1 min"}
    assert len(client.register_bulk(entries)) == 5


def test_register_show_and_delete_one_query(shared_server: Server) -> None:
    client = shared_server.client()
    text = "PATTERN Sequence WITH CNMA_A, RSTR_B, BAR_C\nWHERE [symbol] $20 < CNMA_A.payment < $50\nWITHIN 5 hours"
    created = client.register("dinner", text)
    assert created.kind == "seq" and created.classes == ["BAR_C", "CNMA_A", "RSTR_B"]
    assert created.window == 5 * 3600 and created.mode == "recent"
    assert created.text.startswith("PATTERN")
    by_pattern = client.register("dinner_json", pattern=query_json(text))
    assert by_pattern.text == created.text
    assert client.query("dinner") == created
    client.delete_query("dinner")
    with pytest.raises(ApiError) as caught:
        client.query("dinner")
    assert caught.value.status == 404 and "dinner" in caught.value.message
    with pytest.raises(ApiError) as caught:
        client.delete_query("dinner")
    assert caught.value.status == 404


def test_a_taken_name_is_409(shared_server: Server) -> None:
    client = shared_server.client()
    client.register("taken", "OR(A, B)")
    with pytest.raises(ApiError) as caught:
        client.register("taken", "OR(C, D)")
    assert caught.value.status == 409 and "'taken'" in caught.value.message
    assert client.query("taken").classes == ["A", "B"]


def test_bad_query_text_is_422_with_line_and_column(shared_server: Server) -> None:
    response = httpx.post(
        f"{shared_server.url}/v1/queries", json={"name": "bad", "text": "SEQ(A, B)\nWHERE A.x >\nWITHIN 5 s"}
    )
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert (detail["line"], detail["column"]) == (3, 1)
    assert "line 3, column 1" in detail["message"]
    # A query that parses but does not make sense: located too.
    response = httpx.post(f"{shared_server.url}/v1/queries", json={"name": "bad", "text": "SEQ(A, B)"})
    assert response.status_code == 422 and "WITHIN" in response.json()["detail"]["message"]
    # AST JSON that is not a query.
    response = httpx.post(f"{shared_server.url}/v1/queries", json={"name": "bad", "pattern": {"kind": "seq"}})
    assert response.status_code == 422 and "kind 'query'" in response.json()["detail"]["message"]
    assert "bad" not in [q["name"] for q in httpx.get(f"{shared_server.url}/v1/queries").json()["queries"]]


def wide_or(n: int) -> dict[str, object]:
    items = [{"kind": "component", "classes": [f"C{i}"]} for i in range(n)]
    return {"kind": "query", "pattern": {"kind": "or", "items": items}}


def nested(levels: int) -> dict[str, object]:
    pattern: dict[str, object] = {"kind": "seq", "items": [{"kind": "component", "classes": ["A"]}]}
    for _ in range(levels):
        inner = {"kind": "component", "sub": pattern}
        pattern = {"kind": "seq", "items": [inner, {"kind": "component", "classes": ["B"]}]}
    return {"kind": "query", "pattern": pattern, "within": 10.0}


def test_the_ast_json_form_has_size_limits_that_say_where(shared_server: Server) -> None:
    url = f"{shared_server.url}/v1/queries"
    assert (
        httpx.post(url, json={"name": "wide_ok", "pattern": wide_or(10_000)}, timeout=60).status_code == 201
    )
    too_wide = httpx.post(url, json={"name": "too_wide", "pattern": wide_or(60_000)}, timeout=60)
    assert too_wide.status_code == 413
    assert too_wide.json()["detail"]["field"] == "pattern" and "200,000 JSON values" in too_wide.text
    too_deep = httpx.post(url, json={"name": "too_deep", "pattern": nested(70)}, timeout=60)
    assert too_deep.status_code == 422, too_deep.text
    assert too_deep.json()["detail"]["field"] == "pattern" and "$.pattern.items[0].sub" in too_deep.text
    bulk = httpx.post(
        f"{url}/bulk",
        json={"queries": [{"name": "fine", "text": "A"}, {"name": "big", "pattern": wide_or(60_000)}]},
        timeout=60,
    )
    assert (
        bulk.status_code == 413
        and bulk.json()["detail"]["index"] == 1
        and bulk.json()["detail"]["query"] == "big"
    )
    names = [q["name"] for q in httpx.get(url).json()["queries"]]
    assert "fine" not in names and "too_deep" not in names and "wide_ok" in names


def test_validate_answers_as_register_would_and_registers_nothing(shared_server: Server) -> None:
    client = shared_server.client()
    client.register("known", "OR(A, B)")
    before = [q.name for q in client.queries()]
    # Valid, in each syntax: the canonical text and the summary, under the name if given.
    for text, kind in (
        ("PATTERN Sequence WITH CNMA_A, RSTR_B\nWITHIN 5 hours", "seq"),
        ("SEQ(A a, !B, C c) WHERE a.x < c.x WITHIN 10 s", "seq"),
        ("A & B WITHIN 1 min MODE ALL", "and"),
    ):
        valid = client.validate(text, name="fresh")
        assert valid.name == "fresh" and valid.kind == kind and valid.text.startswith("PATTERN")
        assert valid.text == client.validate(valid.text).text  # canonical: a fixed point
    assert client.validate("SEQ(@known, C) WITHIN 5 s").classes == ["@known", "C"]
    assert client.validate(pattern=query_json("A; B WITHIN 3 s")).window == 3.0
    # Invalid: the same status and place as registering.
    cases: list[tuple[dict[str, Any], int, tuple[int, int] | None]] = [
        ({"text": "SEQ(A, B)\nWHERE A.x >\nWITHIN 5 s"}, 422, (3, 1)),
        ({"text": "SEQ(A, @nobody)\nWITHIN 5 s"}, 422, (1, 8)),
        ({"text": "SEQ(A, B)"}, 422, None),
        ({"name": "known", "text": "OR(C)"}, 409, None),
        ({"name": "no spaces", "text": "OR(C)"}, 422, None),
        ({"text": "OR(C)", "pattern": query_json("OR(C)")}, 422, None),
    ]
    for body, status, place in cases:
        response = httpx.post(f"{shared_server.url}/v1/queries/validate", json=body)
        assert response.status_code == status, body
        detail = response.json()["detail"]
        if place is not None:
            assert (detail["line"], detail["column"]) == place
            assert f"line {place[0]}, column {place[1]}" in detail["message"]
        register = httpx.post(f"{shared_server.url}/v1/queries", json={"name": "fresh", **body})
        assert register.status_code == status and register.json()["detail"]["message"] == detail["message"]
    assert [q.name for q in client.queries()] == before


def test_queries_carry_their_matches_per_second_over_the_last_minute(start_server: StartServer) -> None:
    server = start_server()
    client = server.client()
    client.register("ab", "SEQ(A, B) WITHIN 10 s")
    client.register("quiet", "SEQ(C, D) WITHIN 10 s")
    events = [
        {"src": s, "type": t, "start": i} for i, (s, t) in enumerate(((1, "A"), (1, "B"), (2, "A"), (2, "B")))
    ]
    client.post_events("p", 1, events)
    rates = {q.name: q.rate for q in client.queries()}
    # Two matches within the server's first seconds: at least 2/60 per second, at most 2.
    assert 2 / 60 <= rates["ab"] <= 2.0 and rates["quiet"] == 0.0
    assert client.query("ab").rate == rates["ab"]
