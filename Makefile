# One entry point for everything: `make up`, `make test`, `make check`.
# Runs wherever Python 3.11+ does, as any user: nothing here needs root, apt or a browser
# (only CI's `make browser` does). PYTHON: the first of python3, python3.13, python3.12,
# python3.11 that is 3.11 or newer, unless given (`make up PYTHON=/opt/py311/bin/python3`).
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell for p in python3 python3.13 python3.12 python3.11; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 && { command -v $$p; break; }; done)
endif
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: install browser up cluster cluster-clean unit test test-long gabbits lint check bench bench-quick clean

$(BIN)/.installed: pyproject.toml tests/plugins/converge_example_plugin/pyproject.toml
	@test -n "$(PYTHON)" || { echo "make: Converge needs Python 3.11 or newer, and found none" \
		"(python3 is $$(python3 -V 2>&1)); install one, or give it: make $(MAKECMDGOALS) PYTHON=/path/to/python3.11" >&2; exit 2; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,dev]' -e tests/plugins/converge_example_plugin
	touch $@

install: $(BIN)/.installed

# The dashboard's browser tests drive Chromium through Playwright (never
# `playwright install`); without one `make test` skips them, saying how to get it.
# CI (root, Debian) installs Debian's package first with this target.
browser:
	@test -x /usr/bin/chromium || { apt-get update -q && apt-get install -y -q chromium; }

# `converge up` in this checkout (its banner says what to run next, in another terminal).
up: install
	$(BIN)/converge up

# Every service as its own process under honcho (deploy/Procfile), against the
# local PostgreSQL and RabbitMQ: `make cluster ENGINES=3 WORKERS=5`.
ENGINES ?= 2
WORKERS ?= 3
OBSERVERS ?= 2
SANDBOXES ?= 1
CLUSTER_PORT ?= 8004
CLUSTER_DATABASE_URL ?= postgresql://postgres@127.0.0.1:5432/converge_cluster
CLUSTER_AMQP_URL ?= amqp://guest:guest@127.0.0.1:5672/

cluster: install
	$(BIN)/python deploy/cluster.py --engines $(ENGINES) --workers $(WORKERS) --observers $(OBSERVERS) \
		--sandboxes $(SANDBOXES) --port $(CLUSTER_PORT) \
		--database-url '$(CLUSTER_DATABASE_URL)' --amqp-url '$(CLUSTER_AMQP_URL)'

# What `make cluster` leaves behind: its database and its queues (CONVERGE_QUEUE_PREFIX).
cluster-clean: install
	$(BIN)/python deploy/cluster.py --clean \
		--database-url '$(CLUSTER_DATABASE_URL)' --amqp-url '$(CLUSTER_AMQP_URL)'

# The inner loop: tests/unit alone (pure, no PostgreSQL or RabbitMQ, under 30 s), each
# test under a 30 s timeout (tests/unit/conftest.py). `make test` runs them too.
unit: install
	$(BIN)/pytest -q -p no:cacheprovider tests/unit $(PYTEST_ARGS)

# The project's bytecode is compiled once first: the suite starts hundreds of service and CLI
# processes, which otherwise compile it again each where PYTHONDONTWRITEBYTECODE is set. The
# tests run on TEST_WORKERS pytest-xdist workers, a file to a worker (each test has its own
# database and queue prefix, each worker its own run id): most of an integration test's time
# is waiting on processes and the network, not CPU. TEST_WORKERS=0 runs them in one process.
TEST_WORKERS ?= 2
test: install
	$(BIN)/python -m compileall -q services shared tests >/dev/null
	$(BIN)/python -m tests.support.provide_services -- $(BIN)/pytest -q -p no:cacheprovider \
		-n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-long: install
	$(BIN)/python -m compileall -q services shared tests >/dev/null
	CONVERGE_TEST_SEEDS=200 CONVERGE_UP_FAULT_SEEDS=20 $(BIN)/python -m tests.support.provide_services -- $(BIN)/pytest -q $(PYTEST_ARGS)

gabbits: install
	$(BIN)/python -m tests.support.heat_gabbits

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy shared services tests bench
	$(BIN)/lint-imports

check: lint test

# The baseline configuration (docs/performance.md): every benchmark, 1k and 10k
# of every shape in both modes, the 100k create of the layered shape. More:
# `make bench BENCH_ARGS=--full`, or name modules and sizes, e.g.
# `make bench BENCH_ARGS='throughput --sizes 1000 --modes up'`.
BENCH_ARGS ?=

bench: install
	$(BIN)/python -m bench $(BENCH_ARGS)

# Under two minutes: create/update/delete rates of a 2,000-resource layered stack and the
# preemption latency, both modes, beside the last committed bench/results/quick-latest.json
# (commit the rewritten file with your change). Same-run A/B against another checkout:
# `make bench-quick BENCH_ARGS='--against ../other-checkout'` (bench/quick.py).
bench-quick: install
	$(BIN)/python -m bench.quick $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
