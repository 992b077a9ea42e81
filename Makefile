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

.PHONY: run test test-fast lint format typecheck hooks bench migrate clean help

help:
	@echo "make run    - set up, migrate, load demo data on first start, serve http://$(HOST):$(PORT)"
	@echo "make test   - set up the test environment and run the whole suite"
	@echo "make bench  - run the benchmarks (see bench/README section in README.md)"
	@echo "make lint   - the four gates CI runs before the tests: ruff format --check, ruff check, mypy,"
	@echo "              makemigrations --check"
	@echo "make typecheck - mypy alone;  make format - ruff format the tree;  make hooks - install the pre-commit hooks"

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "memconsole needs Python 3.11 or newer" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.run-installed: requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements.txt
	@touch $@

$(VENV)/.test-installed: requirements.txt requirements-test.txt clients/python/pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements-test.txt
	@touch $@ $(VENV)/.run-installed

migrate: $(VENV)/.run-installed
	$(BIN)/python manage.py migrate --noinput -v 0

run: migrate
	$(BIN)/python manage.py first_start
	@echo "Serving memconsole on http://$(HOST):$(PORT)/ for this one machine (Ctrl-C stops it); for more, put nginx in front (deploy/nginx.conf, docs/operations.md)"
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
	@echo "== makemigrations --check (every model change has its migration)"
	$(BIN)/python manage.py makemigrations --check --dry-run

typecheck: $(VENV)/.test-installed
	$(BIN)/mypy
	cd clients/python && ../../$(BIN)/mypy

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
