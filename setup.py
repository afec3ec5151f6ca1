"""Builds the optional compiled part of the engine (ecq/_speedups.pyx); everything
else is in pyproject.toml. Without a compiler the engine runs on its pure-Python code."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [Extension("ecq._speedups", ["ecq/_speedups.pyx"], include_dirs=["ecq"])],
        compiler_directives={"language_level": 3},
        quiet=True,
    )
)
