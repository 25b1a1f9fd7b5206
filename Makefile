# One-command setup and tests on a machine with only Python 3.11, gcc and cmake.
#   make setup   .venv with pinned dependencies + the ROS 2 wheels + our interfaces
#   make test    setup when needed, then the whole pytest suite
#   make demo    setup when needed, then the end-to-end demo (see README)
#   make test-ros  the ROS-facing tests only (what CI runs on Jazzy)
#   make lock    re-pin both distributions' locks (and requirements-model.txt)
# The ROS 2 distribution is Kilted unless ROS_DISTRO says otherwise: `ROS_DISTRO=jazzy
# make test`, or any shell that sourced /opt/ros/jazzy/setup.bash (which sets it), uses
# .venv-jazzy from requirements-jazzy.lock; both venvs can live side by side.
SHELL := /bin/bash
PYTHON ?= python3.11
override ROS_DISTRO := $(or $(strip $(ROS_DISTRO)),kilted)
ifeq ($(ROS_DISTRO),kilted)
  VENV := .venv
  REQUIREMENTS := requirements
else ifeq ($(ROS_DISTRO),jazzy)
  VENV := .venv-jazzy
  REQUIREMENTS := requirements-jazzy
else
  $(error ROS_DISTRO=$(ROS_DISTRO) is not supported: use kilted (the default) or jazzy)
endif
# The tests and the bag tools read it (the rosbags typestore follows the distribution).
export ROS_DISTRO
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

INTERFACES := $(wildcard msg/*.msg srv/*.srv action/*.action)
NODE_SOURCES := $(wildcard m2sa_ros/*.py m2sa_ros/*/*.py)

.PHONY: setup test test-ros demo lock clean

setup: $(VENV)/.deps-stamp $(VENV)/.ros-stamp

# Dependencies: reinstalled only when the lock file or the project metadata change.
$(VENV)/.deps-stamp: $(REQUIREMENTS).lock pyproject.toml
	@echo "[setup] ROS 2 $(ROS_DISTRO): creating $(VENV) and installing pinned dependencies (first run: a few minutes)"
	@test -x $(PY) || { free_kb=$$(df -Pk . | awk 'NR==2 {print $$4}'); \
	  if [ "$$free_kb" -lt 7340032 ]; then echo "[setup] warning: $(VENV) takes about 7 GB (torch's CUDA build) and only $$((free_kb / 1048576)) GB are free here" >&2; fi; \
	  $(PYTHON) -m venv $(VENV); }
	@$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -m pip install --progress-bar on -r $(REQUIREMENTS).lock
	@$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $@

# Interfaces: rebuilt when a definition or the build files change; new node modules
# are linked into the generated package.
$(VENV)/.ros-stamp: $(VENV)/.deps-stamp $(INTERFACES) CMakeLists.txt package.xml scripts/build_interfaces.sh $(NODE_SOURCES)
	@bash scripts/build_interfaces.sh $(VENV) $(ROS_DISTRO)
	@$(PY) -c "import rclpy, m2sa_ros.msg, m2sa_ros.srv, m2sa_ros.action, m2sa_core" \
	  && echo "[setup] ok: rclpy, m2sa_ros interfaces and m2sa_core import from $(PY)"
	@touch $@

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

# The ROS-facing tests: every test marked `ros` (the node, DDS, bag replay, colcon, the
# demo), then the rest of the files that read ROS files or wheels without a node.
ROS_FACING_FILES := tests/ros/bag/test_bag_tools.py tests/ros/test_launch_files.py tests/tools/test_distributions.py \
  tests/tools/test_package.py
# Both runs report even when the first fails; the target fails if either did.
test-ros: setup
	status=0; $(PY) -m pytest -m ros $(PYTEST_ARGS) || status=$$?; \
	$(PY) -m pytest -m "not ros" $(ROS_FACING_FILES) $(PYTEST_ARGS) || status=$$?; \
	exit $$status

demo: setup
	$(PY) -m m2sa_ros.bag.demo

# Re-pin both distributions: install each .in into a scratch venv and record every
# distribution. Jazzy's non-ROS pins are held to Kilted's, so one requirements-model.txt
# (the model stack for a venv over a real ROS 2 install) follows both locks.
define pin
	rm -rf build/lockenv && $(PYTHON) -m venv build/lockenv
	build/lockenv/bin/pip install --quiet --upgrade pip
	build/lockenv/bin/pip install -r $(1).in $(2)
	build/lockenv/bin/python scripts/freeze_lock.py $(1) > build/$(1).lock
	mv build/$(1).lock $(1).lock
endef
lock:
	$(call pin,requirements)
	grep -v '^ros-' requirements.lock > build/kilted-pins.txt
	$(call pin,requirements-jazzy,-c build/kilted-pins.txt)
	$(PYTHON) scripts/model_requirements.py > requirements-model.txt

# Removes this distribution's venv (ROS_DISTRO=jazzy make clean for .venv-jazzy).
clean:
	rm -rf build $(VENV)
