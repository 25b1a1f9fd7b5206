# One-command setup and tests on a machine with only Python 3.11, gcc and cmake.
#   make setup   .venv with pinned dependencies + the ROS 2 wheels + our interfaces
#   make test    setup when needed, then the whole pytest suite
#   make demo    setup when needed, then the end-to-end demo (see README)
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

INTERFACES := $(wildcard msg/*.msg srv/*.srv action/*.action)
NODE_SOURCES := $(wildcard m2sa_ros/*.py m2sa_ros/*/*.py)

.PHONY: setup test demo lock clean

setup: $(VENV)/.deps-stamp $(VENV)/.ros-stamp

# Dependencies: reinstalled only when the lock file or the project metadata change.
$(VENV)/.deps-stamp: requirements.lock pyproject.toml
	@echo "[setup] creating $(VENV) and installing pinned dependencies (first run: a few minutes)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -m pip install --progress-bar on -r requirements.lock
	@$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $@

# Interfaces: rebuilt when a definition or the build files change; new node modules
# are linked into the generated package.
$(VENV)/.ros-stamp: $(VENV)/.deps-stamp $(INTERFACES) CMakeLists.txt package.xml scripts/build_interfaces.sh $(NODE_SOURCES)
	@bash scripts/build_interfaces.sh
	@$(PY) -c "import rclpy, m2sa_ros.msg, m2sa_ros.srv, m2sa_ros.action, m2sa_core" \
	  && echo "[setup] ok: rclpy, m2sa_ros interfaces and m2sa_core import from $(PY)"
	@touch $@

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

demo: setup
	$(PY) -m m2sa_ros.bag.demo

# Re-pin: install requirements.in into a scratch venv and record every distribution;
# requirements-model.txt (a real ROS 2 install's venv) follows the lock.
lock:
	rm -rf build/lockenv && $(PYTHON) -m venv build/lockenv
	build/lockenv/bin/pip install --quiet --upgrade pip
	build/lockenv/bin/pip install -r requirements.in
	build/lockenv/bin/python scripts/freeze_lock.py > requirements.lock
	$(PYTHON) scripts/model_requirements.py > requirements-model.txt

clean:
	rm -rf build $(VENV)
