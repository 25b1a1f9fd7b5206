"""Keep OpenMP's threads from spinning while the node shares its cores.

A robot's computer runs the perception node beside drivers, planners and recorders.
torch's CPU kernels run in OpenMP parallel regions whose threads meet at a barrier after
every operation, and by default a thread that arrives first spins there for a while
before it sleeps. When another process holds the core of the thread it waits for, the
spinning thread burns its own time slice waiting for a thread that cannot run, after
every one of the model's thousands of small operations. On two busy cores the shipped
model took 13.6 s a command instead of 0.13 s (bench/RESULTS.md, bench_cpu_contention).
With ``OMP_WAIT_POLICY=PASSIVE`` a waiting thread sleeps at once, and the same command
takes 0.15 s under that load.

The OpenMP runtime reads the variable once, when torch loads it, so this must run before
anything imports torch; a value the user set (``OMP_WAIT_POLICY=ACTIVE`` for a node
with cores of its own) is kept.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

VARIABLE = "OMP_WAIT_POLICY"
NODE_DEFAULT = "PASSIVE"


def prefer_passive_waits(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless the user chose a policy; returns the policy in effect.

    None when torch was loaded before any policy was set: the runtime has read its
    default already, so setting the variable now would only pretend (the node warns).
    """
    chosen = environ.get(VARIABLE, "").strip()
    if chosen:
        return chosen
    if "torch" in sys.modules:
        return None
    environ[VARIABLE] = NODE_DEFAULT
    return NODE_DEFAULT
