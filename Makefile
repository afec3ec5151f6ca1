# Everything a fresh machine needs: `make test` and `make demo` install first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Touched after a successful install; re-install when pyproject.toml or the compiled
# part of the engine (ecq/_speedups.pyx, built in place by the editable install) changes.
STAMP  := $(VENV)/.installed

.PHONY: install java chromium test lint typecheck pytest demo clean distclean

# The dev tools and the Spark job's extra (pyspark, pyarrow, pandas): the tests run the
# job on a local Spark, and so does the demo.
# The browser tests drive Debian's chromium (tests/service/console/).
install: $(STAMP) java chromium

$(STAMP): pyproject.toml setup.py ecq/_speedups.pyx ecq/_bits.h
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

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

# All three checks run even when one fails, so one run shows every problem; the target
# fails if any of them did.
test: install
	@status=0; \
	$(BIN)/ruff check . || status=1; \
	$(BIN)/mypy || status=1; \
	$(BIN)/pytest || status=1; \
	exit $$status

lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy

pytest: install
	$(BIN)/pytest

# The whole system: generated card payments → Spark job → service → WebSocket, ~2 min;
# then the service stays up with its web console (the address is printed) until Ctrl-C.
# `make demo DEMO_FLAGS=` ends after the run instead.
DEMO_FLAGS ?= --keep
demo: install
	$(BIN)/scemon demo $(DEMO_FLAGS)

clean:
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) ecq/_speedups.c ecq/_speedups.*.so
