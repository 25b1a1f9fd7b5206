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
``make demo``: the embedded default, end to end, on a fresh machine.

What a newcomer runs first. It exercises the whole product the way a robot uses it:

1. ``m2sa-synth`` renders a small set of *held-out* household scenes (a seed the
   shipped model was not trained on) with functional, multi-target, part-level
   questions;
2. ``m2sa-bag make`` records them as a rosbag2 (camera images, registered depth and
   camera_info + commands + ground truth, the targets' 3-D truth too), with a few
   commands about something not in view ("press the microwave's start button" on a
   counter without one): the world's own absent questions, or when its files have none,
   commands about household things it never draws;
3. ``m2sa-bag-eval`` starts the perception node on ``models/m2sa-tiny-synth`` (the
   shipped checkpoint; the untrained ``tiny`` preset with a loud warning when it is
   missing), replays the bag over DDS and scores the node's answers (masks, and the
   targets' boxes and normals against the 3-D truth) and counts the absent commands the
   node rejected (outcome ABSENT) and the present ones it wrongly rejected;
4. a table command -> answer -> targets (IoU) and the summary metrics are printed, and
   runs/demo/report.md, report.json and overlays/ stay for a closer look.

DDS traffic stays on this machine (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` unless
set) so a demo never talks to a robot on the same network.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
import shutil
import sys
import textwrap
import time
from typing import Any

from m2sa_core.shipped_model import SHIPPED_MODEL

REPO = Path(__file__).resolve().parents[2]  # m2sa_ros/bag/demo.py; the venv link resolves to the checkout
DEFAULT_MODEL = SHIPPED_MODEL
DEFAULT_OUT = REPO / "runs" / "demo"
DEMO_SEED = 2026  # not the training seed (0): scenes the shipped model has never seen
TEST_FILES = ("MMR_test_obj_only.json", "MMR_test_part_only.json", "MMR_test_mixed.json")
R2SM_FILE = "r2sm_test.json"
AMODAL_COMMANDS = 4  # R2SM commands that ask for the complete shape of a partly hidden object
ABSENT_COMMANDS = 4  # commands about something not in view: the node should answer OUTCOME_ABSENT
# Household things the synthetic world never draws (m2sa_core/data/synthetic/shapes.py's
# CATEGORIES): a command about one asks for something absent from every scene. Used when
# the world's test files hold no absent questions of their own.
OUT_OF_WORLD_COMMANDS = (("press the microwave's start button", "microwave"),
                         ("open the fridge door", "fridge"),
                         ("switch on the kettle", "kettle"),
                         ("hand me the stapler", "stapler"))


def _step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def _shorten(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` characters, keeping its indentation."""
    body = text.lstrip(" ")
    indent = text[: len(text) - len(body)]
    return indent + textwrap.shorten(body, width=max(width - len(indent), 20), placeholder="...") if body else indent


def results_table(report: dict[str, Any], width: int = 120) -> str:
    """One block per command: the command, the node's answer, each target with its IoU."""
    lines = []
    for cmd in report["commands"]:
        head = f"#{cmd['index']:<3} [{cmd['split'] or '-'}] {cmd['command']}"
        lines.append(_shorten(head, width))
        if not cmd["has_result"]:
            lines.append("     -> NO RESULT")
        elif not cmd["success"]:
            lines.append(_shorten(f"     -> error: {cmd['error']}", width))
        elif cmd.get("outcome") == "absent":
            said = f"no {cmd['missing']} in view" if cmd.get("missing") else "names no target"
            lines.append(_shorten(f"     -> ABSENT ({said}): {cmd['answer'] or '(empty answer)'}", width))
        else:
            lines.append(_shorten(f"     -> {cmd['answer'] or '(empty answer)'}", width))
        if cmd.get("expected_absent"):
            verdict = "rejected" if cmd.get("outcome") == "absent" else "NOT rejected"
            lines.append(_shorten(f"        expected: nothing (no {cmd.get('expected_missing') or '?'} in view): "
                                  f"{verdict}", width))
        for target in cmd["targets"]:
            iou = "-" if target["iou"] is None else f"{target['iou']:.2f}"
            lines.append(_shorten(f"        {target['label']:<40} IoU {iou}  score {target['score']:.2f}", width))
        missed = [cmd["ground_truth"][g] for g in cmd["missed_ground_truth"]]
        if missed:
            lines.append(_shorten("        missed: " + ", ".join(missed), width))
        for problem in cmd["problems"]:
            lines.append(_shorten(f"        ! {problem}", width))
    return "\n".join(lines)


def absent_records(records: list[Any], n: int) -> list[Any]:
    """
    Return ``n`` commands about something not in view, on the demo's test scenes.

    The world's own absent questions (a record whose meta says what is ``missing``) when
    its files hold some, taken in turn from each split; else commands about a household
    thing the world never draws, each on the image of a present object-level record (an
    object category the scene does not hold goes to obj_only, as the world files it).
    """
    if n <= 0:
        return []
    own = [r for r in records if "missing" in r.meta]
    if own:
        by_split: dict[str, list[Any]] = {}
        for record in own:
            by_split.setdefault(record.split, []).append(record)
        queues = list(by_split.values())
        taken: list[Any] = []
        while len(taken) < n and any(queues):
            for queue in queues:
                if queue and len(taken) < n:
                    taken.append(queue.pop(0))
        return taken
    from m2sa_core.inference.absence import absent_answer

    present = [r for r in records if "missing" not in r.meta]
    hosts = [r for r in present if "obj_only" in r.split] or present
    made = []
    for i, (host, (command, words)) in enumerate(zip(hosts, OUT_OF_WORLD_COMMANDS[:n])):
        made.append(dataclasses.replace(host, question=command, answer_template=absent_answer(words), targets=[],
                                        question_index=10_000 + i, mask_type=None,
                                        meta={**host.meta, "missing": {"kind": "category", "words": words}}))
    return made


def run_demo(out: Path = DEFAULT_OUT, model_path: Path | None = None, images: int = 100, commands: int = 36,
             rate_factor: float = 4.0, storage: str = "mcap", seed: int = DEMO_SEED) -> int:
    """Generate, record, replay, score; returns the process exit status."""
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    from m2sa_core.data.readers import read_dataset
    from m2sa_core.data.synthetic import main as synth_main
    from m2sa_ros.bag.bag_io import plan_from_records, write_bag
    from m2sa_ros.bag.depth_recording import DepthOptions, plan_depth, print_notes
    from m2sa_ros.bag.evaluate import evaluate_bag, summary_text

    started = time.monotonic()
    model = model_path if model_path is not None else DEFAULT_MODEL
    node_args: list[str] = ["-p", "max_queue:=8", "-p", "amodal:=true"]
    if (model / "config.json").is_file():
        node_args += ["-p", f"model_path:={model}"]
        model_note = str(model)
    elif model_path is not None:
        print(f"demo: error: --model-path {model_path} is not a checkpoint directory (no config.json)", file=sys.stderr)
        return 2
    else:
        node_args += ["-p", "preset:=tiny"]
        model_note = "preset 'tiny' with RANDOM weights"
        print(f"WARNING: the shipped model {DEFAULT_MODEL} is not there yet; the demo runs the untrained tiny "
              f"preset, so answers are noise and scores near 0. Train it (see docs/TRAINING.md) or pass --model-path.",
              file=sys.stderr)

    # Only our own outputs are removed: a re-run starts clean, nothing else in runs/ is touched.
    out.mkdir(parents=True, exist_ok=True)
    for name in ("data", "bag", "results_bag", "overlays"):
        shutil.rmtree(out / name, ignore_errors=True)
    for name in ("report.md", "report.json", "node.log"):
        (out / name).unlink(missing_ok=True)

    _step(f"1/3 m2sa-synth: {images} scenes with seed {seed} (held out from training)")
    synth_main(["--out", str(out / "data"), "--images", str(images), "--seed", str(seed), "--quiet"])

    _step(f"2/3 m2sa-bag make: up to {commands} commands on the test scenes (a few asking for complete "
          f"shapes), and a few about something not in view -> {out / 'bag'}")
    # Mostly MMR-style questions, plus a few R2SM commands that ask for the complete shape
    # of a partly hidden object (the node then answers with the amodal mask).
    records = [r for name in TEST_FILES for r in read_dataset(out / "data" / name).records]
    amodal = [r for r in read_dataset(out / "data" / R2SM_FILE).records if r.mask_type == "amodal"]
    n_amodal = min(AMODAL_COMMANDS, len(amodal), max(commands // 6, 0))
    # Besides those, about one command in nine asks about something not in view (one already
    # in a run of three): the commands with targets stay the ones a demo without them asks.
    absent = absent_records(records, min(ABSENT_COMMANDS, max(commands // 9, 1 if commands >= 3 else 0)))
    present = [r for r in records if "missing" not in r.meta]
    selected = present[: commands - n_amodal] + amodal[:n_amodal] + absent
    plan = plan_from_records(selected, rate_hz=1.0)
    # Registered depth and camera_info beside every frame (mild sensor artefacts), and the
    # 3-D ground truth the targets' boxes and normals are scored against.
    print_notes(plan_depth(plan, selected, DepthOptions(), data_dirs=[out / "data"]), prog="demo")
    bag = write_bag(plan, out / "bag", storage=storage)

    _step(f"3/3 m2sa-bag-eval: perception node on {model_note}, replay at {rate_factor}x")
    evaluation = evaluate_bag(bag, out, node_args=node_args, rate_factor=rate_factor, progress=True,
                              result_timeout_s=300.0, startup_timeout_s=300.0)
    report = evaluation.report

    print("\n" + results_table(report))
    print("\n" + summary_text(report))
    print(f"\nmodel: {model_note}")
    print(f"report:   {out / 'report.md'}\noverlays: {out / 'overlays'} (contact_sheet.png + one PNG per command)")
    print(f"recorded: {out / 'results_bag'} (SegmentationResult on /m2sa/result); node log: {out / 'node.log'}")
    print(f"demo finished in {time.monotonic() - started:.0f} s")
    return 1 if report["counts"]["commands_without_result"] else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m m2sa_ros.bag.demo", description=__doc__.strip().splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory (default runs/demo)")
    parser.add_argument("--model-path", type=Path, default=None,
                        help=f"checkpoint directory (default {DEFAULT_MODEL.relative_to(REPO)})")
    parser.add_argument("--images", type=int, default=100, help="synthetic scenes to render (10%% are test scenes)")
    parser.add_argument("--commands", type=int, default=36,
                        help="commands with targets in the bag (at most); about one in nine more ask about "
                             "something not in view")
    parser.add_argument("--rate-factor", type=float, default=4.0, help="replay speed relative to the recording")
    parser.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap")
    parser.add_argument("--seed", type=int, default=DEMO_SEED)
    args = parser.parse_args(argv)
    if args.images < 10 or args.commands < 1:
        parser.error("--images must be >= 10 (for test scenes) and --commands >= 1")
    from m2sa_ros.bag.node_subprocess import Interrupted, stop_on_signals

    try:
        with stop_on_signals():  # SIGINT and SIGTERM stop the node the demo started, then the demo
            return run_demo(args.out, args.model_path, args.images, args.commands, args.rate_factor, args.storage,
                            args.seed)
    except (ValueError, RuntimeError, TimeoutError) as exc:
        print(f"demo: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ValueError) else 1
    except Interrupted as exc:
        print(f"demo: {exc.signal_name}; the node was stopped", file=sys.stderr)
        return exc.exit_status


if __name__ == "__main__":
    sys.exit(main())
