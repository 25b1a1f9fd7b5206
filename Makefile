# One-command setup and tests on a machine with only Python 3.11, gcc and cmake.
#   make setup   .venv with pinned dependencies + the ROS 2 wheels + our interfaces
#   make test    setup when needed, then the whole pytest suite (on every core)
#   make test-fast  the tests with no child process and no DDS (a few minutes)
#   make demo    setup when needed, then the end-to-end demo (see README)
#   make test-ros  the ROS-facing tests only (what CI runs on Jazzy)
#   make lint    the ament linters colcon test runs (flake8, pep257, copyright, xmllint)
#   make lock    re-pin both distributions' locks (and requirements-model.txt for Python 3.10-3.12)
#   make check-model-requirements   does requirements-model.txt resolve on 3.10 and 3.12? (CI)
# The ROS 2 distribution is Kilted unless ROS_DISTRO says otherwise: `ROS_DISTRO=jazzy
# make test`, or any shell that sourced /opt/ros/jazzy/setup.bash (which sets it), uses
# .venv-jazzy from requirements-jazzy.lock; both venvs can live side by side.
# The upstream ROS packages PyPI lacks (tf2, launch, the ros2 CLI, ...) are fetched from GitHub at
# the commits ros-src/<distro>.repos pins and built on the first setup. Offline, ROS_SRC names a
# mirror of their tarballs instead: `make setup ROS_SRC=/path/to/mirror` (scripts/build_ros_src.sh).
SHELL := /bin/bash
override ROS_DISTRO := $(or $(strip $(ROS_DISTRO)),kilted)
# Each distribution's venv is built on an interpreter of its own: Jazzy's on 3.12, the
# Python of Ubuntu 24.04 that Jazzy robots run; Kilted's on 3.11, the lock's. The locks hold
# for both (every pin has cp311 and cp312 wheels); PYTHON=... overrides either.
KILTED_PYTHON ?= python3.11
JAZZY_PYTHON ?= python3.12
ifeq ($(ROS_DISTRO),kilted)
  VENV := .venv
  REQUIREMENTS := requirements
  PYTHON ?= $(KILTED_PYTHON)
else ifeq ($(ROS_DISTRO),jazzy)
  VENV := .venv-jazzy
  REQUIREMENTS := requirements-jazzy
  PYTHON ?= $(JAZZY_PYTHON)
else
  $(error ROS_DISTRO=$(ROS_DISTRO) is not supported: use kilted (the default) or jazzy)
endif
# The tests and the bag tools read it (the rosbags typestore follows the distribution).
export ROS_DISTRO
# Bytecode is cached: a shell that sets PYTHONDONTWRITEBYTECODE (CI images often do) would
# make every one of the suite's Python processes (pytest's workers, each node, training
# run and tool they start) compile the project's modules, and pytest rewrite every test
# module, again (docs/TESTING.md, "Where the time goes").
unexport PYTHONDONTWRITEBYTECODE
PY := $(VENV)/bin/python
PYTEST_ARGS ?= --durations=20  # the slowest twenty in every run's log (docs/TESTING.md, "Where the time goes")

INTERFACES := $(wildcard msg/*.msg srv/*.srv action/*.action)
NODE_SOURCES := $(wildcard m2sa_ros/*.py m2sa_ros/*/*.py)

.PHONY: setup test test-fast test-ros demo lint lock check-model-requirements clean

setup: $(VENV)/.deps-stamp $(VENV)/.ros-stamp $(VENV)/.ros-src-stamp $(VENV)/.xmllint-stamp

# ament_xmllint runs the xmllint program, which pip cannot install (Debian and Ubuntu:
# libxml2-utils). Without it the xmllint test of colcon test is registered disabled and
# make lint stops, so setup installs it where it may and says so where it cannot (once per
# venv: a stamp, not a phony target, so `make -q setup` can tell a venv that is set up).
$(VENV)/.xmllint-stamp: $(VENV)/.deps-stamp
	@command -v xmllint >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then sudo=; else sudo="sudo -n"; fi; \
	  echo "[setup] installing xmllint (apt-get install libxml2-utils) for ament_xmllint"; \
	  if command -v apt-get >/dev/null 2>&1 && { $$sudo apt-get install -y -q libxml2-utils >/dev/null 2>&1 || \
	       { $$sudo apt-get update -q >/dev/null 2>&1 && $$sudo apt-get install -y -q libxml2-utils >/dev/null 2>&1; }; }; \
	  then echo "[setup] ok: $$(command -v xmllint)"; \
	  else echo "[setup] warning: xmllint is missing and could not be installed here; install libxml2-utils" \
	    "(or your system's xmllint), else the xmllint lint test cannot run" >&2; fi; }
	@touch $@

# The venv itself, on PYTHON. One built on another minor version (an older checkout's Jazzy
# venv was built on 3.11) is set up again from scratch: its compiled wheels and the upstream
# ROS packages built into it are for the other interpreter. A venv already on the right one
# gets the stamp with its own age, so nothing after it is redone.
PYTHON_MINOR := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
VENV_PYTHON_STAMP := $(VENV)/.python-$(or $(PYTHON_MINOR),missing)
$(VENV_PYTHON_STAMP):
	@test -n "$(PYTHON_MINOR)" || { echo "[setup] $(PYTHON) is not to be had here, and ROS 2 $(ROS_DISTRO)'s venv is" \
	  "built on it (Jazzy's on python3.12, Ubuntu 24.04's): install it, or name another with PYTHON=/path/to/python3.X" >&2; exit 1; }
	@if [ -x $(PY) ] && [ "$$($(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = "$(PYTHON_MINOR)" ]; then \
	  touch -r $(VENV)/pyvenv.cfg $@; exit 0; fi; \
	if [ -e $(VENV) ]; then echo "[setup] $(VENV) was not built on Python $(PYTHON_MINOR) ($(PYTHON)): setting it up again"; \
	  rm -rf $(VENV); fi; \
	free_kb=$$(df -Pk . | awk 'NR==2 {print $$4}'); \
	if [ "$$free_kb" -lt 7340032 ]; then echo "[setup] warning: $(VENV) takes about 7 GB (torch's CUDA build) and only $$((free_kb / 1048576)) GB are free here" >&2; fi; \
	echo "[setup] ROS 2 $(ROS_DISTRO): creating $(VENV) on Python $(PYTHON_MINOR) ($(PYTHON))"; \
	$(PYTHON) -m venv $(VENV) && touch -r $(VENV)/pyvenv.cfg $@

# Dependencies: reinstalled only when the lock file or the project metadata change. pip
# does not compile the 14,000 modules it installs (about 50 s of CPU a venv, most of them
# never imported here): Python writes the bytecode of those imported on their first import.
$(VENV)/.deps-stamp: $(VENV_PYTHON_STAMP) $(REQUIREMENTS).lock pyproject.toml
	@echo "[setup] ROS 2 $(ROS_DISTRO): installing pinned dependencies into $(VENV) (first run: a few minutes)"
	@$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -m pip install --no-compile --progress-bar on -r $(REQUIREMENTS).lock
	@$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $@

# Interfaces: rebuilt when a definition or the build files change; new node modules
# are linked into the generated package.
$(VENV)/.ros-stamp: $(VENV)/.deps-stamp $(INTERFACES) CMakeLists.txt package.xml scripts/build_interfaces.sh $(NODE_SOURCES)
	@bash scripts/build_interfaces.sh $(VENV) $(ROS_DISTRO)
	@$(PY) -c "import rclpy, m2sa_ros.msg, m2sa_ros.srv, m2sa_ros.action, m2sa_core" \
	  && echo "[setup] ok: rclpy, m2sa_ros interfaces and m2sa_core import from $(PY)"
	@touch $@

# The upstream ROS packages PyPI lacks (tf2, vision_msgs, bond, launch, the ros2 CLI,
# image_geometry, the ament linters), built with colcon over the venv (scripts/build_ros_src.sh;
# about 3 minutes on 2 cores, once per venv) from the sources ros-src/$(ROS_DISTRO).repos pins:
# fetched from GitHub (scripts/fetch_ros_src.sh), or taken from the tarballs of an offline mirror
# where ROS_SRC names one (ROS_SRC=/path/to/mirror, from the command line or the environment:
# make hands either to the recipe).
$(VENV)/.ros-src-stamp: $(VENV)/.ros-stamp scripts/build_ros_src.sh scripts/fetch_ros_src.sh scripts/ros_repos.py \
    ros-src/$(ROS_DISTRO).repos
	@bash scripts/build_ros_src.sh $(VENV) $(ROS_DISTRO)
	@touch $@

# The test files are spread over the cores by pytest-xdist, a whole file to a worker (its
# module fixtures, such as one node for all its tests, are built once); each worker takes a
# DDS domain of its own (tests/conftest.py). TEST_WORKERS=0 runs everything in one process.
# The files go out in the collection's order, which puts the slow ones first (tests/conftest.py);
# xdist's default re-sorts them by their number of tests, which left a 60 s file of one test to
# start last while the other worker sat idle. One worker more than the cores: a worker often
# waits on a child process or on DDS discovery, and on 2 cores two workers kept them 77 % busy
# (578 s), three 90 % (519 s; docs/TESTING.md, "Where the time goes").
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
XDIST := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: setup
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

# The fast tier: no child process, no DDS participant (tests/conftest.py refuses either in a
# test not marked `integration`), for every change while you work.
test-fast: setup
	$(PY) -m pytest -m "not integration" $(XDIST) $(PYTEST_ARGS)

# The ROS-facing tests: every test marked `ros` (the node, DDS, bag replay, colcon, the
# demo), then the rest of the files that read ROS files or wheels without a node.
ROS_FACING_FILES := tests/ros/bag/test_bag_tools.py tests/ros/test_launch_files.py tests/tools/test_distributions.py \
  tests/tools/test_package.py
# Both runs report even when the first fails; the target fails if either did.
test-ros: setup
	status=0; $(PY) -m pytest -m ros $(XDIST) $(PYTEST_ARGS) || status=$$?; \
	$(PY) -m pytest -m "not ros" $(ROS_FACING_FILES) $(XDIST) $(PYTEST_ARGS) || status=$$?; \
	exit $$status

# The four ament linters CMakeLists.txt registers for colcon test, run from the venv with
# the same configuration on the same paths (CONTRIBUTING.md, "Lint"). Each reports even
# when one before it failed; the target fails if any did.
LINT_PATHS := m2sa_core m2sa_ros training tests bench scripts examples launch setup.py
LINT_EXCLUDE := build install log training/tiny/research
lint: setup
	@. $(VENV)/setup.sh && status=0; \
	ament_flake8 --config setup.cfg --exclude $(LINT_EXCLUDE) || status=1; \
	ament_pep257 --exclude $(LINT_EXCLUDE) || status=1; \
	ament_copyright $(LINT_PATHS) --exclude training/tiny/research/*.py || status=1; \
	ament_xmllint --exclude build install log || status=1; \
	exit $$status

demo: setup
	$(PY) -m m2sa_ros.bag.demo

# Re-pin both distributions: install each .in into a scratch venv on that distribution's
# Python and record every distribution. Jazzy's non-ROS pins are held to Kilted's, so one
# requirements-model.txt (the model stack for a venv over a real ROS 2 install) follows
# both locks.
define pin
	rm -rf build/lockenv && $(3) -m venv build/lockenv
	build/lockenv/bin/pip install --quiet --upgrade pip
	build/lockenv/bin/pip install -r $(1).in $(2)
	build/lockenv/bin/python scripts/freeze_lock.py $(1) > build/$(1).lock
	mv build/$(1).lock $(1).lock
endef
lock:
	$(call pin,requirements,,$(KILTED_PYTHON))
	grep -v '^ros-' requirements.lock > build/kilted-pins.txt
	$(call pin,requirements-jazzy,-c build/kilted-pins.txt,$(JAZZY_PYTHON))
	build/lockenv/bin/python scripts/model_requirements.py --python 3.10 --python 3.12 > build/requirements-model.txt
	mv build/requirements-model.txt requirements-model.txt

# requirements-model.txt, as it is, resolves for the robot Pythons the lock is not for: 3.10
# (Humble) and 3.12 (Jazzy and Kilted on Noble). pip's resolver in a dry run for each
# version's wheels, against the package index; no such interpreter is needed (CI runs it).
check-model-requirements: setup
	$(PY) scripts/model_requirements.py --check 3.10 3.12

# Removes this distribution's venv (ROS_DISTRO=jazzy make clean for .venv-jazzy).
clean:
	rm -rf build $(VENV)
