# Two commands do everything on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# Django 6 needs Python >= 3.12: take one from PATH, else from pyenv.
# (pyenv shims exist for every installed version but fail unless selected, so try each.)
PYTHON ?= $(shell for p in python3.13 python3.12; do $$p -c '' 2>/dev/null && command -v $$p && exit; done; \
	ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.1[23]*/bin/python3 2>/dev/null | tail -n 1)
# llama.cpp is compiled once by pip and then reused from pip's wheel cache.
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc)
SERVICES_ENV := DATABASE_URL=$${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test} \
	REDIS_URL=$${TEST_REDIS_URL:-redis://127.0.0.1:6379/0}

.PHONY: run test test-services lint typecheck browser install bench

$(VENV)/.installed: requirements.txt
	@test -n "$(PYTHON)" || { echo "Python 3.12+ not found (Django 6 needs it)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	@touch $@

install: $(VENV)/.installed

## Run the app: engine + web + worker as one supervised group (Ctrl-C stops all).
run: install
	$(PY) -m playground.devrun

## Browser tests drive Debian's chromium; install it when missing (needs root).
browser:
	@command -v chromium >/dev/null || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
		else echo "Install Debian's chromium (apt-get install chromium) for the browser tests"; exit 1; fi; }

## The whole suite on the embedded defaults (SQLite, in-memory layer, no services).
test: install browser
	$(PY) -m pytest

## The same suite against the local PostgreSQL and Redis.
test-services: install browser
	$(SERVICES_ENV) $(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install
	$(VENV)/bin/mypy playground

bench: install
	$(PY) benchmarks/engine_prefix_cache.py
	$(PY) benchmarks/stream_relay.py
