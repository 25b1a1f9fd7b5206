#!/usr/bin/env bash
# Build the m2sa_ros interfaces (msg/srv/action) with plain cmake against the ROS 2
# wheels in .venv and install them into .venv itself, so .venv/bin/python imports
# rclpy and m2sa_ros.msg with no environment variables. On a real ROS 2 install use
# colcon instead; this script exists for machines without one.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
venv="$repo/.venv"
py="$venv/bin/python"
build="$repo/build/ros"
mkdir -p "$build"

# The ROS wheels were built in a manylinux image; their exported CMake targets name
# include directories under /opt/python/cp311-cp311 that do not exist here. Point
# them at this interpreter's headers and the venv's numpy (files inside .venv only).
py_include=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
np_include=$("$py" -c "import numpy; print(numpy.get_include())")
stale=$(grep -rl "/opt/python/cp311-cp311" "$venv"/share/*/cmake/ 2>/dev/null || true)
if [ -n "$stale" ]; then
  echo "[setup] pointing ROS wheel CMake exports at $py_include and $np_include"
  # shellcheck disable=SC2086
  sed -i \
    -e "s#/opt/python/cp311-cp311/include/python3\.[0-9]*#$py_include#g" \
    -e "s#/opt/python/cp311-cp311/lib/python3\.[0-9]*/site-packages/numpy/_core/include#$np_include#g" \
    $stale
fi

export AMENT_PREFIX_PATH="$venv"
export PATH="$venv/bin:$PATH"
echo "[setup] configuring the interfaces (cmake)"
cmake -S "$repo" -B "$build" \
  -DCMAKE_INSTALL_PREFIX="$venv" \
  -DPython3_EXECUTABLE="$py" \
  -DBUILD_TESTING=OFF \
  -DM2SA_INSTALL_PYTHON_SOURCES=OFF > "$build.configure.log" 2>&1 \
  || { tail -n 40 "$build.configure.log"; exit 1; }
echo "[setup] building the interfaces"
cmake --build "$build" -j "$(nproc)" > "$build.build.log" 2>&1 \
  || { tail -n 40 "$build.build.log"; exit 1; }
cmake --install "$build" > "$build.install.log" 2>&1 \
  || { tail -n 40 "$build.install.log"; exit 1; }

# The generated package m2sa_ros lives in site-packages; link the hand-written modules
# into it (like colcon --symlink-install) so edits in the work tree take effect at once.
site=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
for f in "$repo"/m2sa_ros/*.py; do
  name=$(basename "$f")
  [ "$name" = "__init__.py" ] && continue
  ln -sfn "$f" "$site/m2sa_ros/$name"
done
# Subpackages (m2sa_ros/bag/) are linked whole.
for d in "$repo"/m2sa_ros/*/; do
  name=$(basename "$d")
  [ "$name" = "__pycache__" ] && continue
  ln -sfn "${d%/}" "$site/m2sa_ros/$name"
done
# Drop links whose source was deleted.
find "$site/m2sa_ros" -maxdepth 1 -xtype l -delete
echo "[setup] interfaces installed into .venv"
