"""The web console's page and assets as the server serves them (the browser tests are
in ``tests/service/server/console/``): one page at ``/`` and ``/console``, assets in the
package and in its package data, nothing fetched from elsewhere."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import httpx

from service.server.routes.console import ASSETS
from tests.service.conftest import Server

ROOT = Path(__file__).resolve().parents[3]


def test_the_page_and_its_modules_are_served(shared_server: Server) -> None:
    for path in ("/", "/console"):
        page = httpx.get(f"{shared_server.url}{path}")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "connect-src 'self'" in policy
        assert 'src="console/assets/app.js"' in page.text
    # Every module the page loads, and every module they import, is there as JavaScript.
    todo, seen = ["app.js"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        response = httpx.get(f"{shared_server.url}/console/assets/{name}")
        assert response.status_code == 200, name
        assert response.headers["content-type"].startswith("text/javascript"), name
        todo += re.findall(r'from "\./([\w.-]+\.js)"', response.text)
    assert {
        "api.js",
        "charts.js",
        "dom.js",
        "editor.js",
        "feed.js",
        "format.js",
        "queries.js",
        "stats.js",
    } <= seen
    assert httpx.get(f"{shared_server.url}/console/assets/console.css").status_code == 200
    assert httpx.get(f"{shared_server.url}/console/assets/nothing.js").status_code == 404


def test_the_console_is_not_part_of_the_api_contract(shared_server: Server) -> None:
    paths = httpx.get(f"{shared_server.url}/openapi.json").json()["paths"]
    assert "/" not in paths and "/console" not in paths
    assert {"/v1/stats", "/v1/whoami", "/v1/queries/validate"} <= set(paths)


def test_every_asset_ships_in_the_package_data() -> None:
    """A wheel carries only what pyproject.toml's package data names."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["service.server"]
    base = ROOT / "service" / "server"
    files = [p for p in ASSETS.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert files
    for path in files:
        relative = path.relative_to(base).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative


def test_the_console_works_offline() -> None:
    """No CDN, no web font, no remote script: every URL in the assets is relative."""
    for path in ASSETS.iterdir():
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"https?://", text.replace("http://www.w3.org/2000/svg", "")), path.name
