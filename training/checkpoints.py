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
Training checkpoints that survive ``kill -9`` and a truncated disk.

A checkpoint is a directory ``step_XXXXXXXX`` holding the trainable weights
(safetensors), the optimizer and scheduler states, the RNG states and the step, plus a
``manifest.json`` with the size and SHA-256 of every file. It is written into a
temporary directory and renamed into place, so a crash leaves either the whole
checkpoint or none. On resume, manifests are verified newest first and the first intact
checkpoint wins: a file truncated after the fact is detected and skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
import json
import logging
import os
from pathlib import Path
import pickle
import random
import shutil
from typing import Any

import numpy as np
from safetensors.torch import load_file, save_file
import torch
from training.file_hash import file_hexdigest

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
PREFIX = "step_"


def _sha256(path: Path) -> str:
    return file_hexdigest(path, "sha256")


def rng_state() -> dict[str, Any]:
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _to_plain(obj: Any) -> Any:
    """Make RNG states loadable with ``weights_only=True`` (numpy arrays -> tensors, tuples kept)."""
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": torch.from_numpy(obj.copy()), "dtype": str(obj.dtype)}
    if isinstance(obj, tuple):
        return tuple(_to_plain(o) for o in obj)
    if isinstance(obj, list):
        return [_to_plain(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (np.integer, np.floating)):
        return obj.item()
    return obj


def _from_plain(obj: Any) -> Any:
    if isinstance(obj, dict) and "__ndarray__" in obj:
        return obj["__ndarray__"].numpy().astype(obj["dtype"])
    if isinstance(obj, tuple):
        return tuple(_from_plain(o) for o in obj)
    if isinstance(obj, list):
        return [_from_plain(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _from_plain(v) for k, v in obj.items()}
    return obj


@dataclass
class TrainingState:
    step: int
    trainables: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    scheduler: dict[str, Any]
    rng: dict[str, Any]
    extra: dict[str, Any]


def save_checkpoint(root: Path, state: TrainingState, keep: int = 3) -> Path:
    """Write ``root/step_XXXXXXXX`` atomically and prune all but the newest ``keep``."""
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{PREFIX}{state.step:08d}"
    tmp = root / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_file({k: v.detach().cpu().contiguous() for k, v in state.trainables.items()},
              str(tmp / "trainables.safetensors"))
    torch.save({"optimizer": state.optimizer, "scheduler": state.scheduler}, tmp / "optim.pt")
    torch.save(_to_plain(state.rng), tmp / "rng.pt")
    (tmp / "state.json").write_text(json.dumps({"step": state.step, **state.extra}, indent=2))
    files = {p.name: {"size": p.stat().st_size, "sha256": _sha256(p)} for p in sorted(tmp.iterdir())}
    (tmp / MANIFEST).write_text(json.dumps({"step": state.step, "files": files}, indent=2))
    for p in tmp.iterdir():
        with p.open("rb") as f:
            os.fsync(f.fileno())
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    dir_fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    for old in list_checkpoints(root)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def checkpoint_step(path: Path) -> int:
    """Return the optimizer step a checkpoint directory was written at, read from its name."""
    return int(path.name[len(PREFIX):])


def list_checkpoints(root: Path) -> list[Path]:
    """Complete checkpoint directories, oldest first (temporary ones are ignored)."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX))


def verify_checkpoint(path: Path) -> str | None:
    """None when every file matches its manifest entry, else the reason it does not."""
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        return "no manifest"
    try:
        manifest = json.loads(manifest_path.read_text())
    except json.JSONDecodeError as exc:
        return f"unreadable manifest ({exc})"
    for name, entry in manifest.get("files", {}).items():
        f = path / name
        if not f.is_file():
            return f"{name} is missing"
        if f.stat().st_size != entry["size"]:
            return f"{name} has {f.stat().st_size} bytes, manifest says {entry['size']}"
        if _sha256(f) != entry["sha256"]:
            return f"{name} does not match its checksum"
    return None


def load_checkpoint(path: Path) -> TrainingState:
    problem = verify_checkpoint(path)
    if problem:
        raise ValueError(f"checkpoint {path} is damaged: {problem}")
    try:
        optim = torch.load(path / "optim.pt", map_location="cpu", weights_only=True)
        rng = _from_plain(torch.load(path / "rng.pt", map_location="cpu", weights_only=True))
    except pickle.UnpicklingError as exc:  # a matching manifest proves nothing about who wrote it
        raise ValueError(f"refusing to load checkpoint {path}: a pickled state holds objects other than "
                         f"tensors and plain data, which could execute code on load "
                         f"({str(exc).splitlines()[0]})") from exc
    extra = json.loads((path / "state.json").read_text())
    step = int(extra.pop("step"))
    return TrainingState(step=step, trainables=load_file(str(path / "trainables.safetensors")),
                         optimizer=optim["optimizer"], scheduler=optim["scheduler"], rng=rng, extra=extra)


def latest_intact_checkpoint(root: Path) -> Path | None:
    """Return the newest checkpoint whose files all match their manifest; damaged ones are logged."""
    for path in reversed(list_checkpoints(root)):
        problem = verify_checkpoint(path)
        if problem is None:
            return path
        log.warning("skipping damaged checkpoint %s: %s", path, problem)
    return None
