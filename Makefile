# Yak — one entry point for people and CI. `make up` and `make test` work on a fresh machine
# (Debian/Ubuntu with Python >= 3.11 and make): they create .venv and install everything first.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
YAK_ARGS ?=

.PHONY: install chromium peers deploy-tools up test lint typecheck imports unit bench bench-codec bench-storage bench-broker bench-replication bench-proxy bench-console bench-spark bench-peers bench-latency soak clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark,bench]'
	touch $(STAMP)

install: $(STAMP)

## Debian's chromium for the console's browser tests: Playwright drives it through
## executable_path and never downloads a browser of its own.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

## Debian's redis-server and nats-server: the peers the benchmarks compare Yak with (the
## harness starts them itself, on 127.0.0.1; the test run smoke-tests their drivers).
peers:
	@{ command -v redis-server && command -v nats-server; } >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server nats-server; }

## Debian's docker-compose: `docker-compose config` validates deploy/compose/ without a Docker
## engine (the deploy tests run it; hadolint and check-jsonschema come with the dev extra).
deploy-tools:
	@command -v docker-compose >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose; }

## Start the local cluster in the foreground (Ctrl-C stops it).
up: $(STAMP)
	$(BIN)/yak up $(YAK_ARGS)

## Every check and test: lint, format, types, import contracts, pytest.
test: $(STAMP) chromium peers deploy-tools lint typecheck imports unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP) chromium peers deploy-tools
	$(BIN)/pytest

## Benchmarks (not part of `make test`); each writes loadtest/results/<name>.json.
bench: bench-codec bench-storage bench-broker bench-replication bench-proxy bench-console bench-spark bench-latency

bench-codec: $(STAMP)
	$(BIN)/python -m loadtest.bench_codec

bench-storage: $(STAMP)
	$(BIN)/python -m loadtest.bench_storage

bench-broker: $(STAMP)
	$(BIN)/python -m loadtest.bench_broker

bench-replication: $(STAMP)
	$(BIN)/python -m loadtest.bench_replication

bench-proxy: $(STAMP)
	$(BIN)/python -m loadtest.bench_proxy

bench-console: $(STAMP)
	$(BIN)/python -m loadtest.bench_console

bench-spark: $(STAMP)
	$(BIN)/python -m loadtest.bench_spark

## Yak against Redis Streams and NATS JetStream: docs/benchmarks.md, loadtest/results/peers.json.
bench-peers: $(STAMP) peers
	$(BIN)/python -m loadtest.peers

## Idle produce latency, end-to-end latency at 1k and 10k msg/s and CPU per record, next to
## Redis Streams and a baseline build (BENCH_LATENCY_ARGS="--baseline REF" or "--no-baseline"):
## loadtest/results/latency.json and the results block of docs/performance.md.
BENCH_LATENCY_ARGS ?=
bench-latency: $(STAMP) peers
	$(BIN)/python -m loadtest.bench_latency $(BENCH_LATENCY_ARGS)

## Soak (not part of `make test`): 30 min at half the max produce rate with a broker restarted
## every 5 min; loadtest/results/soak.json, docs/benchmarks/soak-*.png. SOAK_ARGS="--duration 2h".
SOAK_ARGS ?=
soak: $(STAMP)
	$(BIN)/python -m loadtest.soak $(SOAK_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .import_linter_cache
