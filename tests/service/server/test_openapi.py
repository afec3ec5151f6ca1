"""``openapi.yaml`` is the app's contract, and no request the contract allows — or
breaks — makes the server answer 500 (schemathesis against a real server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from service.server.config import Settings
from service.server.main import create_app
from service.server.openapi import openapi_yaml
from tests.service.conftest import Server

ROOT = Path(__file__).resolve().parents[3]
SPEC = ROOT / "openapi.yaml"


def test_openapi_yaml_is_the_apps_document() -> None:
    assert SPEC.read_text(encoding="utf-8") == openapi_yaml(create_app(Settings())), (
        "openapi.yaml is out of date: run `scemon openapi --out openapi.yaml`"
    )


def test_the_document_has_examples_for_requests_and_responses() -> None:
    text = SPEC.read_text(encoding="utf-8")
    for needle in (
        "dinner_and_a_movie",
        "spark-job-1",
        "duplicate: false",
        "next_seq",
        "application/vnd.apache.arrow.stream",
    ):
        assert needle in text


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = Server(tmp_path_factory.mktemp("fuzz") / "data", {}).start()
    client = server.client()
    client.register("ab", "SEQ(A, B) WITHIN 10 s")
    client.post_events("seed", 1, [{"src": 1, "type": "A", "start": 1}, {"src": 1, "type": "B", "start": 2}])
    yield server
    server.stop()


schema = schemathesis.openapi.from_path(SPEC)


@schemathesis.serializer("application/vnd.apache.arrow.stream")
def _arrow_body(ctx: Any, value: Any) -> bytes:
    """The generated "binary" bodies as they are: mostly not Arrow, which must be a 400."""
    if isinstance(value, bytes):
        return value
    return value.encode() if isinstance(value, str) else orjson.dumps(value)


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_request_makes_a_500(case: schemathesis.Case, fuzz_server: Server) -> None:
    case.call_and_validate(
        base_url=fuzz_server.url,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
        timeout=30,
    )
