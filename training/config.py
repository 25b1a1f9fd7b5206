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
Training configuration: YAML files plus ``key.sub=value`` overrides on the command line.

Configs are parsed with ``yaml.safe_load`` only (a config from someone else must never
run code), and every key is checked against the dataclasses so a typo fails loudly
instead of silently training with a default.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


@dataclass
class DataSourceConfig:
    """One dataset of the mixture. ``kind`` picks the reader; ``rate`` its sampling weight."""

    kind: str  # mmr | synthetic | reasonseg | r2sm | amodal_reasonseg | sem_seg | refer_seg | vqa
    path: str  # JSON file (or directory, per reader)
    image_root: str = ""
    rate: float = 1.0
    name: str = ""  # for logs; defaults to kind
    # >1: keep only the questions whose answer names at least this many instances of one
    # object ("pan_1, pan_2 and pan_3"), to draw lists of instances more often than the
    # data does: a model that names too few instances stops its lists early, on training
    # questions as often as on held-out ones.
    min_instances: int = 0
    # >1: keep only the questions whose answer has at least this many targets of any kind
    # ("mug_1, mug_1's body, mug_2 and mug_2's body"), the lists a model cuts short. Drawn
    # again in the tiny model's stage 3 they taught it to list instances that are not there,
    # so its recipe does not use them.
    min_targets: int = 0
    # Non-empty: keep only the questions of these families of the synthetic world ("object",
    # "part", "mixed", "multi", "visible", "amodal": an entry's ``question_families``), e.g. a
    # list view without the mixed family's object-and-part answers: drawn again, those teach
    # a model to answer part questions with the object and its part.
    families: list[str] = field(default_factory=list)
    # Leave out the questions of these families, e.g. [absent]: the commands about what is not
    # there (family "absent"), which a stage trained before them keeps out to stay what it was.
    exclude_families: list[str] = field(default_factory=list)


@dataclass
class ModelConfig:
    preset: str = "tiny"  # tiny | 7b | 13b, or a directory with a checkpoint to start from
    init_from: str = ""  # optional checkpoint directory (our format) to initialise weights
    # paper (LoRA + the paper's trainable split) | from_scratch / full (everything) | promptable_sam |
    # vision_language (the pretraining stages): see m2sa_core.model.trainable
    trainable_policy: str = "paper"
    loss_weights: str = "authors"  # authors (code) (ce 1, bce 2, dice 0.5) | paper (1, 0.5, 2)
    tokenizer_vocab_size: int = 0  # >0: train a tokenizer on the training texts (tiny preset)
    # Texts the new tokenizer trains on, when they are not (all) in ``data``: staged training's
    # first stage reads masks only, but its tokenizer must serve every later stage.
    tokenizer_data: list[DataSourceConfig] = field(default_factory=list)
    # Cut English inflection endings off before BPE, so a word's forms share its stem token
    # (m2sa_core.model.tokenizer.INFLECTION_PATTERN): most words a held-out question has and
    # no training text does are other forms of a training word ("sizzling" / "sizzle").
    tokenizer_split_inflections: bool = False
    gradient_checkpointing: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)  # preset config fields to change
    # Parameter-name prefixes kept frozen after the policy, e.g. [sam.image_encoder.] to train
    # M2SA on a pretrained SAM encoder as the paper does.
    freeze: list[str] = field(default_factory=list)


@dataclass
class OptimConfig:
    lr: float = 3e-4
    betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = 0.0
    warmup_steps: int = 100
    max_steps: int = 50000
    batch_size: int = 2  # per process
    grad_accum: int = 10
    grad_clip: float = 1.0
    # Parameter-name prefix -> factor of ``lr`` for the parameters under it, warmup and decay
    # alike (the longest matching prefix wins), as LLaVA-1.6 trains its vision tower at a
    # fraction of the language model's rate: {"vision_tower.": 0.1}. Freeze with model.freeze.
    lr_scale: dict[str, float] = field(default_factory=dict)


@dataclass
class TrainConfig:
    out_dir: str = "runs/train"
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    precision: str = "auto"  # auto (bf16 on GPU, fp32 on CPU) | bf16 | fp32
    data: list[DataSourceConfig] = field(default_factory=list)
    eval_data: list[DataSourceConfig] = field(default_factory=list)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    log_every: int = 10
    eval_every: int = 0  # steps; 0 = only at the end
    eval_max_items: int = 50
    checkpoint_every: int = 500
    keep_checkpoints: int = 3
    num_workers: int = 0
    strict_data: bool = False
    strategy: str = "ddp"  # ddp | fsdp (FSDP2: parameters, gradients and optimizer state sharded)
    seg_mode: str = "multi"  # multi (M2SA: one [SEG] per target) | single (LISA: one [SEG], union mask)
    # Questions about one drawn image in a slot, each its own conversation (the authors: up to 3).
    questions_per_image: int = 1
    # What a step optimises (staged training, docs/TRAINING.md): m2sa (answers and masks; with
    # mask-free conversations in the data, the language stage) | promptable (SAM from point and
    # box prompts on mask_annotations data: the SAM stage) | patch_words (CLIP and the projector from
    # the words of what covers each patch, on mask_annotations data: CLIP's stage).
    objective: str = "m2sa"
    prompt_regions: int = 8  # promptable: regions prompted per image
    # patch_words: what an object's patches learn besides its category word: "ordinal" (its own
    # number, "2" on the second mug) or "count" (how many of its category the image holds).
    patch_instance_words: str = "ordinal"


_SCALARS = {"float": float, "int": int, "str": str}


def _coerce(value: Any, type_name: Any, where: str) -> Any:
    """YAML reads ``1e-3`` as a string (YAML 1.1); accept it where a number is declared."""
    if type_name == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true/false, got {value!r}")
        return value
    convert = _SCALARS.get(type_name if isinstance(type_name, str) else getattr(type_name, "__name__", ""))
    if convert is None or isinstance(value, convert):
        return value
    try:
        return convert(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected {type_name}, got {value!r}") from None


def _build(cls, values: dict[str, Any], where: str):
    if not isinstance(values, dict):
        raise ValueError(f"{where}: expected a mapping, got {type(values).__name__}")
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; known: {sorted(known)}")
    kwargs = {}
    for name, value in values.items():
        f = known[name]
        sub = f"{where}.{name}"
        if f.type in ("ModelConfig", ModelConfig):
            value = _build(ModelConfig, value, sub)
        elif f.type in ("OptimConfig", OptimConfig):
            value = _build(OptimConfig, value, sub)
        elif name in ("data", "eval_data", "tokenizer_data"):
            if not isinstance(value, list):
                raise ValueError(f"{sub}: expected a list of data sources")
            value = [_build(DataSourceConfig, v, f"{sub}[{i}]") for i, v in enumerate(value)]
        elif name == "betas":
            value = tuple(float(v) for v in value)
        elif name == "lr_scale":
            if not isinstance(value, dict):
                raise ValueError(f"{sub}: expected a mapping of parameter-name prefix to factor")
            value = {str(k): _coerce(v, "float", f"{sub}.{k}") for k, v in value.items()}
        else:
            value = _coerce(value, f.type, sub)
        kwargs[name] = value
    return cls(**kwargs)


def _set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = tree
    for key in keys[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise ValueError(f"override {dotted}: {key} is not a mapping")
    node[keys[-1]] = value


def load_config(path: str | Path | None, overrides: list[str] = ()) -> TrainConfig:
    """Read a YAML config and apply ``a.b=value`` overrides (values parsed as YAML scalars)."""
    tree: dict[str, Any] = {}
    if path:
        # Parsed from the open file, so a syntax error's position names the file.
        with Path(path).open(encoding="utf-8") as stream:
            tree = yaml.safe_load(stream) or {}
        if not isinstance(tree, dict):
            raise ValueError(f"{path}: the top level must be a mapping")
        base = Path(path).resolve().parent
        model_tree = tree.get("model") if isinstance(tree.get("model"), dict) else {}
        for src in tree.get("data", []) + tree.get("eval_data", []) + model_tree.get("tokenizer_data", []):
            # Relative data paths in a config file are relative to the repository root
            # (cwd) when they exist there, else to the config file.
            for key in ("path", "image_root"):
                if isinstance(src, dict) and src.get(key) and not Path(src[key]).is_absolute() \
                        and not Path(src[key]).exists() and (base / src[key]).exists():
                    src[key] = str(base / src[key])
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r}: expected key=value")
        key, raw = item.split("=", 1)
        _set_path(tree, key.strip(), yaml.safe_load(raw))
    return _build(TrainConfig, tree, str(path or "config"))


def config_to_dict(config: TrainConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)
