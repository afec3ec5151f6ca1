"""The docs hold together: every internal link of every Markdown file (a relative file,
an ``#anchor`` by GitHub's heading slugs, or both) reaches something, every
``docs/<page>.md, "<section>"`` citation in the code and docs names a section that is
there, and no doc or comment speaks of work items, rounds or stops (history belongs to
``git log``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Folders that hold no doc of ours: caches, builds, virtualenvs, the git store.
SKIP_DIRS = {
    ".git",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    "node_modules",
    "build",
    "dist",
}
# Generated or binary files: the compiled kernel's C and objects, pictures.
SKIP_SUFFIXES = {".c", ".so", ".pyd", ".o", ".pyc", ".png", ".jpg", ".ico", ".gz", ".whl"}


def walk(*tops: Path) -> Iterator[Path]:
    for top in tops:
        if top.is_file():
            yield top
            continue
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(".venv"))
            for name in sorted(files):
                path = Path(folder) / name
                if path.suffix not in SKIP_SUFFIXES:
                    yield path


def markdown_files() -> list[Path]:
    return [p for p in walk(ROOT) if p.suffix == ".md"]


# ---------------------------------------------------------------- links and anchors

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(\S+)", re.M)
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)
_HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.I)


def prose(text: str) -> str:
    """The text without code blocks and inline code, where a link is not a link."""
    return _CODE.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its rendered text, lowercased, without punctuation
    but ``-`` and ``_``, spaces made ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link reads as its text
    text = text.replace("`", "").replace("*", "")
    return "".join("-" if ch == " " else ch for ch in text.lower() if ch.isalnum() or ch in "-_ ")


def anchors(path: Path) -> set[str]:
    """Every anchor a Markdown file has: its headings' slugs (a repeated one numbered
    -1, -2, ... as GitHub does) and its HTML anchors."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    text = _FENCE.sub("", path.read_text())
    for match in _HEADING.finditer(text):
        base = slug(match.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    found.update(_HTML_ANCHOR.findall(text))
    return found


def targets(path: Path) -> list[str]:
    text = prose(path.read_text())
    return _LINK.findall(text) + _REFERENCE.findall(text)


def dead_links(path: Path) -> list[str]:
    """The internal links of one Markdown file that reach nothing."""
    dead = []
    for target in targets(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        where = path if not file_part else (path.parent / file_part).resolve()
        if not where.exists():
            dead.append(f"{target} (no {file_part})")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            dead.append(f"{target} (no heading #{anchor} in {where.name})")
    return dead


def test_the_docs_are_read() -> None:
    """The check reads every doc (a move of the docs would pass vacuously), and finds
    links in them."""
    names = {p.relative_to(ROOT).as_posix() for p in markdown_files()}
    assert {"README.md", "CHANGELOG.md", "docs/benchmarks.md", "docs/semantics.md"} <= names
    assert sum(len(targets(p)) for p in markdown_files()) > 50


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_internal_link_reaches_something(path: Path) -> None:
    assert dead_links(path) == []


def test_the_link_check_catches_a_dead_link(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text(
        "# Other page\n\n## A `code` section: (it) & more\n\n## Twice\n\n## Twice\n"
    )
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md) [ok](other.md#a-code-section-it--more) [ok](#page) "
        "[ok](other.md#twice-1) ![ok](other.md) [ok](https://example.com/x.md)\n"
        "`[not a link](nowhere.md)`\n\n```\n[not a link](nowhere.md)\n```\n\n"
        "[dead](missing.md) [dead](other.md#nope) [dead](#nope) [dead](other.md#twice-2)\n\n"
        "[ref]: missing-too.md\n"
    )
    assert dead_links(page) == [
        "missing.md (no missing.md)",
        "other.md#nope (no heading #nope in other.md)",
        "#nope (no heading #nope in page.md)",
        "other.md#twice-2 (no heading #twice-2 in other.md)",
        "missing-too.md (no missing-too.md)",
    ]


# ---------------------------------------------------------------- citations of sections

_CITATION = re.compile(r"docs/([a-z_]+\.md),? \"([^\"]+)\"")
# Where the code and the docs cite a section by its name.
CITED_FROM = ("docs", "ecq", "service", "api", "tests", "deploy", "README.md", "Makefile")


def sections(path: Path) -> list[str]:
    """A doc's section names: its headings' texts, and its bold run-in headings
    (``- **Conjunction roles.** ...``)."""
    text = path.read_text()
    names = [m.group(2).replace("`", "") for m in _HEADING.finditer(_FENCE.sub("", text))]
    return names + re.findall(r"\*\*([^*]+?)\.?\*\*", text)


def test_every_cited_section_is_there() -> None:
    missing, cited = [], 0
    for path in walk(*(ROOT / top for top in CITED_FROM)):
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for match in _CITATION.finditer(text.replace("\n", " ")):
            page, name = match.groups()
            cited += 1
            doc = ROOT / "docs" / page
            found = doc.exists() and any(s.startswith(name) for s in sections(doc))
            if not found:
                missing.append(f"{path.relative_to(ROOT)}: docs/{page}, {name!r}")
    assert cited > 5
    assert missing == []


# ---------------------------------------------------------------- no history

# Built from parts so that this file, which the check reads too, cannot match it.
_HISTORY = re.compile(r"\b(" + "|".join(("iss" + "ue", "rou" + "nd", "st" + "op")) + r") [0-9]+", re.I)
# What the check reads: the docs and every room of the code, as `grep -r` would.
HISTORY_IN = ("docs", "ecq", "service", "api", "tests", "deploy", "Makefile", "pyproject.toml")


def history(paths: Iterator[Path]) -> list[str]:
    found = []
    for path in paths:
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if _HISTORY.search(line):
                where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                found.append(f"{where}:{n}: {line.strip()}")
    return found


def test_no_doc_or_comment_speaks_of_work_items() -> None:
    """Docs say what the system does now; comments say what the code does and why.
    Which work item, round or stop brought a change is for ``git log``."""
    assert history(walk(*(ROOT / top for top in HISTORY_IN))) == []


def test_the_history_check_catches_one(tmp_path: Path) -> None:
    lines = ["as " + "Issue" + " 16 said", "the second " + "round" + " 2", "St" + "op" + " 31: the host"]
    note = tmp_path / "note.md"
    note.write_text("\n".join(["fine", *lines, "an issue, 16 of them"]) + "\n")
    assert [line.split(": ", 1)[1] for line in history(iter([note]))] == lines
