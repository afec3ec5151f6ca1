"""Builds the compiled kernel of the engine (ecq/kernel/_*.pyx, Cython); everything
else is in pyproject.toml.

The kernel uses only public CPython API, so it is built on every CPython from 3.11 on.
When it cannot be built (no C compiler, no Python headers, another interpreter), the
install does not fail: the engine runs its pure-Python kernel (same results, a fraction
of the speed). The build then says so loudly, and writes the reason to
build/compiled-kernel-<interpreter>.txt (e.g. cpython-313: one checkout may hold a
virtualenv per interpreter), which `make install` prints (pip hides a build's output)."""

import sys
import traceback
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
REPORT = HERE / "build" / f"compiled-kernel-{sys.implementation.cache_tag}.txt"
# One module per concern (docs/architecture.md, "The compiled kernel").
MODULES = [
    "_bitset",
    "_pmb",
    "_summary",
    "_events",
    "_filters",
    "_constants",
    "_negation",
    "_assembly",
    "_conjunction",
    "_phases",
    "_kernel",
    "_lexer",
]


def _report(reason: str | None) -> None:
    REPORT.parent.mkdir(exist_ok=True)
    if reason is None:
        REPORT.unlink(missing_ok=True)
    else:
        REPORT.write_text(reason + "\n")


def _warn(reason: str) -> None:
    _report(reason)
    bar = "!" * 78
    print(
        f"\n{bar}\nWARNING: the compiled kernel of scemon's engine was NOT built:\n  {reason}\n"
        "The engine will run its pure-Python kernel: the same results, several times\n"
        "slower. Install a C compiler and the Python headers, then run `make install`.\n"
        f"{bar}\n",
        file=sys.stderr,
    )


class OptionalBuildExt(build_ext):
    """build_ext that reports a failed build instead of failing the install."""

    def build_extensions(self) -> None:
        if self.compiler.compiler_type == "unix":
            # No debug information: it is most of the modules' size, and it names the
            # interpreter's internal structures the kernel does not use.
            for ext in self.extensions:
                ext.extra_compile_args = [*ext.extra_compile_args, "-g0"]
        super().build_extensions()

    def run(self) -> None:
        try:
            super().run()
        except Exception as err:  # noqa: BLE001 - any failure means: no compiled kernel
            _warn(_first_line(err))
            return
        _report(None)

    def build_extension(self, ext) -> None:  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as err:  # noqa: BLE001
            # One module missing makes the kernel unusable: remove what was built.
            raise RuntimeError(f"building {ext.name} failed: {_first_line(err)}") from err


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return f"{type(err).__name__}: {text.splitlines()[0]}"


def _extensions() -> list:  # type: ignore[type-arg]
    if sys.implementation.name != "cpython" or sys.version_info < (3, 11):
        found = f"{sys.implementation.name} {sys.version.split()[0]}"
        _warn(f"the compiled kernel needs CPython 3.11 or later, not {found}")
        return []
    try:
        from Cython.Build import cythonize
        from setuptools import Extension

        return cythonize(
            [
                Extension(f"ecq.kernel.{name}", [f"ecq/kernel/{name}.pyx"], include_dirs=["ecq/kernel"])
                for name in MODULES
            ],
            compiler_directives={"language_level": 3},
            # The generated C goes under build/, not beside the sources.
            build_dir="build/cython",
            quiet=True,
        )
    except Exception:  # noqa: BLE001 - Cython missing or a .pyx that does not compile
        _warn("cythonize failed: " + traceback.format_exc().strip().splitlines()[-1])
        return []


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
