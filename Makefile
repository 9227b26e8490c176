# The two commands a new user needs: `make demo` and `make test`. Both create .venv first.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: demo test lint install clean wheel-check

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

# What the Docker image is made of, without Docker: build the wheel, install it (with the
# postgres extra) into a fresh virtual environment, run --help, migrate and demo from outside
# the checkout.
wheel-check: $(BIN)/.installed
	PYTHON=$(BIN)/python scripts/check-wheel.sh

clean:
	rm -rf $(VENV) exchange-demo .pytest_cache .mypy_cache .ruff_cache
