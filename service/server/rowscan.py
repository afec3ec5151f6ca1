"""``python -m service.server.rowscan STORE``: check every row's checksum of a store
file (:func:`service.server.store.scan`) in a process of its own, which ``scemon serve``
starts while it imports the server (:func:`service.server.store.check_started`).

Prints the rows failing their checksum as JSON (``[[table, where, seqs], ...]``, at
most five) and exits 0; a store that cannot be read exits :data:`UNREADABLE` with the
reason on stderr; anything else (a crash) is no verdict, and the server scans the rows
itself."""

from __future__ import annotations

import sys

# The exit status of a store that cannot be read (its message on stderr).
UNREADABLE = 3


def main(argv: list[str]) -> int:
    from pathlib import Path

    import orjson

    from service.server.faults import UnusableStore
    from service.server.store import _checking, scan

    if len(argv) != 1:
        print("usage: python -m service.server.rowscan STORE", file=sys.stderr)
        return 2
    try:
        with _checking(Path(argv[0])) as db:
            found = scan(db, most=5)
    except UnusableStore as err:
        print(err, file=sys.stderr)
        return UNREADABLE
    sys.stdout.buffer.write(orjson.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
