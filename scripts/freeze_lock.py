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
Print a pip requirements lock of the running environment.

Only distributions that pip installed (``*.dist-info``) are listed: the ROS wheels
also drop ``*.egg-info`` records of their inner packages (std_msgs, rosidl_parser, ...)
which are not installable from any registry and would break ``pip install -r``.

    python scripts/freeze_lock.py [requirements | requirements-jazzy]   (default: requirements)
"""

import importlib.metadata as md
import sys

# The venv each lock is installed into, and the distribution that selects it (Makefile).
SETUPS = {"requirements": (".venv", ""), "requirements-jazzy": (".venv-jazzy", "ROS_DISTRO=jazzy: ")}
HEADER = """# {distro}Exact versions that `make setup` installs into {venv} (every distribution of a working
# environment). Top-level needs are in {name}.in; regenerate with `make lock`."""


def main() -> None:
    lock = sys.argv[1] if len(sys.argv) > 1 else "requirements"
    if lock not in SETUPS:
        sys.exit(f"freeze_lock.py: unknown lock {lock!r}; one of: {', '.join(SETUPS)}")
    venv, distro = SETUPS[lock]
    pins: dict[str, str] = {}
    for dist in md.distributions():
        path = str(getattr(dist, "_path", ""))
        name = dist.metadata["Name"]
        if not path.endswith(".dist-info") or name.lower().startswith("m2sa") or name.lower() == "pip":
            continue
        pins[name.lower()] = f"{name}=={dist.version}"
    print(HEADER.format(distro=distro, venv=venv, name=lock))
    for key in sorted(pins):
        print(pins[key])


if __name__ == "__main__":
    main()
