"""Every ``scemon`` command imports the whole Typer app (service/cli/app.py), so a
command module may not import the HTTP client (httpx, the API's pydantic models) at
module level: that cost every command, ``scemon replay`` included, 0.15-0.25 s of
start-up.
Checked in a fresh interpreter, by the modules loaded (no timing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

SLOW = ("api.client", "api.models", "httpx")


def test_the_cli_app_loads_without_the_http_client() -> None:
    code = f"import sys, service.cli.app; print([m for m in {SLOW!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
