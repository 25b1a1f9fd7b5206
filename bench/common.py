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
What every benchmark script shares.

Where the repository, the shipped model and RESULTS.md are, the commands, the host
line of a machine description and appending to RESULTS.md.

Kept free of ROS and torch imports on purpose: ``bench_inference.py`` runs in-process
without a ROS installation, while ``bench_node.py`` / ``soak_node.py`` drive the node;
all of them must send the same commands and append to the same results file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import platform
import sys

from m2sa_core.shipped_model import SHIPPED_MODEL  # noqa: F401 - the benchmarks' default checkpoint

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "RESULTS.md"

# Implicit, multi-target and part-level commands, as a robot's user would phrase them.
COMMANDS = (
    "I want to turn on the TV. What should I press?",
    "Which objects can hold a drink?",
    "What can I use to cut the bread?",
    "Show me the handle of the mug.",
)


RESULTS_HEADER = "# Benchmark results\n\nEvery figure with its machine, date and command.\n\n"


def host_line() -> str:
    """CPU cores, architecture and OS of this machine (the start of every ``machine`` line)."""
    return f"{os.cpu_count()} CPU cores, {platform.machine()}, {platform.system()} {platform.release()}"


def append_results(path: str | Path, text: str, header: str = "") -> None:
    """
    Append a section to a results file, a blank line between it and what is there.

    Append only, never rewrite: several benchmarks (and several machines' runs, merged
    by hand) write to bench/RESULTS.md. ``header`` starts a file that does not exist yet.
    Every benchmark appends through this one function, so sections stay separated the
    same way whichever script wrote them.
    """
    path = Path(path)
    existing = path.read_bytes()[-2:] if path.exists() else None
    if existing is None:
        lead = header
    elif not existing or existing == b"\n\n":
        lead = ""
    else:
        lead = "\n" if existing.endswith(b"\n") else "\n\n"
    with path.open("a", encoding="utf-8") as fh:
        fh.write(lead + text.strip("\n") + "\n")


def command_line(argv: list[str] | None, script: str) -> str:
    """Return the command that ran ``bench/<script>`` with ``argv`` (``sys.argv`` when None)."""
    args = sys.argv[1:] if argv is None else list(argv)
    return " ".join(["python", f"bench/{script}", *args])


def _json_value(value: object) -> object:
    """Return a report value json cannot write: numpy numbers as numbers, anything else as text."""
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)


def publish_report(text: str, report: dict, results: str | Path, write: bool, json_path: str | Path | None,
                   header: str = "") -> None:
    """
    Print a report's section, dump the report as JSON if asked, and append the section.

    The section goes to ``results`` when ``write``.
    """
    print(text)
    if json_path:
        Path(json_path).write_text(json.dumps(report, indent=2, default=_json_value))
    if write:
        append_results(results, text, header=header)
