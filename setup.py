"""Builds the optional compiled part of the engine (ecq/_speedups.pyx); everything
else is in pyproject.toml. It reads CPython 3.11's int layout directly, so it is built
for 3.11 only; elsewhere (or without a compiler) the engine runs its pure-Python code,
which gives the same results."""

import sys

from setuptools import setup

ext_modules = []
if sys.implementation.name == "cpython" and sys.version_info[:2] == (3, 11):
    from Cython.Build import cythonize
    from setuptools import Extension

    ext_modules = cythonize(
        [Extension("ecq._speedups", ["ecq/_speedups.pyx"], include_dirs=["ecq"])],
        compiler_directives={"language_level": 3},
        quiet=True,
    )

setup(ext_modules=ext_modules)
