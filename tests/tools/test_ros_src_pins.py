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
The upstream ROS sources `make setup` builds: pinned in ros-src/*.repos, fetched by scripts/fetch_ros_src.sh.

* Every pin is a git repository at a full commit, with the package folders the build takes.
* The pins agree with the offline mirror's MANIFEST.tsv (url, commit, branch and version,
  packages), on Kilted and Jazzy, and rosdistro's too: the mirror CI builds from
  (ROS_SRC) and the fetch a user's clone makes give the same sources. Skipped where there
  is no mirror (a user's clone has none; ROS_SRC or ../shared/ros-src).
* The fetch path, against local git repositories made from the mirror's tarballs: each
  repository lands in src/<name> at its pinned commit (not its branch's tip), laid out as
  its tarball unpacks, every folder scripts/build_ros_src.sh then touches is there, and
  colcon sees exactly the listed packages. colcon itself is not run.
* A repository that cannot be fetched gives one line naming it and pointing to ROS_SRC.
"""

from __future__ import annotations

import csv
import importlib.util
import os
from pathlib import Path
import re
import subprocess
import sys
import tarfile
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PINS = ROOT / "ros-src"
DISTROS = ("kilted", "jazzy")
BUILD = ROOT / "scripts" / "build_ros_src.sh"
FETCH = ROOT / "scripts" / "fetch_ros_src.sh"
MIRROR = Path(os.environ.get("ROS_SRC") or ROOT.parent / "shared" / "ros-src")


def _ros_repos():
    """Return scripts/ros_repos.py as a module (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("ros_repos", ROOT / "scripts" / "ros_repos.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pins(path: Path) -> dict[str, dict]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))["repositories"]


@pytest.fixture(scope="module")
def manifest() -> dict[str, dict[str, str]]:
    """Return the offline mirror's MANIFEST.tsv by tarball, or skip where there is no mirror."""
    path = MIRROR / "MANIFEST.tsv"
    if not path.is_file():
        pytest.skip(f"no offline mirror of the upstream tarballs at {MIRROR} (a user's clone has none; "
                    f"ROS_SRC names one): nothing to compare the pins with")
    with path.open(encoding="utf-8", newline="") as file:
        return {row["tarball"]: row for row in csv.DictReader(file, delimiter="\t")}


# ----------------------------------------------------------------------------- the pins
@pytest.mark.parametrize("name", [*DISTROS, "rosdistro"])
def test_every_pin_is_a_git_repository_at_a_full_commit(name):
    found = _ros_repos().repositories(PINS / f"{name}.repos")
    assert found and all(re.fullmatch(r"[0-9a-f]{40}", commit) for _, _, commit, _ in found)
    assert all(urlparse(url).scheme == "https" and urlparse(url).netloc == "github.com" for _, url, _, _ in found)


def test_both_distributions_build_the_same_repositories():
    kilted, jazzy = (list(_pins(PINS / f"{distro}.repos")) for distro in DISTROS)
    assert kilted == jazzy


@pytest.mark.parametrize("distro", DISTROS)
def test_the_pins_are_the_mirrors_commits(distro, manifest):
    text = (PINS / f"{distro}.repos").read_text(encoding="utf-8")
    for name, pin in _pins(PINS / f"{distro}.repos").items():
        row = manifest.get(f"{name}-{distro}.tar.gz")
        assert row is not None, f"{name}-{distro}.tar.gz is not in the mirror: ROS_SRC builds could not take {name}"
        url = urlparse(pin["url"])
        assert f"{url.netloc}{url.path.removesuffix('.git')}" == row["upstream"], name
        assert pin["version"] == row["commit"], name
        assert pin["packages"] == row["packages"].split(), name
        # The comment a reader goes by: upstream's branch and the packages' version.
        assert f"version: {row['commit']}  # {row['branch']}, {row['version']}" in text, name


def test_the_rosdistro_pin_is_the_mirrors(manifest):
    (name, pin), = _pins(PINS / "rosdistro.repos").items()
    row = manifest["rosdistro.tar.gz"]
    url = urlparse(pin["url"])
    assert (name, f"{url.netloc}{url.path.removesuffix('.git')}", pin["version"]) == \
        ("rosdistro", row["upstream"], row["commit"])


# ----------------------------------------------------------------------------- the fetch
def _git_env(home: Path) -> dict[str, str]:
    """Return an environment in which git reads no user or system configuration."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(HOME=str(home), GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0",
               GIT_AUTHOR_NAME="test", GIT_AUTHOR_EMAIL="test@example.com",
               GIT_COMMITTER_NAME="test", GIT_COMMITTER_EMAIL="test@example.com")
    return env


def _git(env: dict[str, str], repository: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repository), *args], env=env, check=True, capture_output=True,
                          text=True, timeout=120).stdout.strip()


def _commit_all(env: dict[str, str], repository: Path, message: str) -> str:
    _git(env, repository, "add", "-A")
    _git(env, repository, "commit", "-q", "-m", message)
    return _git(env, repository, "rev-parse", "HEAD")


def _write_repos(path: Path, pins: dict[str, dict]) -> Path:
    path.write_text("# written by tests/tools/test_ros_src_pins.py\n"
                    + yaml.safe_dump({"repositories": pins}, sort_keys=False), encoding="utf-8")
    return path


def _fetch(env: dict[str, str], repos: Path, src: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(FETCH), str(repos), str(src), sys.executable], env=env,
                          capture_output=True, text=True, timeout=300)


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")
            if (p.is_file() or p.is_symlink()) and ".git" not in p.relative_to(folder).parts}


def _colcon_packages(src: Path) -> set[str]:
    """Return the package folders colcon finds under src: a COLCON_IGNORE hides a folder, a package ends the descent."""
    found = set()
    for folder, dirs, files in os.walk(src):
        if "COLCON_IGNORE" in files:
            dirs[:] = []
        elif "package.xml" in files:
            found.add(str(Path(folder).relative_to(src)))
            dirs[:] = []
        else:
            dirs[:] = [d for d in dirs if not d.startswith(".")]
    return found


# A package folder upstream has and the build does not take (as geometry2's tf2_ros, which
# needs rclcpp): the fetch must hide it from colcon, the tarballs never held it.
EXTRA = "not_taken"


@pytest.mark.integration
def test_the_fetch_lays_each_repository_out_at_its_pin_as_the_build_expects(manifest, tmp_path):
    # The fetch this test runs is the one build_ros_src.sh runs where no mirror is given.
    # One distribution's pins: the fetch has one code path, both .repos files name the same
    # repositories (test_both_distributions_build_the_same_repositories), and each file's
    # pins are checked against the mirror on their own (test_the_pins_are_the_mirrors_commits).
    distro = "kilted"
    assert 'bash "$repo/scripts/fetch_ros_src.sh" "$repos_file" "$sources/src" "$py"' in BUILD.read_text()
    env = _git_env(tmp_path)
    upstream, tarballs = tmp_path / "upstream", tmp_path / "tarballs"
    local_pins = {}
    for name, pin in _pins(PINS / f"{distro}.repos").items():
        for target in (upstream, tarballs):
            with tarfile.open(MIRROR / f"{name}-{distro}.tar.gz") as tar:
                tar.extractall(target, filter="data")
        repository = upstream / name
        _git(env, repository, "init", "-q")
        if pin["packages"] != ["."]:
            (repository / EXTRA).mkdir()
            (repository / EXTRA / "package.xml").write_text('<package format="3"/>\n')
        pinned = _commit_all(env, repository, "the pinned commit")
        (repository / "LATER").write_text("a commit after the pin: the branch's tip\n")
        _commit_all(env, repository, "upstream moved on")
        local_pins[name] = {**pin, "url": repository.as_uri(), "version": pinned}
    src = tmp_path / "build" / "src"

    out = _fetch(env, _write_repos(tmp_path / f"{distro}.repos", local_pins), src)

    assert (out.returncode, out.stderr) == (0, ""), out.stderr
    for name, pin in local_pins.items():
        assert _git(env, src / name, "rev-parse", "HEAD") == pin["version"], name
        extra = {f"{EXTRA}/package.xml", f"{EXTRA}/COLCON_IGNORE"} if pin["packages"] != ["."] else set()
        assert _files(src / name) == _files(tarballs / name) | extra, name  # no LATER: the pin, not the tip
    # Every folder and file of the sources build_ros_src.sh names after the fetch.
    touched = re.findall(r'"\$base/src/([^"$]+)"', BUILD.read_text())
    assert touched, "build_ros_src.sh names no source path any more: update this test"
    for path in touched:
        target = src / path
        assert (target.parent if target.name == "COLCON_IGNORE" else target).exists(), path
    expected = {name if package == "." else f"{name}/{package}"
                for name, pin in local_pins.items() for package in pin["packages"]}
    assert _colcon_packages(src) == expected


@pytest.mark.integration
@pytest.mark.parametrize("broken", ["no such repository", "no such commit"])
def test_a_repository_that_cannot_be_fetched_gets_one_line_naming_it(broken, tmp_path):
    env = _git_env(tmp_path)
    good = tmp_path / "upstream" / "good"
    good.mkdir(parents=True)
    (good / "package.xml").write_text('<package format="3"/>\n')
    _git(env, good, "init", "-q")
    commit = _commit_all(env, good, "the pinned commit")
    if broken == "no such repository":
        bad = {"url": (tmp_path / "upstream" / "gone").as_uri(), "version": commit}
    else:
        bad = {"url": good.as_uri(), "version": "0" * 40}
    pins = {"good": {"type": "git", "url": good.as_uri(), "version": commit, "packages": ["."]},
            "the_broken_one": {"type": "git", **bad, "packages": ["."]}}

    out = _fetch(env, _write_repos(tmp_path / "broken.repos", pins), tmp_path / "build" / "src")

    assert out.returncode == 1
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("fetch_ros_src.sh: the_broken_one: could not fetch ") and bad["url"] in lines[0]
    assert "ROS_SRC=/path/to/mirror" in lines[0]
    assert _git(env, tmp_path / "build" / "src" / "good", "rev-parse", "HEAD") == commit
