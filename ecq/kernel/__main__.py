"""``python -m ecq.kernel``: which kernel the engine runs here, and why; what ``make
install`` prints after installing. Loud when it is the pure one, since everything then
runs several times slower; the exit status is 0 either way (an install without the
compiled kernel still works)."""

from __future__ import annotations

import platform
import sys

from ecq.kernel.select import status


def main() -> int:
    found = status()
    python = f"{platform.python_implementation()} {platform.python_version()}"
    if found.compiled:
        print(f"scemon: the compiled kernel is built and loads ({python})")
        return 0
    bar = "!" * 78
    print(
        f"{bar}\nWARNING: scemon's engine will run its pure-Python kernel ({python}):\n"
        f"  {found.reason}\nSame results, several times slower. With a C compiler and the Python "
        f"headers\ninstalled, `make install` builds the compiled kernel.\n{bar}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
