# The two commands a new user needs: `make demo` and `make test`. Both create .venv first.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: demo test lint install clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[postgres,dev]'
	touch $@

install: $(BIN)/.installed

demo: $(BIN)/.installed
	$(BIN)/exchange demo

# The tests need PostgreSQL at 127.0.0.1:5432 (user postgres, trust auth); they fail, not skip,
# without it. Override with EXCHANGE_TEST_PG=postgresql://user@host:port/postgres.
test: $(BIN)/.installed
	$(BIN)/pytest

lint: $(BIN)/.installed
	$(BIN)/ruff check exchange tests migrations
	$(BIN)/ruff format --check exchange tests migrations
	$(BIN)/mypy

clean:
	rm -rf $(VENV) exchange-demo .pytest_cache .mypy_cache .ruff_cache
