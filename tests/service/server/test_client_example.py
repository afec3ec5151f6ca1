"""The client example docs/service.md shows (``examples/client.py``): the doc holds the
file's code as it is, and the file, run as a user would against a real server, prints
what the doc says it prints. Then the way the doc says to stop a subscription that has
no ``idle_timeout``: breaking out of the loop closes its connection."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from api.client import SyncSubscription
from tests.service.conftest import StartServer

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "client.py"
DOC = ROOT / "docs" / "service.md"


def doc_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("### The Python client")
    end = text.index("\n## ", start)
    return text[start:end]


def fenced_blocks(section: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block."""
    return re.findall(r"^```(\w*)\n(.*?)^```$", section, flags=re.MULTILINE | re.DOTALL)


def test_the_doc_shows_the_example_as_it_is() -> None:
    code = EXAMPLE.read_text(encoding="utf-8").split('"""\n\n', 1)[1]
    blocks = fenced_blocks(doc_section())
    assert blocks[0] == ("python", code)


def test_the_example_registers_posts_subscribes_and_resumes(start_server: StartServer) -> None:
    server = start_server()
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), server.url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    printed = dict(fenced_blocks(doc_section()))[""]
    assert result.stdout == printed
    # The resumed subscription saw only the match it had not seen: every seq once.
    seqs = [int(line.split()[1]) for line in result.stdout.splitlines() if line.startswith(("match", "resumed"))]
    assert seqs == [0, 1, 2]


def test_breaking_out_of_a_subscription_without_idle_timeout_closes_it(start_server: StartServer) -> None:
    server = start_server()
    client = server.client()
    client.register("a_then_b", text="PATTERN SEQ(A, B)\nWITHIN 10 s")
    client.post_events(
        "p", 1, [{"src": "s", "type": "A", "start": 1}, {"src": "s", "type": "B", "start": 2}]
    )
    subscription = SyncSubscription(server.url)
    for match in subscription:
        assert match["seq"] == 0
        break
    assert subscription.next_seq == 1
    # The server sees the connection go (no timing threshold: polled until it does).
    while client.stats().subscribers != 0:
        time.sleep(0.1)
