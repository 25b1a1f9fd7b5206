# Copyright 2026 m2sa_ros maintainers
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""
Print the repositories of a vcstool ``.repos`` file (ros-src/<distro>.repos), one a line.

scripts/build_ros_src.sh and scripts/fetch_ros_src.sh read the file through this, so a
bad file stops them in one line naming the file and the entry instead of half-way through
a fetch. Each line is tab-separated: name, url, commit, and the package folders the build
takes from the repository (top-level folders, space-separated; ``.``, also where the entry
lists none, for the whole repository: one package, or a repository nothing is built from).
Every entry must be a git repository pinned to a full commit: a branch or a tag would
build whatever upstream holds that day.

    python scripts/ros_repos.py REPOS_FILE
"""

from __future__ import annotations

from pathlib import Path
import re
import sys

import yaml

COMMIT = re.compile(r"[0-9a-f]{40}")
# A folder under the source folder: the build and the fetch use it as a path.
NAME = re.compile(r"[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*")
FOLDER = re.compile(r"[A-Za-z0-9_.\-]+")


class BadReposFile(Exception):
    """The file is not a vcstool file of pinned git repositories with their packages."""


def repositories(path: Path) -> list[tuple[str, str, str, list[str]]]:
    """Return (name, url, commit, packages) for every repository of the file, in its order."""
    try:
        root = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise BadReposFile(f"cannot read it: {' '.join(str(error).split())}") from None
    entries = root.get("repositories") if isinstance(root, dict) else None
    if not isinstance(entries, dict) or not entries:
        raise BadReposFile("no `repositories:` mapping")
    found = []
    for name, entry in entries.items():
        if not NAME.fullmatch(str(name)) or ".." in str(name).split("/"):
            raise BadReposFile(f"repository {name!r}: not a relative folder name")
        if not isinstance(entry, dict):
            raise BadReposFile(f"repository {name}: not a mapping")
        if entry.get("type") != "git" or not entry.get("url"):
            raise BadReposFile(f"repository {name}: needs `type: git` and a `url`")
        version = str(entry.get("version", ""))
        if not COMMIT.fullmatch(version):
            raise BadReposFile(f"repository {name}: version {version or '(none)'} is not a full commit sha")
        found.append((str(name), str(entry["url"]), version, _packages(name, entry)))
    return found


def _packages(name: str, entry: dict) -> list[str]:
    """Return the entry's package folders: top-level folders of the repository, or ["."] for all of it."""
    packages = entry.get("packages", ["."])
    if packages == ["."]:
        return packages
    if isinstance(packages, list) and packages and all(
            isinstance(p, str) and FOLDER.fullmatch(p) and p not in (".", "..") for p in packages):
        return packages
    raise BadReposFile(f"repository {name}: `packages` must list top-level package folders, or be ['.']")


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python scripts/ros_repos.py REPOS_FILE", file=sys.stderr)
        return 2
    path = Path(sys.argv[1])
    try:
        found = repositories(path)
    except BadReposFile as error:
        print(f"ros_repos.py: {path}: {error}", file=sys.stderr)
        return 2
    for name, url, commit, packages in found:
        print("\t".join((name, url, commit, " ".join(packages))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
