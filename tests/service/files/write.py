"""Writing a test's input file."""

from __future__ import annotations

from pathlib import Path


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path
