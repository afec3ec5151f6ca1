"""Which Host names a server answers to (service.server.guard.HostCheck) and how the
allowed names are read (config.parse_hosts): the rules behind the rebinding guard."""

from __future__ import annotations

import pytest

from service.server.config import parse_hosts
from service.server.guard import HostCheck, host_name


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost:8080", "localhost"),
        ("LocalHost", "localhost"),
        ("[::1]:8080", "[::1]"),
        ("127.0.0.1", "127.0.0.1"),
        ("attacker.example:80", "attacker.example"),
    ],
)
def test_host_name_drops_the_port_and_case(header: str, name: str) -> None:
    assert host_name(header) == name


@pytest.mark.parametrize(
    "header",
    ["localhost:1", "127.0.0.1:1", "127.5.6.7", "[::1]:1", "scemon.lan:9", "SCEMON.LAN", "10.0.0.5"],
)
def test_auth_off_answers_loopback_the_bound_address_and_allowed_names(header: str) -> None:
    check = HostCheck(auth_enabled=False, bound="10.0.0.5", allowed=parse_hosts("scemon.lan"))
    assert check.refusal(header) is None


@pytest.mark.parametrize(
    "header",
    [
        "attacker.example:8080",
        "localhost.attacker.example",
        "127.0.0.1.attacker.example",
        "2130706433",  # 127.0.0.1 as one number: a browser would send this name as is
        "0.0.0.0",
        "",
    ],
)
def test_auth_off_refuses_other_names(header: str) -> None:
    why = HostCheck(auth_enabled=False, bound="0.0.0.0").refusal(header)
    assert why is not None and "--allowed-host" in why


def test_with_tokens_names_are_checked_only_when_listed() -> None:
    assert HostCheck(auth_enabled=True, bound="0.0.0.0").refusal("anything.example") is None
    listed = HostCheck(auth_enabled=True, bound="0.0.0.0", allowed=parse_hosts("scemon.example"))
    assert listed.refusal("scemon.example:443") is None
    assert listed.refusal("localhost") is None
    assert listed.refusal("other.example") is not None


def test_no_host_header_is_answered() -> None:
    assert HostCheck(auth_enabled=False, bound="127.0.0.1").refusal(None) is None


@pytest.mark.parametrize("text", ["scemon.lan:8080", "http://scemon.lan", "a b", "scemon.lan/x", "[]"])
def test_allowed_names_without_port_or_scheme(text: str) -> None:
    with pytest.raises(ValueError, match="not a host name"):
        parse_hosts(text)


def test_allowed_names_are_read_lower_case_and_bracket_ipv6() -> None:
    assert parse_hosts(" A.example, ::2 ,[::3],") == frozenset({"a.example", "[::2]", "[::3]"})
