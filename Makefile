# Set-up and the main jobs.  On a fresh machine (Python 3.11, Debian) `make demo` and `make test` do everything:
# `make demo` the core (EGL libraries for offscreen rendering, apt when root; the .venv; this package in editable
# mode, no extras; the model zoo's data package from zoo/, no download), `make test` the rest on top (chromium for
# the page test, torch (CPU) first, robomimic without its heavy pins, every extra the tests use).  Installs come
# from PyPI and Debian only.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Two stamps: the core (what `make demo` needs) and the full set-up on top of it (tests, lint, benchmarks).
CORE_STAMP := $(VENV)/.r2s2r-core
STAMP := $(VENV)/.r2s2r-installed
# pip takes a CPU build of torch where one is at hand; a bare `torch` requirement would pull a multi-GB CUDA build.
TORCH_VERSION ?= 2.13.0
ROBOMIMIC_VERSION ?= 0.3.0
# System packages: the EGL libraries for offscreen rendering (MuJoCo loads them at import with MUJOCO_GL=egl), and
# chromium, the real headless browser in which tests/test_leaderboard.py opens the leaderboard page (test only).
EGL_PACKAGES := libegl1 libegl-mesa0 libgl1-mesa-dri
TEST_PACKAGES := chromium

# Headless offscreen rendering: MuJoCo picks its GL backend at import time.
export MUJOCO_GL ?= egl

.PHONY: help setup egl chromium demo test test-fast lint typecheck format bench clean

help:
	@echo "make demo      set up the core, then 3 demo episodes of every variant and the lab, side by side (r2s2r demo --env all)"
	@echo "make test      set up everything, then run the whole test suite (python -m pytest -q -n auto: a worker per core, slow tests included)"
	@echo "make test-fast tests without the slow marker"
	@echo "make lint      ruff check, ruff format --check and the type check (CI runs it)"
	@echo "make typecheck mypy on the package; its errors may only shrink (.ci/typecheck.py)"
	@echo "make bench     env speed and 100-seed planner success (benchmarks/)"
	@echo "make setup     only the full set-up; make clean removes .venv and build outputs"

setup: $(STAMP)

egl:
	@if ldconfig -p | grep -q 'libEGL.so.1' && ldconfig -p | grep -q 'libEGL_mesa.so.0'; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing the EGL libraries for offscreen rendering: $(EGL_PACKAGES)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(EGL_PACKAGES); \
	else \
		echo "error: offscreen rendering needs EGL. Install (as root): apt-get install -y $(EGL_PACKAGES)" >&2; \
		exit 1; \
	fi

chromium:
	@if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing chromium for the leaderboard page test: $(TEST_PACKAGES)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(TEST_PACKAGES); \
	else \
		echo "error: tests/test_leaderboard.py opens the page in chromium. Install (as root): apt-get install -y $(TEST_PACKAGES)" >&2; \
		exit 1; \
	fi

# The zoo's checkpoints are a data package of their own (zoo/, r2s2r_envs_zoo), kept out of the core wheel and
# installed from this checkout; the core's zoo index pins their hashes (r2s2r_envs/policies/zoo/index.json).
$(CORE_STAMP): pyproject.toml zoo/pyproject.toml r2s2r_envs/policies/zoo/index.json | egl
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), f"Python >= 3.11 needed, found {sys.version}"'
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -e . -e ./zoo
	touch $@

# robomimic 0.3.0 pins old versions of many packages: install it without dependencies, after the few it
# needs at import time.  pip would then warn, on every later install, that robomimic's pins (tensorboardX,
# torchvision, egl_probe, ...) are missing: those are for robomimic's training scripts, which this suite does not
# use, so the warning is switched off (--no-warn-conflicts) and explained once here instead.
$(STAMP): $(CORE_STAMP) | chromium
	$(PIP) install -q torch==$(TORCH_VERSION)
	$(PIP) install -q six tqdm termcolor psutil matplotlib
	$(PIP) install -q --no-deps robomimic==$(ROBOMIMIC_VERSION)
	@echo "robomimic $(ROBOMIMIC_VERSION) installed without its training-script pins (not needed to read datasets)"
	$(PIP) install -q --no-warn-conflicts -e '.[torch,rl,ray,course,interop,test,plots,analysis]'
	touch $@

demo: $(CORE_STAMP)
	$(VENV)/bin/r2s2r demo --env all --episodes 3

test: $(STAMP)
	$(PY) -m pytest -q -n auto --dist worksteal

test-fast: $(STAMP)
	$(PY) -m pytest -q -n auto --dist worksteal -m "not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) .ci/typecheck.py

typecheck: $(STAMP)
	$(PY) .ci/typecheck.py

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: $(STAMP)
	$(PY) benchmarks/env_speed.py --out runs/env_speed.json --actions zeros,random,planner
	$(PY) benchmarks/planner_success.py --seeds 100 --workers 2 --out runs/planner_success.json
	$(PY) benchmarks/dataset_speed.py --out-dir runs/dataset_speed

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
