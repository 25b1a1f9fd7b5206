#!/usr/bin/env bash
# Build the upstream ROS 2 packages that PyPI lacks (tf2 and tf2_ros, vision_msgs, bond and
# bondpy, launch and launch_ros with `ros2 launch`, the `ros2` CLI, rosidl_runtime_py,
# composition_interfaces, sensor_msgs_py, image_geometry, the ament linters) from the
# unchanged upstream tarballs in ../shared/ros-src, with colcon over a `make setup` venv.
#
# A robot gets these from its distribution (`apt install ros-jazzy-tf2-ros ...`); the venv
# gets them here so that the tests and CI use the real packages instead of skipping.
# The install space is build/ros-src-<distro>/install; a .pth file makes the venv's python
# import from it and .venv/setup.sh puts it on AMENT_PREFIX_PATH and PATH (`ros2`).
#   bash scripts/build_ros_src.sh [VENV [DISTRO]]    (default: .venv kilted; the Makefile passes both)
#   ROS_SRC=/path/to/ros-src overrides where the tarballs are (default: ../shared/ros-src).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
venv_name=${1:-.venv}
distro=${2:-kilted}
venv="$repo/$venv_name"
py="$venv/bin/python"
src_dir=${ROS_SRC:-$repo/../shared/ros-src}
[ -x "$py" ] || { echo "build_ros_src.sh: $py missing: run make setup" >&2; exit 2; }
[ -d "$src_dir" ] || { echo "build_ros_src.sh: no upstream sources at $src_dir (set ROS_SRC)" >&2; exit 2; }

base="$repo/build/ros-src-$distro"
install="$base/install"
# The tarballs and this script decide the build; an unchanged pair is not rebuilt.
stamp_value=$( (cat "$0"; ls -l "$src_dir"/*-"$distro".tar.gz) | sha256sum | cut -c1-16)
site_rel=$("$py" -c "import sysconfig; print(sysconfig.get_path('purelib', vars={'base': ''}).lstrip('/'))")
ros_site="$install/$site_rel"
venv_site=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
# The venv's python imports the install space with no environment variable, as it does
# the wheels; the ament index (ros2cli, launch) reads AMENT_PREFIX_PATH: .venv/setup.sh.
# The wheels' typesupport opens a message package's libraries by name (bond's, tf2_msgs')
# through LD_LIBRARY_PATH, which the wheels' bootstrapper builds at python's start from
# every site-packages/ros_*.libs folder: a link of that name makes the install's lib/ one.
# Written for every venv, a new one over an existing build too.
link_venv() {
  echo "$ros_site" > "$venv_site/m2sa_ros_src.pth"
  ln -sfn "$install/lib" "$venv_site/ros_src_install.libs"
}
if [ -f "$base/.done" ] && [ "$(cat "$base/.done")" = "$stamp_value" ]; then
  link_venv
  echo "[setup] upstream ROS packages for $distro already built in ${base#"$repo"/}"
  exit 0
fi
rm -rf "$base"
mkdir -p "$base/src"
# Repositories and the packages of each that the project uses (MANIFEST.tsv names them all).
repos="geometry2 vision_msgs bond_core launch launch_ros ros2cli rosidl_runtime_py rcl_interfaces
  common_interfaces vision_opencv ament_lint"
for name in $repos; do
  tar xzf "$src_dir/$name-$distro.tar.gz" -C "$base/src"
done
# image_geometry: its C++ half needs OpenCV's development headers, which a venv does not
# have; its Python module needs only numpy and cv2 (opencv-python-headless). colcon skips
# the CMake package and the module is installed as ament_python_install_package would.
touch "$base/src/vision_opencv/image_geometry/COLCON_IGNORE"
# launch_testing(_ros) register pytest plugins written for an older pytest than the venv's
# (they break collection of every test); nothing here runs launch_testing tests.
touch "$base/src/launch/launch_testing/COLCON_IGNORE" "$base/src/launch_ros/launch_testing_ros/COLCON_IGNORE"

export AMENT_PREFIX_PATH="$venv"
export PATH="$venv/bin:$PATH"
echo "[setup] building the upstream ROS packages for $distro (tf2, vision_msgs, bond, launch, ros2cli, ...)"
start=$(date +%s)
(cd "$base" && "$venv/bin/colcon" --log-base "$base/log" build --merge-install \
  --base-paths src --build-base "$base/work" --install-base "$install" \
  --event-handlers console_direct- console_start_end+ \
  --cmake-args -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$py" \
    -DCMAKE_INSTALL_RPATH="$install/lib" -DCMAKE_BUILD_TYPE=Release \
  > "$base/build.log" 2>&1) || { tail -n 60 "$base/build.log"; exit 1; }

mkdir -p "$ros_site"
cp -r "$base/src/vision_opencv/image_geometry/image_geometry" "$ros_site/"
mkdir -p "$install/share/ament_index/resource_index/packages" "$install/share/image_geometry"
touch "$install/share/ament_index/resource_index/packages/image_geometry"
cp "$base/src/vision_opencv/image_geometry/package.xml" "$install/share/image_geometry/"

link_venv
echo "$stamp_value" > "$base/.done"
echo "[setup] upstream ROS packages built in $(( $(date +%s) - start )) s into ${install#"$repo"/}"
