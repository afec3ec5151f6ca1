"""Settings of the server, from ``scemon serve`` options and ``SCEMON_*`` variables.

Typed once here so every other module reads plain attributes; an invalid value stops the
server at start with the variable's name rather than at the first request.
"""

from __future__ import annotations

import ipaddress
import math
from enum import StrEnum
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Role", "Settings", "is_loopback", "parse_hosts", "parse_tokens"]


class Role(StrEnum):
    """What a bearer token may do: admin everything (queries, time advances); producer
    post events; reader read queries and matches."""

    admin = "admin"
    producer = "producer"
    reader = "reader"


class Settings(BaseSettings):
    """``SCEMON_HOST``, ``SCEMON_PORT``, ``SCEMON_DATA``, ``SCEMON_TOKENS``
    (``"tok1:admin,tok2:producer"``), event time (``SCEMON_LATENESS``,
    ``SCEMON_MAX_AHEAD``, ``SCEMON_BUFFER_MAX``), limits and tuning."""

    model_config = SettingsConfigDict(env_prefix="SCEMON_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    data: Path = Path("./data")
    tokens: str = Field(default="", description="Comma-separated token:role pairs.")
    max_body_bytes: int = Field(default=64 * 1024 * 1024, ge=1024, description="Larger requests get 413.")
    max_batch_events: int = Field(default=200_000, ge=1, description="Larger batches get 413.")
    max_json_values: int = Field(
        default=4_000_000,
        ge=1000,
        description="JSON values a request body may hold (counted from its commas and brackets, "
        "before it is parsed); more get 413.",
    )
    subscriber_queue: int = Field(
        default=50_000,
        ge=1,
        description="Matches a WebSocket subscriber may fall behind before it is cut off.",
    )
    ws_compression: bool = Field(
        default=False,
        description="Offer permessage-deflate to WebSocket subscribers: fewer bytes on the wire, "
        "but every frame is compressed once per subscriber (with 10 subscribers, most of the "
        "server's time).",
    )
    max_matches_per_event: int = Field(
        default=10_000,
        ge=0,
        description="Matches one event (or time advance) may complete for one query; more are dropped, "
        "counted and logged (0: no cap).",
    )
    trim_every: int = Field(default=64, ge=1, description="Trim the event log every that many batches.")
    match_log_max: int = Field(default=5_000_000, ge=1, description="Matches kept for polling and resuming.")
    store_max_bytes: int = Field(
        default=0,
        ge=0,
        description="A cap on the store file's size (0: none); past it writes fail as 'full'.",
    )
    init: bool = Field(
        default=False, description="Start an empty store in place of an empty (0-byte) store file."
    )
    lateness: float = Field(
        default=0.0,
        ge=0,
        description="Allowed lateness, seconds: events are held this long to be put in order.",
    )
    max_ahead: float = Field(
        default=86_400.0,
        gt=0,
        description="Events further ahead of the clock (or the wall clock) are refused; inf: no bound.",
    )
    buffer_max: int = Field(
        default=1_000_000, ge=1, description="Events the reorder buffer may hold; a batch beyond gets 503."
    )
    producer_idle: float = Field(
        default=60.0,
        gt=0,
        description="Seconds without a batch after which a producer stops holding the clock back; inf: never.",
    )
    scrub_every: float = Field(
        default=3600.0,
        ge=0,
        allow_inf_nan=False,
        description="Seconds between checks of every stored row's checksum while serving; 0: never.",
    )
    allowed_hosts: str = Field(
        default="",
        description="Comma-separated host names the server answers to besides the loopback ones "
        "(localhost, 127.0.0.1, [::1]); when set, they are required with tokens too.",
    )
    header_timeout: float = Field(
        default=10.0,
        gt=0,
        description="Seconds a client has to send a request's headers once it starts (or connects); "
        "then the connection is closed.",
    )
    body_timeout: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a request's body may stall (no byte arriving) before the connection is closed.",
    )
    max_connections: int = Field(
        default=4096,
        ge=1,
        description="Open connections (HTTP and WebSocket) at once; a request beyond gets 503.",
    )
    log_level: str = "info"
    cluster: str = Field(
        default="",
        description="The cluster's shards, base URLs separated by commas in routing order (this one "
        "included), for clients given this shard as a seed: GET /v1/cluster.",
    )

    shard: str = Field(
        default="",
        description='This shard\'s place in the cluster, "K/N" (K from 0, N shards, as the job routes): '
        "it then evaluates each partition key's queries only on the values it owns. Empty: it owns all.",
    )

    @field_validator("shard")
    @classmethod
    def _place(cls, value: str) -> str:
        if not value:
            return value
        k, slash, n = value.strip().partition("/")
        if not (slash and k.isdigit() and n.isdigit() and 0 <= int(k) < int(n)):
            raise ValueError('must be "K/N": shard K (from 0) of N shards, such as "0/2"')
        return f"{int(k)}/{int(n)}"

    @field_validator("lateness")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number of seconds")
        return value

    @field_validator("header_timeout", "body_timeout")
    @classmethod
    def _finite_timeout(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number of seconds")
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _check_hosts(cls, value: str) -> str:
        parse_hosts(value)
        return value

    def allowed_host_names(self) -> frozenset[str]:
        """The configured host names, lower case (``[::1]`` kept bracketed)."""
        return parse_hosts(self.allowed_hosts)

    @field_validator("tokens")
    @classmethod
    def _check_tokens(cls, value: str) -> str:
        parse_tokens(value)
        return value

    def token_roles(self) -> dict[str, Role]:
        return parse_tokens(self.tokens)

    @property
    def auth_enabled(self) -> bool:
        return bool(self.token_roles())


def parse_tokens(text: str) -> dict[str, Role]:
    """``"tok1:admin, tok2:producer"`` → ``{"tok1": Role.admin, ...}``; raises ValueError
    naming the bad entry."""
    out: dict[str, Role] = {}
    for number, entry in enumerate(text.split(","), 1):
        entry = entry.strip()
        if not entry:
            continue
        token, sep, role = entry.rpartition(":")
        if not sep or not token:
            # Never echo the entry: it is a secret.
            raise ValueError(f"token entry {number} must be token:role")
        try:
            out[token] = Role(role.strip())
        except ValueError:
            raise ValueError(f"unknown role {role!r} (expected admin, producer or reader)") from None
    return out


def parse_hosts(text: str) -> frozenset[str]:
    """``"scemon.lan, 10.0.0.5"`` → ``{"scemon.lan", "10.0.0.5"}``; a name with a port,
    a scheme or a path raises ValueError naming it (the port is never compared)."""
    out = set()
    for entry in text.split(","):
        name = entry.strip().lower()
        if not name:
            continue
        bare = name[1:-1] if name.startswith("[") and name.endswith("]") else name
        if not bare or any(c in bare for c in "/@ ") or (":" in bare and not _is_ip(bare)):
            raise ValueError(f"{entry.strip()!r} is not a host name (give names without port or scheme)")
        out.add(f"[{bare}]" if ":" in bare else bare)
    return frozenset(out)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
