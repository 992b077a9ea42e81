# memconsole: `make run` serves the console, `make test` runs the suite. Both set themselves up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
# The offline test model shipped beside the project; use it when no model folder is configured.
SHARED_MODEL := $(abspath ../shared/models/all-MiniLM-L6-v2)
ifeq ($(MEMCONSOLE_MODEL_DIR),)
ifneq ($(wildcard $(SHARED_MODEL)/model.onnx),)
export MEMCONSOLE_MODEL_DIR := $(SHARED_MODEL)
endif
endif

.PHONY: run test test-fast lint format typecheck hooks bench migrate lock audit clean help

help:
	@echo "make run    - set up, migrate, load demo data on first start, serve http://$(HOST):$(PORT)"
	@echo "make test   - set up the test environment and run the whole suite"
	@echo "make bench  - run the benchmarks (see bench/README section in README.md)"
	@echo "make lint   - the four gates CI runs before the tests: ruff format --check, ruff check, mypy,"
	@echo "              makemigrations --check"
	@echo "make typecheck - mypy alone;  make format - ruff format the tree;  make hooks - install the pre-commit hooks"
	@echo "make lock   - regenerate requirements*.lock (hashes) from requirements*.txt;  make audit - pip-audit the locks (network)"

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "memconsole needs Python 3.11 or newer" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Installs come from the lock files (every package pinned with its hashes), generated from the human-edited
# requirements*.txt by `make lock` (docs/operations.md, "Dependencies"). The local client package cannot be
# hashed: it is installed after the lock, without dependencies (its own, httpx and anyio, are in the lock).
# A pin edited in requirements*.txt without `make lock` (a Dependabot pull request) stops the install here.
CHECK_LOCK = awk -F'==' -v lock=$(1) 'BEGIN { while ((getline l < lock) > 0) if (l ~ /^[a-z0-9]/) { split(l, w, " "); have[w[1]] = 1 } } \
	/^[A-Za-z0-9][^=]*==/ { n = tolower($$1); sub(/\[.*/, "", n); gsub(/[._]+/, "-", n); split($$2, v, /[ ;\#]/); \
	if (!((n "==" v[1]) in have)) { print lock " is out of date, " n "==" v[1] " is not in it: run make lock" > "/dev/stderr"; bad = 1 } } \
	END { exit bad }' $(2)

$(VENV)/.run-installed: requirements.txt requirements.lock | $(BIN)/python
	@$(call CHECK_LOCK,requirements.lock,requirements.txt)
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements.lock
	@touch $@

$(VENV)/.test-installed: requirements.txt requirements-test.txt requirements-test.lock clients/python/pyproject.toml | $(BIN)/python
	@$(call CHECK_LOCK,requirements-test.lock,requirements.txt requirements-test.txt)
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements-test.lock
	$(BIN)/python -m pip install --quiet --no-deps -e ./clients/python
	@touch $@ $(VENV)/.run-installed

# The locks are for Python 3.11 on Linux x86_64 (CI, the Docker image). uv runs from a throwaway venv, not .venv.
# An existing lock keeps its unchanged pins; `make lock LOCK_ARGS=--upgrade` moves every unpinned dependency too.
LOCK_TOOLS := $(or $(TMPDIR),/tmp)/memconsole-lock-tools
UV_VERSION := 0.13.9
LOCK_FLAGS := --quiet --generate-hashes --python-version 3.11 --python-platform x86_64-unknown-linux-gnu \
	--custom-compile-command "make lock" $(LOCK_ARGS)
lock:
	$(PYTHON) -m venv $(LOCK_TOOLS)
	$(LOCK_TOOLS)/bin/python -m pip install --quiet uv==$(UV_VERSION)
	$(LOCK_TOOLS)/bin/uv pip compile $(LOCK_FLAGS) requirements.txt -o requirements.lock
	$(LOCK_TOOLS)/bin/uv pip compile $(LOCK_FLAGS) requirements-test.txt -c requirements.lock \
		--no-emit-package memconsole-client -o requirements-test.lock

# pip-audit checks the locked versions against its vulnerability database (it needs network access). It runs
# from a throwaway venv so that its own dependencies never mix with the project's. --strict: a package it could
# not look up (no network, no database) fails the audit instead of passing unchecked.
AUDIT_TOOLS := $(or $(TMPDIR),/tmp)/memconsole-audit-tools
PIP_AUDIT_VERSION := 2.10.1
audit:
	$(PYTHON) -m venv $(AUDIT_TOOLS)
	$(AUDIT_TOOLS)/bin/python -m pip install --quiet pip-audit==$(PIP_AUDIT_VERSION)
	$(AUDIT_TOOLS)/bin/pip-audit --strict --disable-pip --require-hashes --progress-spinner off \
		-r requirements.lock -r requirements-test.lock

migrate: $(VENV)/.run-installed
	$(BIN)/python manage.py migrate --noinput -v 0

run: migrate
	$(BIN)/python manage.py first_start
	@echo "Serving memconsole on http://$(HOST):$(PORT)/ for this one machine (Ctrl-C stops it); for more, put nginx in front (deploy/nginx.conf, docs/operations.md)"
	@echo "Background jobs (imports, erasure, health runs, index repair) run inside this server (MEMCONSOLE_JOBS_IN_WEB)"
	$(BIN)/gunicorn memconsole.wsgi --config python:memconsole.gunicorn_config --bind $(HOST):$(PORT)

test: $(VENV)/.test-installed
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The gates stop at the first failure; each says which one it is.
lint: $(VENV)/.test-installed
	@echo "== ruff format --check"
	$(BIN)/ruff format --check .
	@echo "== ruff check"
	$(BIN)/ruff check .
	@echo "== mypy"
	$(BIN)/mypy
	@echo "== mypy (clients/python, its own strict config)"
	cd clients/python && ../../$(BIN)/mypy
	@echo "== mypy (integrations/langbot, the LangBot plugin's own strict config)"
	cd integrations/langbot && ../../$(BIN)/mypy
	@echo "== makemigrations --check (every model change has its migration)"
	$(BIN)/python manage.py makemigrations --check --dry-run

typecheck: $(VENV)/.test-installed
	$(BIN)/mypy
	cd clients/python && ../../$(BIN)/mypy
	cd integrations/langbot && ../../$(BIN)/mypy

format: $(VENV)/.test-installed
	$(BIN)/ruff format .
	$(BIN)/ruff check --select I --fix .

# pre-commit is a developer tool, not a test requirement: installed into .venv on demand.
hooks: $(VENV)/.test-installed
	$(BIN)/python -m pip install --quiet pre-commit==4.7.0
	$(BIN)/pre-commit install

bench: $(VENV)/.test-installed
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache
