# Tributary: the README's commands. Everything installs into $(TRIBUTARY_CACHE)
# (default ~/.cache/tributary), outside the clone; see infra/bootstrap.py.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PY      := .venv/bin/python
RECORD  := .state/started-by-test
# The background start of the test services: its output, then its exit status (written however
# the start ends: the tests wait for it; under -e a bare failing command would end the group).
STARTING_LOG := .state/test-services-start.log
STARTED := .state/test-services-start.status
# The tests' own services: own ports and state folder, beside any `make up` started.
TEST_ENV := $(PY) -m infra.test_env
# Test workers, each with its own Spark driver; a module runs whole on one of them, and the
# modules that use Airflow one after another (tests/scheduling.py). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
PYTEST  := $(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope
LINT    := .venv/bin/ruff check . && .venv/bin/ruff format --check .
# Its cache outside the clone, as every build's: a fresh clone type-checks from it.
TYPES   := MYPY_CACHE_DIR=$${TRIBUTARY_CACHE:-$$HOME/.cache/tributary}/mypy .venv/bin/mypy

.PHONY: help setup up down status airflow demo generate generate-changes speed batch query compare migrate-bronze test test-fast test-unit test-up test-down clean-bench compose-env lint typecheck lock

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

setup:  ## install what is missing: venv, Spark and Kafka jars, MinIO, secrets (cached)
	@python3 infra/bootstrap.py all

up: setup  ## start Kafka, MinIO, PostgreSQL, Kafka Connect and Airflow on 127.0.0.1
	@$(PY) -m infra.services up

down:  ## stop every embedded service
	@if [ -x $(PY) ]; then $(PY) -m infra.services down; else echo "nothing installed yet"; fi

status:  ## report the services: running, healthy, address, log file
	@$(PY) -m infra.services status || true

airflow: setup  ## the Airflow CLI against our Airflow: make airflow ARGS="dags list"
	@$(PY) -m infra.services airflow $(ARGS)

demo: up  ## run the main job end to end, say where to look, and leave the automatic chain's DAGs unpaused
	@$(PY) -m jobs.demo
	@$(PY) -m infra.services chain

generate: setup  ## send events with anomalies to Kafka: make generate ARGS="--count 10000 --realtime --rate 500"
	@$(PY) -m jobs.generate $(ARGS)

generate-changes: setup  ## insert, update, delete shop rows in PostgreSQL: make generate-changes ARGS="--count 1000 --rate 50"
	@$(PY) -m jobs.generate_changes $(ARGS)

speed: setup  ## run the speed layer in the foreground until Ctrl-C (Airflow's speed_layer DAG runs it detached)
	@$(PY) -m jobs.speed_layer $(ARGS)

batch: setup  ## recompute the views for a closed interval: make batch ARGS="--start 2026-11-25T10:00Z --end 2026-11-25T11:00Z"
	@$(PY) -m jobs.batch_layer $(ARGS)

query: setup  ## print a serving view: make query ARGS="event_counts_1m --from 2026-11-25T10:00Z --to 2026-11-25T12:00Z"
	@$(PY) -m jobs.cli query $(ARGS)

migrate-bronze: setup  ## rewrite bronze tables with string key/value as bytes, checked (stop the speed layer first)
	@$(PY) -m jobs.migrate_bronze $(ARGS)

compare: setup  ## reconcile two sources window by window: make compare ARGS="--left batch --right speed"
	@$(PY) -m jobs.cli compare $(ARGS)

test: setup  ## lint, types and every test against services of its own (ports +10000), started beside the linters and the first tests, and then stopped
	@mkdir -p .state && rm -f $(RECORD) $(STARTED)
	@$(TEST_ENV) --fresh
	@echo "==> test services: starting in the background (log: $(STARTING_LOG)); a test that needs one waits for it"
	@status=0; \
	{ $(TEST_ENV) $(PY) -m infra.services up --record $(RECORD) > $(STARTING_LOG) 2>&1 && started=0 || started=$$?; echo $$started > $(STARTED); } & services=$$!; \
	{ $(LINT) && $(TYPES); } || status=$$?; \
	if [ $$status -eq 0 ]; then \
		TRIBUTARY_TEST_SERVICES_RECORD=$(RECORD) TRIBUTARY_TEST_SERVICES_ENDED=$(STARTED) $(PYTEST) || status=$$?; \
	fi; \
	wait $$services; cat $(STARTING_LOG); \
	started=$$(cat $(STARTED)); [ "$$started" = 0 ] || { echo "the test services did not start: see above"; status=1; }; \
	$(TEST_ENV) $(PY) -m infra.services down --only-recorded $(RECORD) || true; \
	exit $$status

test-up: setup  ## start the tests' own services and leave them running (for pytest by hand)
	@$(TEST_ENV) --fresh
	@$(TEST_ENV) $(PY) -m infra.services up

test-down:  ## stop the tests' own services
	@if [ -x $(PY) ]; then $(TEST_ENV) $(PY) -m infra.services down; else echo "nothing installed yet"; fi

test-fast: setup  ## the inner loop: the tests that need no service, but for the modules marked slow
	@$(PYTEST) -m "not slow" tests/unit tests/dags tests/infra

test-unit: setup  ## every test that needs no service, the slow modules included (unit, DAG files, infra)
	@$(PYTEST) tests/unit tests/dags tests/infra

.PHONY: cluster-up cluster-down
# The loopback cluster (docs/cluster.md), beside the embedded services on ports of its own.
CLUSTER_SERVICES := kafka-cluster minio-cluster spark-cluster

cluster-up: setup  ## start a Spark master + 2 workers, 3 Kafka brokers, a 4-drive MinIO on 127.0.0.1 (profile cluster)
	@TRIBUTARY_PROFILE=cluster $(PY) -m infra.services up $(CLUSTER_SERVICES)

cluster-down:  ## stop the loopback cluster
	@if [ -x $(PY) ]; then TRIBUTARY_PROFILE=cluster $(PY) -m infra.services down $(CLUSTER_SERVICES); else echo "nothing installed yet"; fi

clean-bench: setup  ## delete the benchmarks' Kafka topics and lakehouses (needs `make up`; bench/results stays)
	@$(PY) -m bench.clean

compose-env:  ## write the generated secrets for `docker compose --env-file` (see docker-compose.yml)
	@python3 -c 'import sys; sys.path.insert(0, "."); from lakehouse.core.secrets import write_compose_env; print("wrote", write_compose_env())'

lint: setup  ## ruff lint and format check
	@$(LINT)

typecheck: setup  ## mypy on lakehouse/, jobs/ and infra/
	@$(TYPES)

lock:  ## recompile infra/python/requirements.lock from pyproject.toml
	@.venv/bin/uv pip compile pyproject.toml --extra dev --python-version 3.11 \
		--generate-hashes --no-header -o infra/python/requirements.lock
