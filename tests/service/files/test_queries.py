"""Reading queries files (query text, JSON) as ``scemon replay`` and ``scemon parse`` do."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ecq.errors import QueryError
from ecq.language.ast import Component, Query, Seq, to_json
from service.files.queries import QueryFileError, read_queries
from tests.service.files.write import write

# --------------------------------------------------------------------------- queries


def test_json_queries_file_with_text_and_pattern_entries(tmp_path: Path) -> None:
    query = Query(pattern=Seq((Component(classes=("A",)), Component(classes=("B",)))), within=10.0)
    entries = [
        {"name": "by_text", "text": "PATTERN SEQ(A, B) WITHIN 10 s"},
        {"name": "by_ast", **to_json(query)},
    ]
    path = tmp_path / "q.json"
    path.write_bytes(b"  \n" + orjson.dumps(entries))
    (n1, s1), (n2, s2) = read_queries(path)
    assert (n1, s1) == ("by_text", "PATTERN SEQ(A, B) WITHIN 10 s")
    assert n2 == "by_ast"
    assert isinstance(s2, Query) and s2.pattern == query.pattern and s2.within == 10.0 and s2.name == "by_ast"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"name": "a"}', "list"),
        ('[{"text": "SEQ(A, B) WITHIN 1"}]', "entry 0: 'name'"),
        ('[{"name": "a", "text": "A", "pattern": {}}]', "exactly one"),
        ('[{"name": "a"}]', "exactly one"),
        ('[{"name": "a", "text": 3}]', "'text' must be a string"),
        ('[{"name": "a", "pattern": {"kind": "seq", "items": []}}]', "$.pattern.items"),
        ('[{"name": "a", "text": "A"}, {"name": "a", "text": "B"}]', "twice"),
        ("[]", "no queries"),
        ('[{"name": "a",\n "text": }]', "line 2"),
    ],
)
def test_bad_json_queries_file_is_rejected_with_place(tmp_path: Path, text: str, needle: str) -> None:
    path = write(tmp_path, "q.json", text)
    with pytest.raises(QueryFileError) as info:
        read_queries(path)
    assert str(path) in str(info.value)
    assert needle in str(info.value)
    assert isinstance(info.value, QueryError)


def test_text_queries_file_gives_named_queries(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "q.txt",
        "QUERY first\nPATTERN SEQ(A, B)\nWITHIN 10 s\n\nQUERY second\nPATTERN A & B\nWITHIN 1 min\n",
    )
    specs = read_queries(path)
    assert [name for name, _ in specs] == ["first", "second"]
    assert all(isinstance(query, Query) and query.name == name for name, query in specs)
    second = specs[1][1]
    assert isinstance(second, Query) and second.within == 60.0


def test_text_queries_file_with_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "q.txt",
        "QUERY ok\nPATTERN SEQ(A, B) WITHIN 1 h\n\nQUERY bad\nPATTERN SEQ(A,, B)\nWITHIN 1 h\n",
    )
    with pytest.raises(QueryFileError) as info:
        read_queries(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert "line 5" in message
    assert "\n" not in message


def test_empty_text_queries_file_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(QueryFileError, match="no queries"):
        read_queries(write(tmp_path, "q.txt", "\n  \n"))
