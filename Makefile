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

.PHONY: run test test-fast lint bench migrate clean help

help:
	@echo "make run    - set up, migrate, load demo data on first start, serve http://$(HOST):$(PORT)"
	@echo "make test   - set up the test environment and run the whole suite"
	@echo "make bench  - run the benchmarks (see bench/README section in README.md)"
	@echo "make lint   - ruff"

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "memconsole needs Python 3.11 or newer" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.run-installed: requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements.txt
	@touch $@

$(VENV)/.test-installed: requirements.txt requirements-test.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements-test.txt
	@touch $@ $(VENV)/.run-installed

migrate: $(VENV)/.run-installed
	$(BIN)/python manage.py migrate --noinput -v 0

run: migrate
	$(BIN)/python manage.py first_start
	@echo "Serving memconsole on http://$(HOST):$(PORT)/ (Ctrl-C stops it)"
	$(BIN)/gunicorn memconsole.wsgi --config python:memconsole.gunicorn_config --bind $(HOST):$(PORT)

test: $(VENV)/.test-installed
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.test-installed
	$(BIN)/ruff check memconsole tests bench

bench: $(VENV)/.test-installed
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache
