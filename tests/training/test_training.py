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
Training runs that users rely on: a damaged checkpoint, DDP and FSDP equivalence, sharded eval.

Resuming after kill -9 is test_training_kills.py's (three kills at random moments).

All on the tiny preset and a small synthetic world, on CPU. The runs are real
subprocesses of the real entry points (``python -m training.train``, ``torchrun``).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest
from safetensors.torch import load_file
import torch
from training.checkpoints import latest_intact_checkpoint, list_checkpoints

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
TORCHRUN = Path(sys.executable).with_name("torchrun")
# --standalone: the rendezvous store binds a port the kernel picks (localhost:0), as scripts/train_tiny.sh
# runs it. A chosen --master-port can be taken by any socket of a loaded machine (EADDRINUSE).
TWO_RANKS = [str(TORCHRUN), "--standalone", "--nproc-per-node", "2"]


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    from m2sa_core.data.synthetic import main as synth_main

    out = tmp_path_factory.mktemp("synth")
    assert synth_main(["--out", str(out), "--images", "16", "--seed", "3", "--size", "128"]) == 0
    return out


def _config(tmp: Path, synth: Path, name: str, **optim) -> tuple[Path, list[str]]:
    steps = optim.pop("max_steps", 6)
    overrides = [
        f"out_dir={tmp / name}",
        # Present commands only, as tiny_synth.yaml trains: a rank whose micro-batch has no mask
        # (an absent command) skips SAM, and FSDP's collectives then wait on the other rank's
        # (docs/TRAINING.md, "Distributed training").
        f"data=[{{kind: synthetic, path: {synth / 'MMR_train.json'}, image_root: {synth / 'images'}, "
        "exclude_families: [absent]}]",
        "eval_data=[]", f"optim.max_steps={steps}", "optim.warmup_steps=2", "log_every=1",
        "checkpoint_every=2", "keep_checkpoints=5", "model.tokenizer_vocab_size=300",
    ] + [f"optim.{k}={v}" for k, v in optim.items()]
    return ROOT / "training" / "tiny_synth.yaml", overrides


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("WORLD_SIZE", None)
    return env


def _train(config: Path, overrides: list[str], *extra: str, timeout: int = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "training.train", "--config", str(config), *extra, *overrides]
    return subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout)


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run / "final" / "model.safetensors"))


def _losses(run: Path) -> list[float]:
    with (run / "train_log.csv").open() as f:
        return [float(row["loss"]) for row in csv.DictReader(f)]


def _train_here(config: Path, overrides: list[str]) -> Path:
    """Train in this process, where the process itself is not what a test checks (no interpreter to start)."""
    from training.config import load_config
    from training.train import train

    return train(load_config(config, overrides))


def test_truncated_checkpoint_is_detected_and_the_previous_one_used(tmp_path, synth):
    config, overrides = _config(tmp_path, synth, "trunc", max_steps=4)
    _train_here(config, overrides)
    root = tmp_path / "trunc" / "checkpoints"
    newest = list_checkpoints(root)[-1]
    weights = newest / "trainables.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    assert latest_intact_checkpoint(root) == list_checkpoints(root)[-2]


@pytest.fixture(scope="module")
def single(tmp_path_factory, synth) -> Path:
    """
    One process with a batch of 2 for 3 steps: the run the DDP and FSDP ranks must each reproduce.

    Returns the run's folder.
    """
    tmp = tmp_path_factory.mktemp("single_process")
    config, overrides = _config(tmp, synth, "single", max_steps=3, batch_size=2, grad_accum=1)
    run = _train(config, overrides)
    assert run.returncode == 0, run.stderr[-3000:]
    return tmp / "single"


def _two_ranks(tmp_path: Path, synth: Path, name: str, *extra: str) -> subprocess.CompletedProcess:
    """
    2 torchrun ranks with 1 sample each, the samples of the ``single`` run's batches of 2.

    The samples' answers differ in length, so the ranks match only if each rank's loss
    terms count by its share of the step's answer tokens and masks (training.train.step_loss).
    """
    config, ranks = _config(tmp_path, synth, name, max_steps=3, batch_size=1, grad_accum=1)
    cmd = [*TWO_RANKS, "-m", "training.train", "--config", str(config), *extra, *ranks]
    run = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=400)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


@pytest.fixture(scope="module")
def ddp(tmp_path_factory, synth) -> Path:
    """
    Two DDP ranks through ``single``'s 3 steps, uninterrupted.

    The DDP test compares it with ``single``, the resume test a stopped and resumed twin
    with it. Returns the run's folder.
    """
    tmp = tmp_path_factory.mktemp("two_ranks")
    _two_ranks(tmp, synth, "ddp")
    return tmp / "ddp"


def test_two_process_ddp_matches_single_process_on_the_same_global_batch(single, ddp):
    fingerprints = json.loads((ddp / "final" / "rank_fingerprints.json").read_text())
    assert len(fingerprints) == 2 and fingerprints[0] == fingerprints[1], "ranks diverged"
    assert _losses(single) == pytest.approx(_losses(ddp), rel=1e-4, abs=1e-5)
    a, b = _weights(single), _weights(ddp)
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-5, msg=f"{key} differs")


def test_two_ranks_stopped_and_resumed_reach_the_weights_of_an_uninterrupted_two_rank_run(tmp_path, synth, ddp):
    """scripts/train_tiny.sh with RANKS=2 relies on it: run again, a stage goes on from rank 0's checkpoint."""
    _two_ranks(tmp_path, synth, "resumed", "--stop-after", "2")  # at the checkpoint of step 2
    assert not (tmp_path / "resumed" / "final").exists()
    resumed = _two_ranks(tmp_path, synth, "resumed", "--resume")
    assert "resumed from" in resumed.stdout
    fingerprints = json.loads((tmp_path / "resumed" / "final" / "rank_fingerprints.json").read_text())
    assert len(fingerprints) == 2 and fingerprints[0] == fingerprints[1], "ranks diverged after resume"
    a, b = _weights(ddp), _weights(tmp_path / "resumed")
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-6, atol=1e-7, msg=f"{key} differs after resume")


def test_two_process_fsdp_matches_single_process_and_saves_full_weights(tmp_path, synth, single):
    """FSDP2 (sharded parameters and optimizer state) trains what one process trains."""
    _two_ranks(tmp_path, synth, "fsdp", "strategy=fsdp")

    # The checkpoint at step 2 holds full, unsharded tensors gathered from both ranks.
    saved = load_file(str(list_checkpoints(tmp_path / "fsdp" / "checkpoints")[0] / "trainables.safetensors"))
    single_model = _weights(single)
    assert saved and all(saved[k].shape == single_model[k].shape for k in saved)
    assert _losses(single) == pytest.approx(_losses(tmp_path / "fsdp"), rel=1e-4, abs=1e-5)
    a, b = single_model, _weights(tmp_path / "fsdp")
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-5, msg=f"{key} differs")


def test_sharded_evaluation_gives_the_single_process_numbers(tmp_path, synth):
    from m2sa_core.inference import Segmenter
    from m2sa_core.model.checkpoint import save_pretrained
    from training.evaluate import main as evaluate_main

    seg = Segmenter.from_pretrained("tiny", max_new_tokens=6)
    model_dir = save_pretrained(seg.model, seg.tokenizer, tmp_path / "model")
    data = [str(synth / "MMR_val.json"), str(synth / "MMR_test_mixed.json")]
    base = ["-m", "training.evaluate", "--model", str(model_dir), "--data", *data, "--image-root",
            str(synth / "images"), "--kind", "synthetic", "--max-items", "3", "--max-new-tokens", "6"]
    for protocol in ("teacher-forced", "generative"):
        # The single-process reference runs here (m2sa-eval's own main), on one thread as each rank does.
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            one = evaluate_main([*base[2:], "--protocol", protocol, "--out", str(tmp_path / f"one-{protocol}.json")])
            assert one == 0
        finally:
            torch.set_num_threads(threads)
        two = subprocess.run([*TWO_RANKS, *base, "--protocol", protocol,
                              "--out", str(tmp_path / f"two-{protocol}.json")],
                             cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
        assert two.returncode == 0, two.stderr[-3000:]
        a = json.loads((tmp_path / f"one-{protocol}.json").read_text())["splits"]
        b = json.loads((tmp_path / f"two-{protocol}.json").read_text())["splits"]
        assert a == b  # gIoU/cIoU and the rejections of absent commands alike
        # The first questions of a file may ask about absent things, scored apart from gIoU.
        assert a["all"]["samples"] + a["all"]["absent_commands"] >= 3 and a["all"]["samples"] >= 2, \
            "too few questions were evaluated for the comparison to mean much"
        assert a["all"]["present_commands"] == a["all"]["samples"]  # absent commands are in no gIoU
        # every ground-truth target's IoU, gathered from the ranks, and its summary
        targets = [(tmp_path / f"{n}-{protocol}.targets.jsonl").read_text().splitlines() for n in ("one", "two")]
        assert targets[0] == targets[1]
        entries = [json.loads(line) for line in targets[0]]
        summary = json.loads((tmp_path / f"one-{protocol}.json").read_text())["targets"]
        assert entries and sum(v["targets"] for v in summary["by_size"].values()) == len(entries)
        assert len(entries) <= a["all"]["masks"]  # the split also counts extra predictions
        if protocol == "teacher-forced":  # one mask per target, so the targets' mean is the split gIoU
            assert len(entries) == a["all"]["masks"]
            assert np.mean([e["iou"] for e in entries]) == pytest.approx(a["all"]["giou"])
        if protocol == "generative":  # each answer's kind of mistake, summed over the ranks too
            errors = json.loads((tmp_path / "one-generative.json").read_text())["answer_errors"]
            assert errors == json.loads((tmp_path / "two-generative.json").read_text())["answer_errors"]
            assert {s: sum(kinds.values()) for s, kinds in errors.items()} == {s: r["samples"] for s, r in a.items()}
            by_number = json.loads((tmp_path / "one-generative.json").read_text())["answers_by_number"]
            assert by_number == json.loads((tmp_path / "two-generative.json").read_text())["answers_by_number"]
            assert sum(row["answers"] for row in by_number.values()) == a["all"]["samples"]
            by_question = json.loads((tmp_path / "one-generative.json").read_text())["answers_by_question"]
            assert by_question == json.loads((tmp_path / "two-generative.json").read_text())["answers_by_question"]
            assert sum(row["answers"] for row in by_question) == a["all"]["samples"]
            # and each answer itself, gathered from the ranks into question order
            logged = [(tmp_path / f"{n}-generative.answers.jsonl").read_text().splitlines() for n in ("one", "two")]
            assert logged[0] == logged[1]
            entries = [json.loads(line) for line in logged[0]]
            questions = a["all"]["samples"] + a["all"]["absent_commands"]
            assert [e["index"] for e in entries] == list(range(questions))
            present = [e for e in entries if "missing" not in e]  # absent commands: logged, in no error count
            kinds = {s: sum(1 for e in present if e["split"] == s) for s in errors if s != "all"}
            assert kinds == {s: sum(k.values()) for s, k in errors.items() if s != "all"}
            assert all(e["kind"] in errors["all"] and e["truth"] and e["question"] for e in present)
            assert all(e["kind"] in ("absent rejected", "absent segmented") and not e["truth"]
                       for e in entries if "missing" in e)


def test_questions_per_image_trains_on_groups_of_one_image(tmp_path, synth):
    """The authors' sampling (several questions of one drawn image per slot) runs end to end."""
    from training.config import load_config
    from training.train import MicroBatches, setup

    config, overrides = _config(tmp_path, synth, "grouped", max_steps=2, batch_size=1, grad_accum=1)
    _train_here(config, [*overrides, "questions_per_image=3"])
    assert len(_losses(tmp_path / "grouped")) == 2
    cfg = load_config(config, [*overrides, "questions_per_image=3", f"out_dir={tmp_path / 'probe'}"])
    state = setup(cfg)
    batches = MicroBatches(state.mixture, state.builder, state.processor, state.tokenizer.pad_token_id, state.info,
                           batch_size=1, accum=1, questions_per_image=3)
    sizes = [batches[i]["sam_images"].shape[0] for i in range(4)]
    assert max(sizes) > 1 and all(1 <= n <= 3 for n in sizes), sizes  # each synthetic image has several questions


def test_a_resumed_log_keeps_its_columns_when_a_newer_version_logs_more(tmp_path):
    """
    A run started before a loss part existed is resumed by the newer version.

    Its rows must stay under their own header rather than shift by a column.
    """
    from training.train import CsvLog

    path = tmp_path / "train_log.csv"
    path.write_text("step,loss,iou\n10,1.0,0.5\n")
    log = CsvLog(path, ["step", "loss", "iou", "exclusion"])
    log.write({"step": 20, "loss": 0.9, "iou": 0.4, "exclusion": 0.1})
    log.file.close()
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert rows == [{"step": "10", "loss": "1.0", "iou": "0.5"}, {"step": "20", "loss": "0.9", "iou": "0.4"}]
    fresh = CsvLog(tmp_path / "new.csv", ["step", "exclusion"])
    fresh.write({"step": 1, "exclusion": 0.2})
    fresh.file.close()
    assert (tmp_path / "new.csv").read_text().splitlines() == ["step,exclusion", "1,0.2"]
