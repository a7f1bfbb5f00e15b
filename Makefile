# Quire: `make run` starts the app with demo data; `make test` runs the whole test suite.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
export HOST PORT

.PHONY: run test bench lint install install-dev clean

$(VENV)/bin/python:
	@$(PYTHON) -m venv $(VENV) 2>/dev/null || { \
	  echo "python3 -m venv failed; installing Debian's python3-venv"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq python3-venv; \
	  else sudo apt-get install -y -qq python3-venv; fi; \
	  rm -rf $(VENV); $(PYTHON) -m venv $(VENV); }
	@$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed: requirements.txt | $(VENV)/bin/python
	$(PY) -m pip install -q -r requirements.txt
	@touch $@

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt | $(VENV)/bin/python
	$(PY) -m pip install -q -r requirements-dev.txt
	@touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

run: $(VENV)/.installed
	$(PY) manage.py migrate --noinput -v 0
	$(PY) manage.py load_demo
	@echo "Starting Quire on http://$(HOST):$(PORT)/ and one Celery worker; Ctrl-C stops both."
	@$(VENV)/bin/celery -A config worker --concurrency=1 --loglevel=WARNING & worker=$$!; \
	trap 'kill -TERM $$worker 2>/dev/null; wait $$worker' EXIT; \
	$(PY) manage.py runserver --insecure --noreload $(HOST):$(PORT)

test: $(VENV)/.installed-dev
	$(VENV)/bin/pytest

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .

bench: $(VENV)/.installed-dev
	@set -euo pipefail; source .ci/services.sh; trap services_stop EXIT; \
	if [ -z "$${DATABASE_URL:-}" ]; then services_install; services_start; fi; \
	for script in bench/*_bench.py; do $(PY) $$script; done

clean:
	rm -rf var .pytest_cache .mypy_cache .ruff_cache
