#!/usr/bin/env python3

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
One node serving two cameras against two single-camera nodes: memory, throughput, latency.

A robot with a head and a wrist camera can run one perception node per camera (one
model copy each) or one node with ``cameras: [head, wrist]`` (one model, commands of
both cameras batched into one model call). This script measures both set-ups in one
run. Three node processes (``m2sa-perception`` on loopback DDS) live through the whole
run: the two-camera node and two single-camera nodes A and B. In each of ``--rounds``
rounds, one after the other:

1. **one node, two cameras**: both of its cameras stream and are kept busy (closed
   loop: ``--outstanding`` commands in flight per camera, the next sent as soon as one
   is answered);
2. **one single-camera node**: node A's camera alone, kept busy the same way;
3. (first round only) **two single-camera nodes**, A and B busy at once, for reference.

Only the cameras of the phase stream; the other nodes idle. Alternating the set-ups in
rounds keeps a machine whose load drifts (a shared CI box) from favouring either one;
the throughput ratio is the median of the rounds' ratios. Reported: RSS of the
two-camera node / (RSS of A + RSS of B), each the process's peak over the run (target
<= 0.6); commands/s of the two-camera node with both cameras busy / node A alone busy
(target >= 1.5); latency publish -> result, p50 and p95. Every command must get exactly
one result (lost and duplicated are counted). The nodes run with
``OMP_NUM_THREADS=--threads`` (default 1): one node is one core of model compute, so
the throughput ratio is batching's, not more threads'.

    .venv/bin/python bench/bench_multicamera.py
    .venv/bin/python bench/bench_multicamera.py --rounds 1 --commands 20 --no-write
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
import sys
import threading
import time
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import node_load as load  # noqa: E402
from bench.common import COMMANDS, RESULTS  # noqa: E402

CAMERAS = ("head", "wrist")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    p.add_argument("--commands", type=int, default=40, help="commands per busy camera in each phase (default 40)")
    p.add_argument("--outstanding", type=int, default=4,
                   help="commands in flight per camera: the next goes out when one is answered (default 4)")
    p.add_argument("--fps", type=float, default=10.0, help="frames per second of each camera (default 10)")
    p.add_argument("--width", type=int, default=640)
    p.add_argument("--height", type=int, default=480)
    p.add_argument("--max-new-tokens", type=int, default=32, help="node parameter max_new_tokens")
    p.add_argument("--max-queue", type=int, default=4, help="node parameter max_queue (per camera)")
    p.add_argument("--max-batch", type=int, default=4, help="node parameter max_batch of the two-camera node")
    p.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of the node processes (default 1)")
    p.add_argument("--model-path", default=None, help="checkpoint directory (default: shipped model, else tiny)")
    p.add_argument("--sample-period", type=float, default=0.25, help="seconds between RSS samples")
    p.add_argument("--startup-timeout", type=float, default=180.0)
    p.add_argument("--result-timeout", type=float, default=120.0)
    p.add_argument("--rounds", type=int, default=3, help="rounds alternating the set-ups (default 3)")
    p.add_argument("--quick", action="store_true", help="1 round, 8 commands per camera, a 160x120 stream")
    p.add_argument("--results", type=Path, default=RESULTS, help="markdown file to append to")
    p.add_argument("--no-write", action="store_true", help="print only")
    p.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")
    p.add_argument("--log-dir", default=None, help="where the nodes' logs go (default: a temp dir)")
    args = p.parse_args(argv)
    if args.quick:
        args.commands, args.width, args.height, args.rounds = 8, 160, 120, 1
    for name in ("commands", "rounds", "outstanding", "width", "height", "max_new_tokens", "max_queue", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.outstanding > args.max_queue + 1:
        p.error("--outstanding must be <= --max-queue + 1 (more would be refused with 'queue full')")
    if args.fps <= 0 or args.max_batch < 1:
        p.error("--fps must be > 0 and --max-batch >= 1")
    return args


# ----------------------------------------------------------------------------- driving
class Camera(load.Robot):
    """A load.Robot whose stream starts paused: only the cameras of the phase being measured publish."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.streaming.clear()

    def forget(self) -> None:
        """Start a phase afresh: the same command texts are sent again."""
        with self.lock:
            self.outcomes.clear()
            self.results_received = 0


def drive(robot: load.Robot, label: str, commands: int, outstanding: int, timeout: float) -> None:
    """Drive one camera in a closed loop: ``outstanding`` commands in flight until ``commands`` were sent."""
    for i in range(commands):
        if not robot.wait_outstanding(outstanding - 1, timeout):
            raise TimeoutError(f"{label}: no result within {timeout:.0f} s")
        # The same texts in every set-up, so answers (and their lengths) are comparable.
        robot.send(f"{label} {i}: {COMMANDS[i % len(COMMANDS)]}")
    robot.wait_outstanding(0, timeout)


def busy(cameras: dict[str, Camera], args: argparse.Namespace) -> dict[str, Any]:
    """Keep the given cameras busy at once; counts, latencies and the combined commands/s."""
    for camera in cameras.values():
        camera.forget()
        camera.streaming.set()
    time.sleep(0.5)  # fresh frames in the nodes
    errors: list[BaseException] = []

    def run(label: str, camera: Camera) -> None:
        try:
            drive(camera, label, args.commands, args.outstanding, args.result_timeout)
        except BaseException as exc:  # noqa: BLE001 - reported after the join
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f"cam{k}", camera), daemon=True)
               for k, camera in enumerate(cameras.values())]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for camera in cameras.values():
        camera.streaming.clear()
    if errors:
        raise errors[0]
    time.sleep(1.0)  # a duplicated result would arrive now
    summaries = [load.summarise(camera) for camera in cameras.values()]
    outcomes = [o for camera in cameras.values() for o in camera.outcomes.values()]
    last = max(r[0] for o in outcomes for r in o.results)
    return {
        "elapsed_s": last - started,
        "succeeded": sum(s["succeeded"] for s in summaries),
        "lost": sum(s["lost"] for s in summaries),
        "duplicated": sum(s["duplicated"] for s in summaries),
        "errors": sum(sum(s["errors"].values()) for s in summaries),
        "latencies_ms": [(o.results[0][0] - o.sent_at) * 1e3 for o in outcomes if o.results and o.results[0][1]],
    }


def totals(phases: list[dict[str, Any]]) -> dict[str, Any]:
    """One set-up over its rounds: commands/s, latency percentiles, counts."""
    latencies = [ms for p in phases for ms in p["latencies_ms"]]
    succeeded = sum(p["succeeded"] for p in phases)
    return {
        "commands_per_s": succeeded / sum(p["elapsed_s"] for p in phases),
        "per_round_commands_per_s": [p["succeeded"] / p["elapsed_s"] for p in phases],
        "succeeded": succeeded,
        "p50_ms": load.percentile(latencies, 50),
        "p95_ms": load.percentile(latencies, 95),
        **{k: sum(p[k] for p in phases) for k in ("lost", "duplicated", "errors")},
    }


class BatchWatch:
    """The two-camera node's batching counters, from its /diagnostics (batched_calls, batched_commands)."""

    def __init__(self, robot: load.Robot, namespace: str) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        self._namespace = namespace
        self._values: dict[str, int] = {}
        self._base = {"batched_calls": 0, "batched_commands": 0}
        robot.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)

    def _on_diagnostics(self, msg: Any) -> None:
        for status in msg.status:
            if status.name.startswith(self._namespace + "/"):
                values = {kv.key: kv.value for kv in status.values}
                if "batched_calls" in values:
                    self._values = {k: int(values[k]) for k in self._base}

    def reset(self) -> None:
        """Count from now on (the warm-up probes are not part of the run)."""
        time.sleep(1.5)  # the latest diagnostics, at the default 1 s period
        self._base = dict(self._values) or self._base

    def latest(self) -> dict[str, int]:
        time.sleep(1.5)
        return {k: self._values.get(k, 0) - self._base[k] for k in self._base}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the three nodes, alternate the set-ups in rounds, stop everything; the report dict."""
    load.isolated_dds_env()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # the node processes inherit it
    model_params, model_line = load.choose_model(args.model_path)
    params = {**model_params, "max_new_tokens": args.max_new_tokens, "max_queue": args.max_queue,
              "wait_for_image": 5.0, "device": "cpu"}
    logs = load.log_dir(args.log_dir)
    report: dict[str, Any] = {"model": model_line, "revision": load.git_revision(),
                              "params": {**params, "max_batch": args.max_batch},
                              "stream": f"{args.width}x{args.height} rgb8 at {args.fps:g} Hz per camera",
                              "commands_per_camera": args.commands, "outstanding": args.outstanding,
                              "threads": args.threads, "rounds": args.rounds}
    ns = {name: load.new_namespace() for name in ("two", "a", "b")}
    nodes = {"two": load.NodeProcess({**params, "cameras": list(CAMERAS), "max_batch": args.max_batch}, ns["two"],
                                     logs / "two_cameras.log"),
             "a": load.NodeProcess(params, ns["a"], logs / "single_a.log"),
             "b": load.NodeProcess(params, ns["b"], logs / "single_b.log")}
    cameras: dict[str, Camera] = {}
    try:
        where = {"head": (f"{ns['two']}/head", "two"), "wrist": (f"{ns['two']}/wrist", "two"),
                 "a": (ns["a"], "a"), "b": (ns["b"], "b")}
        for k, (name, (namespace, _)) in enumerate(where.items()):
            cameras[name] = Camera(namespace, args.width, args.height, args.fps, seed=k % 2)
        batching = BatchWatch(cameras["head"], ns["two"])
        for name, camera in cameras.items():
            camera.wait_for_node(nodes[where[name][1]], args.startup_timeout)
            camera.start_camera()
            camera.streaming.set()
        for name, camera in cameras.items():
            camera.wait_until_answering(nodes[where[name][1]], args.startup_timeout)
            camera.streaming.clear()
        batching.reset()
        samplers = {key: load.ProcessSampler(node.pid, args.sample_period, lambda: 0).start()
                    for key, node in nodes.items()}
        phases: dict[str, list[dict[str, Any]]] = {"one_node": [], "single_node": [], "two_nodes": []}
        for r in range(args.rounds):
            phases["one_node"].append(busy({n: cameras[n] for n in ("head", "wrist")}, args))
            phases["single_node"].append(busy({"a": cameras["a"]}, args))
            if r == 0:
                phases["two_nodes"].append(busy({n: cameras[n] for n in ("a", "b")}, args))
        report["one_node_batching"] = batching.latest()
        for sampler in samplers.values():
            sampler.stop()
        rss = {key: max(s.rss_mib for s in sampler.samples) for key, sampler in samplers.items()}
    finally:
        for camera in cameras.values():
            camera.close()
        for node in nodes.values():
            node.stop()
    for key, values in phases.items():
        report[key] = totals(values)
    report["one_node"]["rss_mib"] = rss["two"]
    report["two_nodes"]["rss_mib"] = [rss["a"], rss["b"]]
    report["single_node"]["rss_mib"] = rss["a"]
    report["rss_ratio"] = rss["two"] / (rss["a"] + rss["b"])
    ratios = [one / single for one, single in zip(report["one_node"]["per_round_commands_per_s"],
                                                  report["single_node"]["per_round_commands_per_s"])]
    report["throughput_ratios"] = ratios
    report["throughput_ratio"] = float(sorted(ratios)[len(ratios) // 2]) if len(ratios) % 2 else \
        float(sum(sorted(ratios)[len(ratios) // 2 - 1:len(ratios) // 2 + 1]) / 2)
    report["exactly_one_result"] = all(report[k]["lost"] == 0 and report[k]["duplicated"] == 0 for k in phases)
    return report


def markdown(report: dict[str, Any], cmd: str) -> str:
    one, two, single = report["one_node"], report["two_nodes"], report["single_node"]
    rss_ok = "met" if report["rss_ratio"] <= 0.6 else "MISSED"
    tput_ok = "met" if report["throughput_ratio"] >= 1.5 else "MISSED"
    p = report["params"]
    return "\n".join([
        f"## bench_multicamera: one node serving two cameras vs two single-camera nodes, {report['stream']}",
        "",
        f"- date: {load.utc_now()}; load average at the end: {load.load_average()}",
        f"- machine: {load.machine_line()}",
        f"- command: `{cmd}` (commit {report['revision']})",
        f"- model: {report['model']}; max_new_tokens {p['max_new_tokens']}, max_queue {p['max_queue']} per camera, "
        f"max_batch {p['max_batch']}, device cpu, OMP_NUM_THREADS={report['threads']} per node process",
        f"- load: each busy camera keeps {report['outstanding']} commands in flight (the next sent when one is "
        f"answered), {report['commands_per_camera']} commands per camera per phase; {report['rounds']} rounds "
        f"alternating the set-ups (all three nodes alive throughout; RSS is each process's peak over the run)",
        "",
        "| set-up | commands/s | p50 ms | p95 ms | RSS MiB (peak) | lost / duplicated / errors |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| one node, `cameras: [head, wrist]`, both busy | {one['commands_per_s']:.2f} | {one['p50_ms']:.0f} | "
        f"{one['p95_ms']:.0f} | {one['rss_mib']:.0f} | {one['lost']} / {one['duplicated']} / {one['errors']} |",
        f"| two single-camera nodes, both busy | {two['commands_per_s']:.2f} | {two['p50_ms']:.0f} | "
        f"{two['p95_ms']:.0f} | {two['rss_mib'][0]:.0f} + {two['rss_mib'][1]:.0f} = {sum(two['rss_mib']):.0f} | "
        f"{two['lost']} / {two['duplicated']} / {two['errors']} |",
        f"| one single-camera node, busy | {single['commands_per_s']:.2f} | {single['p50_ms']:.0f} | "
        f"{single['p95_ms']:.0f} | {single['rss_mib']:.0f} | {single['lost']} / {single['duplicated']} / "
        f"{single['errors']} |",
        "",
        f"- **RSS ratio** one node / two nodes: **{report['rss_ratio']:.2f}** (target <= 0.6: {rss_ok})",
        f"- **commands/s ratio** one node, both cameras busy / one single-camera node: "
        f"**{report['throughput_ratio']:.2f}x** (median of the rounds: "
        f"{', '.join(f'{r:.2f}' for r in report['throughput_ratios'])}; target >= 1.5x: {tput_ok})",
        f"- exactly one result per command in every set-up: {report['exactly_one_result']}; the two-camera "
        f"node answered {report['one_node_batching'].get('batched_commands', 0)} of its {one['succeeded']} "
        f"commands in {report['one_node_batching'].get('batched_calls', 0)} batched model calls",
    ])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    report = run(args)
    text = markdown(report, load.command_line(argv, "bench_multicamera.py"))
    load.publish(text, report, args.results, write=not args.no_write, json_path=args.json)
    return report


if __name__ == "__main__":
    rep = main()
    sys.exit(0 if rep["exactly_one_result"] else 1)
