"""The node's process runs torch with OpenMP threads that sleep, not spin, at their barriers.

On cores shared with other processes, spinning threads made one command of the shipped
model take seconds instead of a tenth of one (m2sa_ros/openmp_policy.py). The runtime
reads the policy once, when torch loads it, so these tests ask the runtime itself, in a
fresh process that imports the node the way ``m2sa-perception`` does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from m2sa_ros.openmp_policy import prefer_passive_waits


def _runtime_spin_count(env_policy: str | None) -> int:
    """GOMP_SPINCOUNT as the OpenMP runtime reports it after importing the node (libgomp's
    OMP_DISPLAY_ENV): 0 when waiting threads sleep at once."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if env_policy is not None:
        env["OMP_WAIT_POLICY"] = env_policy
    env["OMP_DISPLAY_ENV"] = "VERBOSE"
    code = "import m2sa_ros.perception_node, torch; torch.ones(64, 64).sum()"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r"GOMP_SPINCOUNT = '(\d+)'", proc.stderr)
    if found is None:
        pytest.skip("torch's OpenMP runtime is not libgomp: it does not display its spin count")
    return int(found.group(1))


def test_the_node_process_loads_torch_with_threads_that_do_not_spin():
    assert _runtime_spin_count(None) == 0


def test_a_policy_the_user_chose_is_kept():
    assert _runtime_spin_count("ACTIVE") > 0


def test_after_torch_has_loaded_the_policy_is_reported_as_not_applied():
    import torch  # noqa: F401 - loaded, as in a process that imported torch before the node

    environ: dict[str, str] = {}
    assert prefer_passive_waits(environ) is None
    assert environ == {}
    assert prefer_passive_waits({"OMP_WAIT_POLICY": "active"}) == "active"
