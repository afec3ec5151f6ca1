"""The JSON nesting limit the service decides for itself (service.server.limits): the
same answer on every Python version, whatever its parser's own limit."""

from __future__ import annotations

import json

import pytest

from service.server.limits import MAX_JSON_DEPTH, json_too_deep


@pytest.mark.parametrize("depth", [0, 1, 5, MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH])
def test_bodies_within_the_limit_pass(depth: int) -> None:
    nested: object = 1
    for k in range(depth):
        nested = [nested] if k % 2 else {"k": nested, "s": "[{"}
    body = json.dumps({"a": nested} if depth < MAX_JSON_DEPTH else nested).encode()
    assert not json_too_deep(body)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, MAX_JSON_DEPTH + 50, 5000])
def test_bodies_beyond_the_limit_are_refused(depth: int) -> None:
    assert json_too_deep(b"[" * depth + b"]" * depth)
    assert json_too_deep(b'{"a":' * depth + b"1" + b"}" * depth)


def test_brackets_inside_strings_do_not_nest() -> None:
    inside = '"' + "[{" * 1000 + '"'
    assert not json_too_deep(f"[{inside}, {inside}]".encode())
    # An escaped quote does not end the string.
    escaped = json.dumps(['a"' + "[" * 1000, {"b": "\\" + "{" * 1000}]).encode()
    assert not json_too_deep(escaped)
    # Wide is not deep: many brackets side by side.
    assert not json_too_deep(json.dumps([[1]] * 10_000).encode())
