"""What every benchmark script shares: where the repository and RESULTS.md are, the
commands, the host line of a machine description and appending to RESULTS.md.

Kept free of ROS and torch imports on purpose: ``bench_inference.py`` runs in-process
without a ROS installation, while ``bench_node.py`` / ``soak_node.py`` drive the node;
all of them must send the same commands and append to the same results file.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

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
    """Append a report (and a blank line) to a results file; ``header`` starts a new file."""
    path = Path(path)
    header = "" if path.exists() else header
    with path.open("a") as fh:
        fh.write(header + text + "\n")


def command_line(argv: list[str] | None, script: str) -> str:
    """The command that ran ``bench/<script>`` with ``argv`` (``sys.argv`` when None)."""
    args = sys.argv[1:] if argv is None else list(argv)
    return " ".join(["python", f"bench/{script}", *args])


def publish_report(text: str, report: dict, results: str | Path, write: bool, json_path: str | None,
                   header: str = "") -> None:
    """Print a report's section, dump the report as JSON if asked, and append the section
    to ``results`` when ``write``."""
    print(text)
    if json_path:
        Path(json_path).write_text(json.dumps(report, indent=2, default=float))
    if write:
        append_results(results, text, header=header)
