# Agent RL Workbench. `make run` starts everything on this machine; `make test` runs the test suite.
# Without DATABASE_URL / REDIS_URL, `make run` uses SQLite and a filesystem broker under var/.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
WORKER_CONCURRENCY ?= 2
TEST_PROCESSES ?= 2
BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/workbench
SHELL := /bin/bash

.PHONY: run test test-fast bench lint venv screenshots clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip

# Reinstall only when a requirements file changed since the last install.
$(STAMP): requirements.txt requirements-dev.txt | $(PY)
	$(PY) -m pip install -r requirements.txt -r requirements-dev.txt
	touch $(STAMP)

venv: $(STAMP)

# The worker runs in the recipe shell's process group, so Ctrl-C stops it with the web server. Like every
# worker it also sweeps for runs stranded by a dead worker (workbench/runs/execution/sweeper.py): no beat process.
# Keep-alive outlasts the pages' 2 s polls, so a poll never races the server closing its connection.
run: $(STAMP)
	mkdir -p var
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput -v 0
	$(PY) manage.py seed_demo
	$(PY) manage.py seed_demo_runs
	@echo ""
	@echo "  Workbench: http://$(HOST):$(PORT)/   (log in as shown above; worker log: var/worker.log)"
	@echo ""
	@# One torch thread per run: the two demo runs train at once, a core each, instead of four threads on two.
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} \
	$(PY) -m celery -A workbench worker -Q gpu,rollout,cpu -n local@%h -c $(WORKER_CONCURRENCY) -l INFO \
		--logfile var/worker.log & worker=$$!; \
	trap 'kill $$worker 2>/dev/null; wait $$worker' EXIT; \
	$(VENV)/bin/gunicorn workbench.wsgi -b $(HOST):$(PORT) --workers 2 --threads 4 --timeout 600 \
		--keep-alive 5 --access-logfile -

# Test tiers, by pytest mark (pyproject.toml): unmarked tests run in this process and take under 5 s each
# (an unmarked test over that fails: tests/support/call_budget.py); `slow` ones train or run end to end
# for longer; `services` ones start Celery worker processes; `browser` ones drive chromium.
# tests.services uses the PostgreSQL and Redis that answer, or starts throwaway ones from the installed
# binaries for the run (and says what to install when there are none). A per-test timeout makes a hang
# fail the run instead of stalling CI; the slowest tests are listed at the end, to keep the suite short.
# `make test` runs every tier (what CI runs) in TEST_PROCESSES pytest processes (pytest-xdist), a test file
# to a process: one trains while the other waits on a worker, a browser or a subprocess. Each process has
# its own test database, Redis keys and run directory (tests/workbench/conftest.py).
test: $(STAMP)
	$(PY) -m tests.services -- $(PY) -m pytest tests -q -n $(TEST_PROCESSES) --dist loadfile \
		--timeout=900 --durations=20

# The edit loop: the unmarked tier only, a few minutes. The workbench's tests still talk to PostgreSQL
# (pytest-django's test database) and Redis (the broker a launched job is sent to), as in production, so
# this runs under tests.services too; what it leaves out is every worker process, chromium and training.
test-fast: $(STAMP)
	$(PY) -m tests.services -- $(PY) -m pytest tests -q -m "not slow and not services and not browser" \
		--timeout=300 --durations=10

# Benchmarks need PostgreSQL; each script's output is kept in bench-results/<script>.txt.
bench: $(STAMP)
	mkdir -p bench-results
	export DATABASE_URL=$${DATABASE_URL:-$(BENCH_DATABASE_URL)}; \
	$(PY) manage.py migrate --noinput -v 0 && \
	status=0; for script in tests/benchmarks/bench_*.py; do \
		name=$$(basename $$script .py); echo "== $$name"; \
		$(PY) $$script 2>&1 | tee bench-results/$$name.txt; \
		[ $${PIPESTATUS[0]} -eq 0 ] || status=1; \
	done; exit $$status

# Browser tests that call the screenshot fixture save their pages here, for the README.
screenshots: $(STAMP)
	WORKBENCH_SCREENSHOTS=docs/screenshots $(PY) -m pytest tests/workbench -m browser -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf var staticfiles bench-results
