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
Training killed with SIGKILL three times at random points ends where an uninterrupted run ends.

The real entry point (``python -m training.train``) runs as a subprocess on the tiny
preset and a small synthetic world. Checkpoints are written every step, and each kill
comes at a random moment after a randomly chosen step was checkpointed, so it can land
mid-step, mid-save or between the two. Every restart uses ``--resume``; after the third
kill the run is resumed to completion and its final parameters must equal, bit for bit,
those of a run that was never interrupted. The seed of the kill schedule is printed in
any failure (set M2SA_KILL_SEED to replay one).
"""

from __future__ import annotations

import os
from pathlib import Path
import random
import signal
import subprocess
import sys
import time

import pytest
from safetensors.torch import load_file
import torch
from training.checkpoints import latest_intact_checkpoint, list_checkpoints

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
MAX_STEPS = 10


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    from m2sa_core.data.synthetic import main as synth_main

    out = tmp_path_factory.mktemp("synth")
    assert synth_main(["--out", str(out), "--images", "12", "--seed", "5", "--size", "128"]) == 0
    return out


def _command(synth: Path, out: Path, resume: bool) -> list[str]:
    overrides = [
        f"out_dir={out}",
        f"data=[{{kind: synthetic, path: {synth / 'MMR_train.json'}, image_root: {synth / 'images'}}}]",
        "eval_data=[]", f"optim.max_steps={MAX_STEPS}", "optim.warmup_steps=2", "log_every=1",
        "checkpoint_every=1", "keep_checkpoints=3", "model.tokenizer_vocab_size=300",
    ]
    return [sys.executable, "-m", "training.train", "--config", str(ROOT / "training" / "tiny_synth.yaml"),
            *(["--resume"] if resume else []), *overrides]


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("WORLD_SIZE", None)
    return env


def _step(root: Path) -> int:
    """Step of the newest intact checkpoint (0 if none); retried while the run prunes old ones."""
    for _ in range(50):
        try:
            latest = latest_intact_checkpoint(root)
            return int(latest.name.split("_")[-1]) if latest is not None else 0
        except OSError:
            time.sleep(0.01)
    raise AssertionError(f"cannot read the checkpoints under {root}")


def test_three_random_kills_resume_to_the_parameters_of_an_uninterrupted_run(tmp_path, synth):
    seed = int(os.environ.get("M2SA_KILL_SEED", time.time_ns() % 2**32))
    rng = random.Random(seed)
    where = f"(kill schedule seed {seed})"

    straight = subprocess.run(_command(synth, tmp_path / "straight", resume=False), cwd=ROOT, env=_env(),
                              capture_output=True, text=True, timeout=600)
    assert straight.returncode == 0, straight.stderr[-3000:]

    out = tmp_path / "killed"
    ckpts = out / "checkpoints"
    kills: list[tuple[int, int, float]] = []  # (step it waited for, intact step after the kill, extra delay)
    for kill in range(3):
        before = _step(ckpts)
        # At most 2 new steps per kill and 3 kills: the run always has steps left to lose.
        wait_for = before + rng.randint(1, 2)
        delay = rng.uniform(0.0, 0.6)
        proc = subprocess.Popen(_command(synth, out, resume=True), cwd=ROOT, env=_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 300
        while _step(ckpts) < wait_for and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        log, _ = proc.communicate()
        assert proc.returncode == -signal.SIGKILL, f"run {kill + 1} ended before its kill {where}:\n{log[-2000:]}"
        if kill > 0:
            assert f"resumed from {ckpts / f'step_{before:08d}'}" in log, f"run {kill + 1} did not resume {where}"
        after = _step(ckpts)
        assert after >= wait_for, f"kill {kill + 1} came before step {wait_for} was saved {where}"
        assert after < MAX_STEPS and not (out / "final").exists(), f"run {kill + 1} finished {where}"
        kills.append((wait_for, after, round(delay, 3)))
        # Whatever the kill interrupted, every checkpoint left is either complete or ignored.
        assert all(p.name.startswith("step_") for p in list_checkpoints(ckpts))

    final = subprocess.run(_command(synth, out, resume=True), cwd=ROOT, env=_env(), capture_output=True,
                           text=True, timeout=600)
    assert final.returncode == 0, final.stderr[-3000:]
    assert f"resumed from {ckpts / f'step_{kills[-1][1]:08d}'}" in final.stdout, (final.stdout[-2000:], where)

    a = load_file(str(tmp_path / "straight" / "final" / "model.safetensors"))
    b = load_file(str(out / "final" / "model.safetensors"))
    assert a.keys() == b.keys()
    differing = [k for k in a if not torch.equal(a[k], b[k])]
    assert not differing, f"parameters differ after kills at {kills} {where}: {differing[:5]}"
