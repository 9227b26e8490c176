# The two commands a new user needs: `make demo` and `make test`. Both create .venv first.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: demo test test-fast lint install clean wheel-check bench soak fuzz-long catalogs

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[postgres,dev,brokers]'
	touch $@

install: $(BIN)/.installed

demo: $(BIN)/.installed
	$(BIN)/exchange demo

# The tests need PostgreSQL at 127.0.0.1:5432 (user postgres, trust auth); they fail, not skip,
# without it. Override with EXCHANGE_TEST_PG=postgresql://user@host:port/postgres.
test: $(BIN)/.installed
	$(BIN)/pytest

# The developer's loop: the pure and SQLite tests, no process started, no PostgreSQL, no
# browser, few Hypothesis examples (under 2 minutes). `make test` runs everything.
test-fast: $(BIN)/.installed
	EXCHANGE_TEST_FAST=1 $(BIN)/pytest -m "not postgres and not subprocess and not browser and not slow"

lint: $(BIN)/.installed
	$(BIN)/ruff check exchange tests migrations bench
	$(BIN)/ruff format --check exchange tests migrations bench
	$(BIN)/mypy
	$(BIN)/lint-imports

# The translations (docs/translations.md): extract the messages the code marks (_, ngettext,
# N_) into exchange/locale/exchange.pot, merge them into each language's .po (new ones empty,
# changed ones fuzzy: a translator's turn), and compile the .mo files the wheel carries.
# tests/test_i18n.py fails until every message has its Russian and the .mo files are compiled.
catalogs: $(BIN)/.installed
	$(BIN)/pybabel extract -F babel.cfg -k N_ -k NP_:1c,2 -k ngettext:1,2 --no-location --sort-output \
		--project exchange --omit-header -o exchange/locale/exchange.pot .
	$(BIN)/pybabel update -i exchange/locale/exchange.pot -d exchange/locale -D exchange \
		--ignore-obsolete --ignore-pot-creation-date
	$(BIN)/pybabel compile -d exchange/locale -D exchange --statistics

# What the Docker image is made of, without Docker: build the wheel, install it (with the
# postgres extra) into a fresh virtual environment, run --help, migrate and demo from outside
# the checkout.
wheel-check: $(BIN)/.installed
	PYTHON=$(BIN)/python scripts/check-wheel.sh

# The benchmark suite (docs/benchmarks/README.md): 10-25 minutes, needs PostgreSQL like the
# tests; writes docs/benchmarks/. `make bench BENCH_ARGS=--quick` is a one-minute smoke run.
bench: $(BIN)/.installed
	$(BIN)/pip install --quiet -e '.[postgres,dev,brokers,bench]'
	$(BIN)/python -m bench $(BENCH_ARGS)

# The soak (docs/soak.md): 5 minutes of traffic with site faults and SIGKILLed workers on a
# PostgreSQL database of its own, then every invariant and the workers' memory. Not in CI.
# `make soak SOAK_ARGS="--minutes 30"` for a longer one.
soak: $(BIN)/.installed
	$(BIN)/python bench/soak.py $(SOAK_ARGS)

# The model-based pipeline test and the intake fuzz, long (CI runs 30 and 40 examples):
# about 20 minutes on two cores.
fuzz-long: $(BIN)/.installed
	EXCHANGE_MODEL_EXAMPLES=1000 EXCHANGE_MODEL_STEPS=50 EXCHANGE_FUZZ_EXAMPLES=2000 \
		$(BIN)/pytest tests/integration/test_model.py tests/faults/test_intake_fuzz.py

clean:
	rm -rf $(VENV) exchange-demo .pytest_cache .mypy_cache .ruff_cache
