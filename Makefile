# One entry point for everything: `make up`, `make test`, `make check`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: install up test test-long gabbits lint check bench clean

$(BIN)/.installed: pyproject.toml tests/plugins/converge_example_plugin/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,dev]' -e tests/plugins/converge_example_plugin
	touch $@

install: $(BIN)/.installed

up: install
	$(BIN)/converge up

test: install
	$(BIN)/python -m tests.support.provide_services -- $(BIN)/pytest -q -p no:cacheprovider $(PYTEST_ARGS)

test-long: install
	CONVERGE_TEST_SEEDS=200 $(BIN)/python -m tests.support.provide_services -- $(BIN)/pytest -q $(PYTEST_ARGS)

gabbits: install
	$(BIN)/python -m tests.support.heat_gabbits

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy shared services
	$(BIN)/lint-imports

check: lint test

bench: install
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
