"""A small harness for engine tests: queries as AST JSON or text, events as dicts, a fake
clock through ``("time", t)`` items, matches as plain dicts keyed by event ids."""

from __future__ import annotations

from typing import Any

from ecq.engine import Engine
from ecq.event import Event
from ecq.language.ast import from_json
from ecq.match import Match


def make_events(spec: str, src: str | int = "s", step: float = 1.0) -> list[dict[str, Any]]:
    """``"a1 b2 c3"`` -> events of types A, B, C at times 1, 2, 3 (the number is the
    time), with the token as id."""
    out = []
    for token in spec.split():
        cls = "".join(ch for ch in token if ch.isalpha()).upper()
        digits = "".join(ch for ch in token if ch.isdigit())
        out.append({"id": token, "src": src, "type": cls, "start": float(digits) * step})
    return out


def feed(
    queries: list[tuple[str, Any]], items: list[Any], engine: Engine | None = None, check: bool = True
) -> list[Match]:
    """Register ``queries`` (text or AST JSON dict), then process ``items`` (event dicts,
    ``("time", t)``, ``("register", name, q)``, ``("unregister", name)``), then flush
    the clock to +inf. Calls the network's ``_check()`` after every step."""
    eng = engine or Engine(clean_every=3)
    for name, q in queries:
        eng.register(name, from_json(q) if isinstance(q, dict) else q)
    out: list[Match] = []
    for item in items:
        if isinstance(item, dict):
            out.extend(eng.process([Event.from_dict(item)]))
        elif item[0] == "time":
            out.extend(eng.advance_time(item[1]))
        elif item[0] == "register":
            eng.register(item[1], from_json(item[2]) if isinstance(item[2], dict) else item[2])
        elif item[0] == "unregister":
            eng.unregister(item[1])
        else:
            raise ValueError(item)
        if check:
            eng._check()
    out.extend(eng.advance_time(float("inf")))
    return out


def ids(matches: list[Match], query: str | None = None) -> list[list[Any]]:
    return [m.event_ids() for m in matches if query is None or m.query == query]


def comp(*classes: str, alias: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "component", "classes": list(classes)}
    if len(classes) > 1:
        out["any"] = True
    if alias:
        out["alias"] = alias
    return out


def query(
    kind: str, *components: Any, within: float | None = None, mode: str = "recent", where: Any = None
) -> dict[str, Any]:
    items = [comp(c) if isinstance(c, str) else c for c in components]
    out: dict[str, Any] = {"kind": "query", "pattern": {"kind": kind, "items": items}, "mode": mode}
    if within is not None:
        out["within"] = within
    if where is not None:
        out["where"] = where
    return out


def attr(ref: str, name: str) -> dict[str, Any]:
    return {"kind": "attr", "ref": ref, "attr": name}


def lit(value: Any) -> dict[str, Any]:
    return {"kind": "lit", "value": value}


def cmp(op: str, left: Any, right: Any) -> dict[str, Any]:
    return {"kind": "cmp", "op": op, "left": left, "right": right}
