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

test: install
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest

demo: install
	$(BIN)/scemon replay --queries examples/queries.txt --events examples/events.jsonl

clean:
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
