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
``m2sa-train``: train M2SA on a dataset mixture, on one CPU or many GPUs.

    m2sa-train --config training/tiny_synth.yaml [key.sub=value ...] [--resume]
    torchrun --nproc-per-node 4 -m training.train --config training/m2sa_7b.yaml

Everything that defines a run (config, seed, data) is written next to its checkpoints,
so a run can be resumed after ``kill -9`` and reproduced later.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
import contextlib
import csv
from dataclasses import dataclass
from functools import partial
import json
import logging
import math
from pathlib import Path
import random
import sys
import time

from m2sa_core.cli_errors import cli_entry
from m2sa_core.data.patch_words import check_instance_word_kind
from m2sa_core.model.batch import collate
from m2sa_core.model.patch_alignment import clip_grid
from m2sa_core.model.trainable import split_summary
import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm
from training import checkpoints as ckpt
from training.config import config_to_dict, load_config, TrainConfig
from training.cpu_share import warn_if_oversubscribed
from training.distributed import all_gather_objects, barrier, DistInfo, init_distributed, shutdown
from training.mixture import Mixture
from training.model_setup import (
    build_training_model,
    load_trainable_state,
    optimizer_groups,
    save_trained_model,
    trainable_state,
)
from training.objectives import Objective, objective_of
from training.single_seg import to_single_seg
from training.sources import open_sources

log = logging.getLogger("m2sa.train")


def linear_warmup_decay(warmup: int, total: int):
    """Return LISA's schedule: linear warm-up to the peak lr, then linear decay to zero."""
    def factor(step: int) -> float:
        if warmup > 0 and step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))
    return factor


def resolve_precision(config: TrainConfig, device: torch.device) -> torch.dtype | None:
    """Autocast dtype: bf16 on GPU (the paper's), none (fp32) on CPU."""
    if config.precision == "fp32" or (config.precision == "auto" and device.type != "cuda"):
        return None
    return torch.bfloat16


class MicroBatches(torch.utils.data.Dataset):
    """
    Micro-batch ``i`` of this rank = step ``i // accum``, micro-step ``i % accum``.

    Indexing by position (not iterating a stream) keeps what every step sees a pure
    function of the step, so DataLoader workers, resume and DDP all agree on it.
    """

    def __init__(self, mixture: Mixture, builder, processor, pad_token_id: int, info: DistInfo,
                 batch_size: int, accum: int, single_seg: bool = False, questions_per_image: int = 1,
                 collate_fn: Callable[[list], dict] | None = None) -> None:
        self.mixture, self.builder, self.info = mixture, builder, info
        self.single_seg = single_seg
        # The objective's batch (training.objectives); questions and answers by default.
        self.collate_fn = collate_fn or partial(collate, processor=processor, pad_token_id=pad_token_id)
        self.questions_per_image = questions_per_image
        self.batch_size, self.accum = batch_size, accum

    def _make(self, record, draw):
        sample = self.builder.build(record, rng=random.Random(draw.seed))
        if self.single_seg:
            sample = to_single_seg(sample, self.builder.tokenizer, self.builder.use_im_start_end)
        return sample

    def __getitem__(self, index: int) -> dict:
        step, micro = divmod(index, self.accum)
        slots = self.mixture.slots(micro, self.info.rank, self.info.world_size, self.batch_size)
        samples = [sample for slot in slots
                   for sample in self.mixture.build_group(step, slot, self._make, self.questions_per_image)]
        return self.collate_fn(samples)


class LossParts(torch.nn.Module):
    """
    The model as DDP sees it: a forward that returns plain tensors.

    DDP looks for the output tensors to know which parameters took part; it cannot see
    inside the model's output dataclass, so the loss parts are returned as a tuple.
    """

    def __init__(self, model: torch.nn.Module, objective: Objective) -> None:
        super().__init__()
        self.model = model
        self._forward = objective.forward

    def forward(self, batch: dict) -> tuple[torch.Tensor, ...]:
        """
        (loss, ce, bce, dice, amodal_bce, amodal_dice, mask_type, iou, exclusion, terms, counts).

        Skipped parts are 0; terms and counts are the loss's weighted terms and their item counts
        ([8] each), or empty for an objective whose loss is not split into terms.
        """
        out = self._forward(self.model, batch)
        iou = out.iou_loss if out.iou_loss is not None else out.loss.new_zeros(())
        exclusion = out.exclusion_loss if out.exclusion_loss is not None else out.loss.new_zeros(())
        terms = out.loss_terms if out.loss_terms is not None else out.loss.new_zeros((0,))
        counts = out.loss_counts if out.loss_counts is not None else torch.zeros(0, dtype=torch.float64)
        return (out.loss, out.ce_loss, out.bce_loss, out.dice_loss,
                out.amodal_bce_loss, out.amodal_dice_loss, out.mask_type_loss, iou, exclusion, terms, counts)


# The loss parts every step logs, in the order LossParts.forward returns them (before its
# terms and counts), step_loss and optimisation_step reduce them and TrainLogs writes them.
LOGGED_PARTS = ("loss", "ce", "bce", "dice", "amodal_bce", "amodal_dice", "mask_type", "iou", "exclusion")


def step_loss(losses: tuple[torch.Tensor, ...], info: DistInfo) -> tuple[torch.Tensor, torch.Tensor]:
    """
    Return the loss one rank backpropagates, and this rank's contribution to the nine logged parts.

    Summed over the ranks and divided by their number, they are one process's parts for
    the micro-batch split across the ranks.

    A term of the loss is a mean over items (answer tokens, masks), and a rank's batch holds
    some of the step's items: averaged per rank and then over ranks (as DDP averages
    gradients), a rank with few masks would weigh each of its masks more than a rank with
    many, and a question with a long list of targets would count for less than it does in
    one process. Each rank's term is therefore weighted by its share of the step's items,
    so that the ranks together train exactly one process's loss on the whole batch: with
    per-rank means, two ranks trained the tiny model's part masks worse than one process
    did. Objectives without terms keep the per-rank mean.
    """
    n = len(LOGGED_PARTS)
    loss, terms, counts = losses[0], losses[n], losses[n + 1]
    parts = torch.stack([v.detach().double() for v in losses[:n]])
    if not info.enabled or terms.numel() == 0:
        return loss, parts
    counts = counts.to(parts.device)  # on the collective's device: NCCL reduces CUDA tensors only
    total = counts.clone()
    torch.distributed.all_reduce(total)
    share = torch.where(total > 0, counts * info.world_size / total.clamp(min=1), torch.zeros_like(total))
    loss = (terms * share.to(terms.dtype)).sum()
    return loss, torch.cat([loss.detach().double().reshape(1), parts[1:] * share])


class CsvLog:

    def __init__(self, path: Path, fields: list[str]) -> None:
        new = not path.exists() or path.stat().st_size == 0
        self.file = path.open("a", newline="")
        if not new:  # a run resumed by a newer version keeps its file's columns, not shifted ones
            with path.open(newline="") as existing:
                fields = next(csv.reader(existing), None) or fields
        self.writer = csv.DictWriter(self.file, fieldnames=fields, extrasaction="ignore")
        if new:
            self.writer.writeheader()

    def write(self, row: dict) -> None:
        self.writer.writerow(row)
        self.file.flush()


def _tensorboard(out_dir: Path, info: DistInfo):
    if not info.is_main:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is optional on clusters
        log.warning("tensorboard is not installed; logging to CSV only")
        return None
    return SummaryWriter(str(out_dir / "tensorboard"))


@dataclass
class Run:
    """What one training run holds once set up: the model, its data and its optimiser."""

    config: TrainConfig
    objective: Objective  # config.objective's samples, batch, loss and eval
    info: DistInfo
    device: torch.device
    out_dir: Path
    model: torch.nn.Module
    tokenizer: object
    builder: object
    processor: object
    fsdp: bool
    params: list
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    mixture: Mixture

    @property
    def ckpt_root(self) -> Path:
        return self.out_dir / "checkpoints"


class TrainLogs:
    """Where each step is reported: the progress bar, the CSV log and TensorBoard."""

    # Amodal columns come last so readers of the original columns are unaffected; they
    # average over the micro-batches, counting 0 where a micro-batch had no such targets.
    FIELDS = ["step", "lr", "loss", "ce", "bce", "dice", "samples_per_s", "time",
              "amodal_bce", "amodal_dice", "mask_type", "iou", "exclusion"]
    # The progress bar's shorter labels, so that every part still fits on one line.
    BAR_LABELS = {"amodal_bce": "a_bce", "amodal_dice": "a_dice", "mask_type": "mtype", "exclusion": "excl"}

    def __init__(self, run: Run, start_step: int) -> None:
        info = run.info
        self.csv = CsvLog(run.out_dir / "train_log.csv", self.FIELDS) if info.is_main else None
        self.writer = _tensorboard(run.out_dir, info)
        self.progress = tqdm(total=run.config.optim.max_steps, initial=start_step, disable=not info.is_main,
                             desc="train", unit="step", dynamic_ncols=True)

    def step(self, run: Run, step: int, parts: list[float], throughput: float) -> None:
        named = dict(zip(LOGGED_PARTS, parts, strict=True))
        self.progress.update(1)
        self.progress.set_postfix(sps=f"{throughput:.1f}",
                                  **{self.BAR_LABELS.get(name, name): f"{value:.3f}" for name, value in named.items()})
        config = run.config
        if not (run.info.is_main and (step % config.log_every == 0 or step == config.optim.max_steps)):
            return
        lr = run.scheduler.get_last_lr()[0]
        self.csv.write({"step": step, "lr": lr, "samples_per_s": throughput, "time": time.time(), **named})
        if self.writer is not None:
            for name, value in {**named, "lr": lr}.items():
                self.writer.add_scalar(f"train/{name}", value, step)

    def close(self) -> None:
        self.progress.close()


def train(config: TrainConfig, resume: bool = False, stop_after: int | None = None) -> Path:
    """
    Run (or resume) training; returns the directory of the final model.

    ``stop_after`` ends the process loop early (after that many optimizer steps in this
    invocation) without writing the final model: used to test interruption and resume.
    """
    run = setup(config)
    start_step = resume_from_checkpoint(run) if resume else 0
    wrapped = _wrap_for_ddp(run)
    logs = TrainLogs(run, start_step)
    batches = _micro_batches(run, start_step)
    step = start_step
    steps_this_run = 0
    wrapped.train()
    while step < config.optim.max_steps:
        t0 = time.perf_counter()
        parts = optimisation_step(run, wrapped, batches)
        step += 1
        steps_this_run += 1
        elapsed = time.perf_counter() - t0
        if not math.isfinite(parts[0]):
            raise FloatingPointError(f"step {step}: loss is {parts[0]}; lower the lr or check the data")
        throughput = config.optim.grad_accum * config.optim.batch_size * run.info.world_size / max(elapsed, 1e-9)
        logs.step(run, step, parts, throughput)
        _checkpoint_and_eval(run, step, wrapped, logs.writer)
        if stop_after is not None and steps_this_run >= stop_after:
            logs.close()
            shutdown(run.info)
            return run.out_dir
    logs.close()
    return finish(run, step, logs.writer)


def setup(config: TrainConfig) -> Run:
    """
    Check the config, start the process group, write the run's config, and build the run.

    The run is the model, its data sources, the optimiser and the schedule.
    """
    if config.strategy not in ("ddp", "fsdp"):
        raise ValueError(f"strategy must be ddp or fsdp, got {config.strategy!r}")
    if config.seg_mode not in ("multi", "single"):
        raise ValueError(f"seg_mode must be multi or single, got {config.seg_mode!r}")
    objective = objective_of(config.objective)
    if objective.reads_regions and (config.seg_mode != "multi" or config.questions_per_image != 1):
        raise ValueError(f"objective {config.objective} reads regions, not questions: seg_mode and "
                         "questions_per_image do not apply (leave them at multi and 1)")
    if config.questions_per_image < 1:
        raise ValueError(f"questions_per_image must be >= 1, got {config.questions_per_image}")
    check_instance_word_kind(config.patch_instance_words)
    info, device = init_distributed(config.device)
    if not info.enabled:  # ranks of one run share the machine by design; they start together
        warn_if_oversubscribed(device)
    torch.manual_seed(config.seed)
    out_dir = Path(config.out_dir)
    if info.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "config.json").write_text(json.dumps(config_to_dict(config), indent=2))
    barrier(info)

    sources = open_sources(config.data, strict=config.strict_data)
    model, tokenizer, builder, processor = build_training_model(config, sources, device)
    builder = objective.make_builder(config, sources, tokenizer, builder)
    if info.is_main:
        print(f"[train] {split_summary(model)}", flush=True)
    fsdp = info.enabled and config.strategy == "fsdp"
    if fsdp:
        from training import fsdp as fsdp_lib

        fsdp_lib.shard_model(model, device, info.world_size)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(optimizer_groups(model, config.optim.lr, config.optim.lr_scale),
                                  lr=config.optim.lr, betas=config.optim.betas,
                                  weight_decay=config.optim.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, linear_warmup_decay(config.optim.warmup_steps, config.optim.max_steps))
    mixture = Mixture(sources, seed=config.seed)
    return Run(config=config, objective=objective, info=info, device=device, out_dir=out_dir, model=model,
               tokenizer=tokenizer, builder=builder, processor=processor, fsdp=fsdp, params=params,
               optimizer=optimizer, scheduler=scheduler, mixture=mixture)


def resume_from_checkpoint(run: Run) -> int:
    """
    Load the newest intact checkpoint (weights, optimiser, schedule, RNG).

    Returns the step to continue from (0 when there is none).
    """
    info, ckpt_root = run.info, run.ckpt_root
    latest = ckpt.latest_intact_checkpoint(ckpt_root)
    if latest is None:
        if info.is_main:
            print(f"[train] --resume: no intact checkpoint under {ckpt_root}; starting fresh", flush=True)
        return 0
    state = ckpt.load_checkpoint(latest)
    if run.fsdp:
        from training import fsdp as fsdp_lib

        fsdp_lib.load_full_state(run.model, run.optimizer, state.trainables, state.optimizer)
    else:
        load_trainable_state(run.model, state.trainables)
        try:
            run.optimizer.load_state_dict(state.optimizer)
        except ValueError as exc:  # torch: "... different number of parameter groups" / group sizes
            raise ValueError(f"{latest}: its optimiser state does not fit this run's parameter groups "
                             f"(optim.lr_scale or model.freeze changed since it was written?): {exc}") from exc
    run.scheduler.load_state_dict(state.scheduler)
    ckpt.set_rng_state(state.rng)
    if info.is_main:
        print(f"[train] resumed from {latest} (step {state.step})", flush=True)
    return state.step


def _wrap_for_ddp(run: Run) -> torch.nn.Module:
    wrapped = LossParts(run.model, run.objective)
    if run.info.enabled and not run.fsdp:
        device = run.device
        wrapped = DistributedDataParallel(wrapped, device_ids=[device.index] if device.type == "cuda" else None,
                                          find_unused_parameters=True)
    return wrapped


def micro_batch_dataset(run: Run) -> MicroBatches:
    """Return this rank's micro-batches as the run trains on them: item ``i`` is step ``i // accum``'s."""
    config = run.config
    return MicroBatches(run.mixture, run.builder, run.processor, run.tokenizer.pad_token_id, run.info,
                        config.optim.batch_size, config.optim.grad_accum, single_seg=config.seg_mode == "single",
                        questions_per_image=config.questions_per_image,
                        collate_fn=run.objective.make_collate(
                            run.builder, run.processor, run.tokenizer.pad_token_id, clip_grid(run.model)))


def _micro_batches(run: Run, start_step: int):
    """Return an iterator over this rank's micro-batches from ``start_step`` to the end of the run."""
    config = run.config
    accum = config.optim.grad_accum
    return iter(torch.utils.data.DataLoader(
        micro_batch_dataset(run),
        batch_size=None, sampler=range(start_step * accum, config.optim.max_steps * accum),
        num_workers=config.num_workers, persistent_workers=False,
        prefetch_factor=4 if config.num_workers else None))


def optimisation_step(run: Run, wrapped: torch.nn.Module, batches) -> list[float]:
    """
    One optimiser step over ``grad_accum`` micro-batches.

    Returns the loss parts (loss, ce, bce, dice, amodal_bce, amodal_dice, mask_type, iou,
    exclusion) averaged over the micro-batches and the ranks.
    """
    info, device, fsdp = run.info, run.device, run.fsdp
    accum = run.config.optim.grad_accum
    autocast_dtype = resolve_precision(run.config, device)
    run.optimizer.zero_grad(set_to_none=True)
    parts = torch.zeros(len(LOGGED_PARTS), dtype=torch.float64)
    for micro in range(accum):
        inputs = _to_device(next(batches), device)
        last = micro == accum - 1
        sync = contextlib.nullcontext() if (last or not info.enabled or fsdp) else wrapped.no_sync()
        if fsdp:
            run.model.set_requires_gradient_sync(last)
        amp = torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext()
        with sync, amp:
            loss, micro_parts = step_loss(wrapped(inputs), info)
            (loss / accum).backward()
        parts += micro_parts.cpu() / accum
    if info.enabled:
        torch.distributed.all_reduce(parts)
        parts /= info.world_size
    if run.config.optim.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(run.params, run.config.optim.grad_clip)
    run.optimizer.step()
    run.scheduler.step()
    return parts.tolist()


def _checkpoint_and_eval(run: Run, step: int, wrapped: torch.nn.Module, writer) -> None:
    config = run.config
    if config.checkpoint_every and step % config.checkpoint_every == 0:
        _save(run.ckpt_root, step, run.model, run.optimizer, run.scheduler, config, run.info, run.fsdp)
    if config.eval_every and step % config.eval_every == 0 and step < config.optim.max_steps and not run.fsdp:
        run.objective.evaluate(run.model, run.tokenizer, config, step, run.info, writer, run.builder)
        wrapped.train()


def finish(run: Run, step: int, writer) -> Path:
    """
    Save the final model, run the final evaluation when one is configured, and end the process group.

    The saved model carries every rank's parameter fingerprint.
    """
    info, config, model, fsdp = run.info, run.config, run.model, run.fsdp
    final_dir = run.out_dir / "final"
    if fsdp:
        from training import fsdp as fsdp_lib

        # Every rank holds a shard: gather the full weights once, rank 0 saves them.
        # (Shards differ by design, so there is one fingerprint, of the full model.)
        model = fsdp_lib.unsharded_copy(model, build=info.is_main)
        fingerprints = [parameter_fingerprint(model)] if info.is_main else []
    else:
        fingerprints = all_gather_objects(parameter_fingerprint(model), info)
    if info.is_main:
        save_trained_model(model, run.tokenizer, final_dir)
        # Every rank's parameters must be identical after DDP; record them so a diverged
        # run is visible (and testable) rather than silently saving rank 0's copy.
        (final_dir / "rank_fingerprints.json").write_text(json.dumps(fingerprints))
        if len(set(fingerprints)) > 1:
            log.error("ranks hold different parameters after training: %s", fingerprints)
        print(f"[train] model written to {final_dir}", flush=True)
    if config.eval_data and not fsdp:
        run.objective.evaluate(model, run.tokenizer, config, step, info, writer, run.builder)
    elif config.eval_data and info.is_main:
        print("[train] FSDP run: evaluate the final model with m2sa-eval (sharded generation is not "
              "evaluated in-loop)", flush=True)
    barrier(info)
    shutdown(info)
    return final_dir


def parameter_fingerprint(model) -> str:
    """SHA-256 over every parameter's bytes, in name order."""
    import hashlib

    digest = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        digest.update(name.encode())
        digest.update(p.detach().float().cpu().numpy().tobytes())
    return digest.hexdigest()


def _to_device(batch: dict, device: torch.device) -> dict:
    out = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor):
            out[key] = value.to(device)
        elif isinstance(value, list) and any(isinstance(v, torch.Tensor) for v in value):
            # per-sample tensors; None marks a sample without them (gt_amodal_masks)
            out[key] = [v.to(device) if isinstance(v, torch.Tensor) else v for v in value]
        else:
            out[key] = value
    return out


def _save(root: Path, step: int, model, optimizer, scheduler, config: TrainConfig, info: DistInfo,
          fsdp: bool = False) -> None:
    if fsdp:  # gathering the shards is a collective: every rank takes part, rank 0 writes
        from training import fsdp as fsdp_lib

        trainables, optim_state = fsdp_lib.full_trainables(model), fsdp_lib.full_optimizer_state(model, optimizer)
    elif info.is_main:
        trainables, optim_state = trainable_state(model), optimizer.state_dict()
    if info.is_main:
        ckpt.save_checkpoint(root, ckpt.TrainingState(
            step=step, trainables=trainables, optimizer=optim_state,
            scheduler=scheduler.state_dict(), rng=ckpt.rng_state(),
            extra={"data_position": {"step": step, "seed": config.seed}}), keep=config.keep_checkpoints)
    barrier(info)


@cli_entry("m2sa-train")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="m2sa-train", description=__doc__.strip(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="YAML training config (see training/*.yaml)")
    parser.add_argument("--resume", action="store_true", help="continue from the newest intact checkpoint")
    parser.add_argument("--stop-after", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="config overrides such as optim.lr=1e-4")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    config = load_config(args.config, args.overrides)
    train(config, resume=args.resume, stop_after=args.stop_after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
