"""Which build wrote what the store keeps besides its op log.

The op log holds what was posted (query specs, events) and is read the same by every
build. What a rebuild may take instead of recomputing it — a query's canonical text — is
kept with the build that computed it: :func:`language_version` names the query
language's code (parser, AST, printer), so a build whose printer prints otherwise
prints the query again rather than serving another build's text.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import ecq.language

__all__ = ["language_version"]


@functools.cache
def language_version() -> str:
    """A digest of the sources of ``ecq.language`` (every ``.py`` under it, by path):
    any change to the parser, the AST or the printer changes it."""
    root = Path(ecq.language.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return f"language-{digest.hexdigest()[:16]}"
