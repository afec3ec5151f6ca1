"""How the server logs: uvicorn's handlers and ours, every one behind two filters.

- :class:`Redact` hides credentials in every record at every level: at debug level the
  WebSocket library logs each handshake header, ``authorization: Bearer <token>``
  among them, and a browser's token offered as the subprotocol
  ``scemon.bearer.<base64url token>``; the access log prints each URL, with a token a
  client put in its query string (``?token=...``).
- :class:`RefusedHandshakes` drops uvicorn's ERROR "ASGI callable returned without
  completing handshake", which it logs after every WebSocket handshake the app answers
  with an HTTP response (a refused subscription: no token, unknown query); the route
  logs the refusal itself, with its reason, at INFO or WARNING.
"""

from __future__ import annotations

import copy
import logging
import re
from typing import Any

__all__ = ["Redact", "RefusedHandshakes", "log_config"]

# The value of an Authorization header (its scheme and credentials, any case), and
# what follows a scheme's name as headers write it ("Bearer ...") anywhere else.
_CREDENTIALS = re.compile(
    r"((?i:authorization)['\"]?\s*[:=,]\s*['\"]?)(?:(?i:bearer|basic|token)\s+)?[^\s'\",;)]+"
    r"|(\b(?:Bearer|BEARER|Basic|BASIC)\s+)[^\s'\",;)<]+"
    # a browser's WebSocket offers its token as the subprotocol scemon.bearer.<base64url>
    r"|(scemon\.bearer\.)[A-Za-z0-9_=-]+"
    # a token put in a URL's query string (the server never reads one there, but the
    # access log prints the URL as asked for): ?token=..., &access_token=..., ...
    r"|([?&;](?i:access_token|token|auth|authorization|bearer|api_key|apikey|key|secret|password)=)[^&#\s\"']+"
)
_HANDSHAKE_NOISE = "ASGI callable returned without completing handshake."


def _redact(text: str) -> str:
    return _CREDENTIALS.sub(
        lambda m: (m.group(1) or m.group(2) or m.group(3) or m.group(4)) + "<redacted>", text
    )


class Redact(logging.Filter):
    """Replaces what follows ``Authorization:``, ``Bearer`` or ``Basic``, a token
    subprotocol and a token in a URL's query string with ``<redacted>``.

    Each argument is redacted where it stands when that suffices, so formatters that
    read the arguments (uvicorn's access log unpacks them) still get them; otherwise the
    formatted message replaces them."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = _redact(message)
        if redacted == message:
            return True
        if isinstance(record.args, tuple) and record.args and isinstance(record.msg, str):
            args = tuple(_redact(a) if isinstance(a, str) else a for a in record.args)
            msg = _redact(record.msg)
            try:
                clean = _redact(msg % args) == msg % args
            except (TypeError, ValueError):
                clean = False
            if clean:
                record.msg, record.args = msg, args
                return True
        record.msg, record.args = redacted, ()
        return True


class RefusedHandshakes(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != _HANDSHAKE_NOISE


def log_config(level: str) -> dict[str, Any]:
    """uvicorn's logging configuration, with our loggers (``scemon.*``, through the
    root) on stderr beside it and the filters on every handler."""
    import uvicorn.config

    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config["filters"] = {
        "redact": {"()": "service.server.logs.Redact"},
        "handshakes": {"()": "service.server.logs.RefusedHandshakes"},
    }
    config["formatters"]["scemon"] = {"format": "%(levelname)s:     %(name)s: %(message)s"}
    config["handlers"]["scemon"] = {
        "formatter": "scemon",
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stderr",
    }
    for handler in config["handlers"].values():
        handler["filters"] = ["redact", "handshakes"]
    config["root"] = {"handlers": ["scemon"], "level": level.upper()}
    return config
