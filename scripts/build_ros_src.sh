#!/usr/bin/env bash
# Build the upstream ROS 2 packages that PyPI lacks (tf2 and tf2_ros, vision_msgs, bond and
# bondpy, launch and launch_ros with `ros2 launch`, the `ros2` CLI, rosidl_runtime_py,
# composition_interfaces, sensor_msgs_py, image_geometry, the ament linters) from their
# unchanged upstream sources, with colcon over a `make setup` venv.
#
# A robot gets these from its distribution (`apt install ros-jazzy-tf2-ros ...`); the venv
# gets them here so that the tests and CI use the real packages instead of skipping.
# ros-src/<distro>.repos (vcstool's format) names the repositories and pins their commits;
# scripts/fetch_ros_src.sh fetches them from there (GitHub) into build/ros-src-<distro>/src.
# ROS_SRC=/path/to/mirror takes them from an offline mirror instead: a folder that holds each
# repository's tarball at the pinned commit, NAME-<distro>.tar.gz unpacking into NAME/.
# The install space is build/ros-src-<distro>/install; a .pth file makes the venv's python
# import from it and .venv/setup.sh puts it on AMENT_PREFIX_PATH and PATH (`ros2`).
#   bash scripts/build_ros_src.sh [VENV [DISTRO]]    (default: .venv kilted; the Makefile passes both)
#   ROS_SRC=/path/to/mirror   the tarballs instead of a fetch (no network needed)
#   ROS_REPOS=/path/to/file.repos   another .repos file than ros-src/<distro>.repos
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
venv_name=${1:-.venv}
distro=${2:-kilted}
venv="$repo/$venv_name"
py="$venv/bin/python"
src_dir=${ROS_SRC:-}
repos_file=${ROS_REPOS:-$repo/ros-src/$distro.repos}
[ -x "$py" ] || { echo "build_ros_src.sh: $py missing: run make setup" >&2; exit 2; }
[ -f "$repos_file" ] || { echo "build_ros_src.sh: $repos_file missing: no pinned sources for $distro" >&2; exit 2; }
[ -z "$src_dir" ] || [ -d "$src_dir" ] || {
  echo "build_ros_src.sh: ROS_SRC=$src_dir is not a folder (an offline mirror of the upstream tarballs)" >&2; exit 2; }
[ -z "$src_dir" ] || src_dir=$(cd "$src_dir" && pwd)
# Name, url, commit and packages of each repository, one a line; a bad file stops here.
table=$("$py" "$repo/scripts/ros_repos.py" "$repos_file") || exit 2

base="$repo/build/ros-src-$distro"
install="$base/install"
# The pins and these scripts decide the build; unchanged, it is not rebuilt. A mirror's tarballs
# are the pinned commits (tests/tools/test_ros_src_pins.py), so a build from them counts as
# the fetch's and the other way round: a checkout built offline stays built without ROS_SRC.
stamp_value=$(cat "$0" "$repo/scripts/fetch_ros_src.sh" "$repo/scripts/ros_repos.py" "$repos_file" \
  | sha256sum | cut -c1-16)
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
# The repositories, as the .repos file pins them: from the mirror's tarballs, which hold
# only the packages the project uses, or fetched at their commits (the other packages then
# get a COLCON_IGNORE). They go into a folder of their own first, so a fetch that fails
# (no network) leaves the previous build as it was.
sources="$base.sources"
rm -rf "$sources"
mkdir -p "$sources/src"
if [ -n "$src_dir" ]; then
  echo "[setup] upstream ROS sources for $distro from $src_dir"
  while IFS=$'\t' read -r name _; do
    tarball="$src_dir/$name-$distro.tar.gz"
    [ -f "$tarball" ] || { echo "build_ros_src.sh: $tarball missing (ROS_SRC=$src_dir)" >&2; exit 2; }
    tar xzf "$tarball" -C "$sources/src"
  done <<< "$table"
else
  echo "[setup] fetching the upstream ROS sources for $distro (${repos_file#"$repo"/}; ROS_SRC=/path/to/mirror for an offline mirror)"
  bash "$repo/scripts/fetch_ros_src.sh" "$repos_file" "$sources/src" "$py" || exit 1
fi
rm -rf "$base"
mv "$sources" "$base"
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
