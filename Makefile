# Everything a fresh machine needs: `make test` and `make demo` install first.
# Another interpreter in its own virtualenv:
#   make test PYTHON=$(pyenv root)/versions/3.13.0/bin/python3 VENV=.venv-3.13
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Touched after a successful install; re-install when pyproject.toml or the compiled
# kernel (ecq/kernel/_*.pyx, built in place by the editable install) changes. The demo's
# install (the service and the Spark job, no dev tools) has its own stamp, which the full
# install touches too: it holds everything the demo needs.
STAMP  := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
KERNEL := $(wildcard ecq/kernel/*.pyx ecq/kernel/*.pxd ecq/kernel/*.h)

.PHONY: install install-demo java chromium test lint typecheck pytest demo bench-docs clean distclean

# The dev tools and the Spark job's extra (pyspark, pyarrow, pandas): the tests run the
# job on a local Spark, and so does the demo. A kernel that cannot be built does not
# fail the install: `python -m ecq.kernel` then says why, loudly. The browser tests drive
# Debian's chromium (tests/service/server/console/).
install: $(STAMP) java chromium
	@$(BYTECODE)

# The project's own modules compiled to bytecode, every time (a few hundredths of a
# second when nothing changed): where PYTHONDONTWRITEBYTECODE is set, Python never writes
# it on import and compiles every module again in each process, which made a server's
# start 0.8 s longer (pip compiles the installed packages itself).
BYTECODE = $(BIN)/python -m compileall -q ecq service api >/dev/null

$(STAMP): pyproject.toml setup.py $(KERNEL)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	$(BIN)/python -m ecq.kernel
	touch $(STAMP) $(DEMO_STAMP)

# What `make demo` needs and no more: scemon with the Spark job's extra (pyspark,
# pyarrow, pandas) and a Java runtime; no test tools, no browser.
install-demo: $(DEMO_STAMP) java
	@$(BYTECODE)

$(DEMO_STAMP): pyproject.toml setup.py $(KERNEL)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[spark]'
	$(BIN)/python -m ecq.kernel
	touch $(DEMO_STAMP)

# Spark needs a Java runtime (17 or later); install one from the distribution if none.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
java:
	@command -v java >/dev/null 2>&1 || { \
		echo "no java on PATH: installing openjdk-17-jre-headless"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq openjdk-17-jre-headless; }

# The console's browser tests run a real headless Chromium, driven by the playwright
# package (dev extra) pointed at this binary: playwright's own browser download is never used.
chromium:
	@test -x /usr/bin/chromium || { \
		echo "no /usr/bin/chromium: installing Debian's chromium for the console's browser tests"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium; }

# All checks run even when one fails, so one run shows every problem; the target fails
# if any of them did. The property tests run a second time on the pure kernel (the
# first pass runs the compiled one, when built).
test: install
	@status=0; \
	$(BIN)/ruff check . || status=1; \
	$(BIN)/mypy || status=1; \
	$(BIN)/pytest || status=1; \
	SCEMON_PURE=1 $(BIN)/pytest -q -m property || status=1; \
	exit $$status

lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy

pytest: install
	$(BIN)/pytest

# The whole system: generated card payments → Spark job → service → WebSocket, ~30 s.
# Run from a terminal, the service then stays up with its web console (the address is
# printed) and payments go on streaming at a steady rate (--keep-rate) until Ctrl-C; from
# a script, CI or a pipe (stdin not a TTY) nobody would press Ctrl-C, so the demo ends
# after the run. KEEP=1 or KEEP=0 decides either way; DEMO_FLAGS passes other
# `scemon demo` options (e.g. DEMO_FLAGS='--events 20000 --keep-rate 200').
KEEP       ?= $(shell [ -t 0 ] && echo 1 || echo 0)
DEMO_FLAGS ?=
demo: install-demo
	$(BIN)/scemon demo $(if $(filter 1,$(KEEP)),--keep) $(DEMO_FLAGS)

# One full run of every benchmark on docs/benchmarks.md (hours on two cores), which then
# regenerates the page; the builds' row needs CPython 3.12 and 3.13 (from pyenv here).
PYENV_ROOT_DIR := $(shell pyenv root 2>/dev/null)
PYTHON312 ?= $(firstword $(wildcard $(PYENV_ROOT_DIR)/versions/3.12*/bin/python3))
PYTHON313 ?= $(firstword $(wildcard $(PYENV_ROOT_DIR)/versions/3.13*/bin/python3))
bench-docs: install-demo
	$(MAKE) --no-print-directory install-demo PYTHON=$(PYTHON312) VENV=.venv-3.12
	$(MAKE) --no-print-directory install-demo PYTHON=$(PYTHON313) VENV=.venv-3.13
	$(BIN)/python -m pip install --quiet -e '.[spark,bench]'
	$(BIN)/python -m service.bench.page --run

clean:
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -path './.venv*' -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) ecq/kernel/_*.c ecq/kernel/_*.so
