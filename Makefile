# Everything a fresh machine needs: `make test` and `make demo` install first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Touched after a successful install; re-install only when pyproject.toml is newer.
STAMP  := $(VENV)/.installed

.PHONY: install test lint typecheck pytest demo clean distclean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

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

demo: install
	$(BIN)/scemon replay --queries examples/queries.txt --events examples/events.jsonl

clean:
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
