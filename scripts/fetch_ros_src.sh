#!/usr/bin/env bash
# Fetch the upstream ROS 2 sources a vcstool .repos file pins (ros-src/<distro>.repos) into a
# colcon source folder, laid out as an offline mirror's tarballs unpack (scripts/build_ros_src.sh
# takes either): SRC_DIR/<repository>/... at the pinned commit, where colcon sees only the
# package folders the entry's `packages` lists (every other top-level folder of the repository
# gets a COLCON_IGNORE: geometry2's tf2_ros needs rclcpp, common_interfaces would build again
# the message packages the wheels bring, ...).
#   bash scripts/fetch_ros_src.sh REPOS_FILE SRC_DIR [PYTHON]
# PYTHON (default python3) has vcstool and PyYAML: a `make setup` venv's python. vcstool's log
# goes to SRC_DIR/../fetch.log. A repository that does not end up at its pinned commit gets one
# line naming it on stderr, and the exit status is 1.
set -euo pipefail
shopt -s nullglob

[ $# -ge 2 ] || { echo "usage: bash scripts/fetch_ros_src.sh REPOS_FILE SRC_DIR [PYTHON]" >&2; exit 2; }
repos_file=$1
src=$2
py=${3:-python3}
here=$(cd "$(dirname "$0")" && pwd)
table=$("$py" "$here/ros_repos.py" "$repos_file") || exit 2
"$py" -c "import vcstool" 2>/dev/null || {
  echo "fetch_ros_src.sh: $py has no vcstool (make setup installs it from the lock; else pip install vcstool)" >&2
  exit 2
}
mkdir -p "$src"
src=$(cd "$src" && pwd)
log="$(dirname "$src")/fetch.log"

# vcstool's `vcs import`, called as its module: its `vcs` front end imports pkg_resources,
# which setuptools no longer ships. --shallow takes one commit (git fetch --depth 1 <sha>)
# instead of each repository's whole history.
status=0
"$py" -c 'import sys; from vcstool.commands.import_ import main; sys.exit(main())' \
  --input "$repos_file" --shallow "$src" > "$log" 2>&1 || status=$?

# vcstool's report for one repository: the lines after its "=== <path> (git) ===" header.
reason() {
  sed 's/\x1b\[[0-9;]*m//g' "$log" | awk -v header="=== $src/$1 (git) ===" '
    $0 == header {inside = 1; next}
    /^=== .* ===$/ {inside = 0}
    inside && NF {print; exit}'
}

failed=0
while IFS=$'\t' read -r name url commit packages; do
  head=$(git -C "$src/$name" rev-parse -q --verify HEAD 2>/dev/null || true)
  if [ "$head" != "$commit" ]; then
    why=$(reason "$name")
    echo "fetch_ros_src.sh: $name: could not fetch $url at ${commit:0:12} (${why:-vcstool exited with status $status})." \
      "Offline, give a mirror of the upstream tarballs instead: ROS_SRC=/path/to/mirror make setup" \
      "(vcstool's log: $log)" >&2
    failed=1
    continue
  fi
  [ "$packages" = . ] && continue
  for package in $packages; do
    [ -f "$src/$name/$package/package.xml" ] || {
      echo "fetch_ros_src.sh: $name at ${commit:0:12} has no package $package ($repos_file lists it)" >&2
      failed=1
    }
  done
  for folder in "$src/$name"/*/; do
    case " $packages " in *" $(basename "$folder") "*) continue ;; esac
    touch "$folder/COLCON_IGNORE"
  done
done <<< "$table"
exit $failed
