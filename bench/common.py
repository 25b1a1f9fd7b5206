"""Constants every benchmark script shares: where the repository and RESULTS.md are, and the commands.

Kept free of ROS and torch imports on purpose: ``bench_inference.py`` runs in-process
without a ROS installation, while ``bench_node.py`` / ``soak_node.py`` drive the node;
all of them must send the same commands and append to the same results file.
"""

from __future__ import annotations

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
