#!/usr/bin/env python3
"""One node serving two cameras against two single-camera nodes: memory, throughput, latency.

A robot with a head and a wrist camera can run one perception node per camera (one
model copy each) or one node with ``cameras: [head, wrist]`` (one model, commands of
both cameras batched into one model call). This script measures both set-ups in one
run, each node as its own ``m2sa-perception`` process on loopback DDS:

1. **one node, two cameras**: both cameras stream and both are kept busy (closed loop:
   ``--outstanding`` commands in flight per camera, the next sent as soon as one is
   answered); commands/s, latency publish -> result, the node's RSS;
2. **two single-camera nodes**, both busy the same way at the same time: the summed
   RSS of the two processes (and their combined commands/s, for reference);
3. **one single-camera node** of step 2, alone busy (the other stopped): commands/s.

Reported: RSS ratio one node / (node A + node B) (target <= 0.6), commands/s of the
two-camera node / the one single-camera node (target >= 1.5), p95 latency of each. RSS
is each process's peak over the samples taken while it was busy. Every command must get
exactly one result (lost and duplicated are counted). The node processes run with
``OMP_NUM_THREADS=--threads`` (default 1), so one node is one core of model compute and
the throughput ratio is batching's, not more threads'.

    .venv/bin/python bench/bench_multicamera.py
    .venv/bin/python bench/bench_multicamera.py --commands 60 --outstanding 3 --no-write
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import node_load as load  # noqa: E402
from bench.common import COMMANDS, RESULTS  # noqa: E402

CAMERAS = ("head", "wrist")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
    p.add_argument("--quick", action="store_true", help="8 commands per camera on a 160x120 stream")
    p.add_argument("--results", type=Path, default=RESULTS, help="markdown file to append to")
    p.add_argument("--no-write", action="store_true", help="print only")
    p.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")
    p.add_argument("--log-dir", default=None, help="where the nodes' logs go (default: a temp dir)")
    args = p.parse_args(argv)
    if args.quick:
        args.commands, args.width, args.height = 8, 160, 120
    for name in ("commands", "outstanding", "width", "height", "max_new_tokens", "max_queue", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.outstanding > args.max_queue + 1:
        p.error("--outstanding must be <= --max-queue + 1 (more would be refused with 'queue full')")
    if args.fps <= 0 or args.max_batch < 1:
        p.error("--fps must be > 0 and --max-batch >= 1")
    return args


# ----------------------------------------------------------------------------- driving
def drive(robot: load.Robot, label: str, commands: int, outstanding: int, timeout: float) -> None:
    """Closed loop on one camera: ``outstanding`` commands in flight until ``commands`` were sent."""
    for i in range(commands):
        if not robot.wait_outstanding(outstanding - 1, timeout):
            raise TimeoutError(f"{label}: no result within {timeout:.0f} s")
        # The same texts in every phase, so answers (and their lengths) are comparable.
        robot.send(f"{label} {i}: {COMMANDS[i % len(COMMANDS)]}")
    robot.wait_outstanding(0, timeout)


def busy(robots: dict[str, load.Robot], args: argparse.Namespace) -> dict[str, Any]:
    """Keep every robot's camera busy at once; per-camera summaries and the combined commands/s."""
    errors: list[BaseException] = []

    def run(name: str, robot: load.Robot) -> None:
        try:
            drive(robot, name, args.commands, args.outstanding, args.result_timeout)
        except BaseException as exc:  # noqa: BLE001 - reported after the join
            errors.append(exc)

    threads = [threading.Thread(target=run, args=item, daemon=True) for item in robots.items()]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    time.sleep(1.0)  # a duplicated result would arrive now
    summaries = {name: load.summarise(robot) for name, robot in robots.items()}
    last = max(r[0] for robot in robots.values() for o in robot.outcomes.values() for r in o.results)
    succeeded = sum(s["succeeded"] for s in summaries.values())
    latencies = [(o.results[0][0] - o.sent_at) * 1e3 for robot in robots.values()
                 for o in robot.outcomes.values() if o.results and o.results[0][1]]
    return {
        "cameras": summaries,
        "elapsed_s": last - started,
        "commands_per_s": succeeded / (last - started),
        "succeeded": succeeded,
        "lost": sum(s["lost"] for s in summaries.values()),
        "duplicated": sum(s["duplicated"] for s in summaries.values()),
        "errors": sum(sum(s["errors"].values()) for s in summaries.values()),
        "p50_ms": load.percentile(latencies, 50),
        "p95_ms": load.percentile(latencies, 95),
    }


class Robots:
    """One load.Robot per camera namespace, started, warmed up (one answered probe each) and closed."""

    def __init__(self, namespaces: dict[str, str], args: argparse.Namespace) -> None:
        self.robots = {name: load.Robot(ns, args.width, args.height, args.fps, seed=i)
                       for i, (name, ns) in enumerate(namespaces.items())}

    def start(self, nodes: list[load.NodeProcess], timeout: float) -> None:
        node_of = {name: nodes[min(i, len(nodes) - 1)] for i, name in enumerate(self.robots)}
        for name, robot in self.robots.items():
            robot.wait_for_node(node_of[name], timeout)
            robot.start_camera()
        for name, robot in self.robots.items():
            robot.wait_until_answering(node_of[name], timeout)

    def close(self) -> None:
        for robot in self.robots.values():
            robot.close()


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


def peak_rss(sampler: load.ProcessSampler) -> float:
    return max(s.rss_mib for s in sampler.samples)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The three phases; the report dict."""
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
                              "threads": args.threads}

    # 1. One node, two cameras.
    ns = load.new_namespace()
    node = load.NodeProcess({**params, "cameras": list(CAMERAS), "max_batch": args.max_batch}, ns,
                            logs / "two_cameras.log")
    robots = None
    try:
        robots = Robots({name: f"{ns}/{name}" for name in CAMERAS}, args)
        batching = BatchWatch(robots.robots[CAMERAS[0]], ns)
        robots.start([node], args.startup_timeout)
        batching.reset()
        sampler = load.ProcessSampler(node.pid, args.sample_period, lambda: 0).start()
        report["one_node"] = busy(robots.robots, args)
        sampler.stop()
        report["one_node"]["rss_mib"] = peak_rss(sampler)
        report["one_node"]["batching"] = batching.latest()
    finally:
        if robots is not None:
            robots.close()
        node.stop()

    # 2. Two single-camera nodes, both busy; 3. one of them alone.
    namespaces = {name: load.new_namespace() for name in CAMERAS}
    nodes = [load.NodeProcess(params, namespaces[name], logs / f"single_{name}.log") for name in CAMERAS]
    robots = None
    try:
        robots = Robots(namespaces, args)
        robots.start(nodes, args.startup_timeout)
        samplers = [load.ProcessSampler(n.pid, args.sample_period, lambda: 0).start() for n in nodes]
        report["two_nodes"] = busy(robots.robots, args)
        for sampler in samplers:
            sampler.stop()
        report["two_nodes"]["rss_mib"] = [peak_rss(s) for s in samplers]
        nodes[1].stop()
        robots.robots[CAMERAS[1]].close()
        alone = {CAMERAS[0]: robots.robots.pop(CAMERAS[0])}
        robots.robots.pop(CAMERAS[1])
        for robot in alone.values():  # forget phase 2's commands: same texts again
            with robot.lock:
                robot.outcomes.clear()
                robot.results_received = 0
        sampler = load.ProcessSampler(nodes[0].pid, args.sample_period, lambda: 0).start()
        report["single_node"] = busy(alone, args)
        sampler.stop()
        report["single_node"]["rss_mib"] = peak_rss(sampler)
        robots.robots = alone
    finally:
        if robots is not None:
            robots.close()
        for n in nodes:
            n.stop()

    one, two, single = report["one_node"], report["two_nodes"], report["single_node"]
    report["rss_ratio"] = one["rss_mib"] / sum(two["rss_mib"])
    report["throughput_ratio"] = one["commands_per_s"] / single["commands_per_s"]
    report["exactly_one_result"] = all(p["lost"] == 0 and p["duplicated"] == 0 for p in (one, two, single))
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
        f"- load: each camera busy, {report['outstanding']} commands in flight (the next sent when one is "
        f"answered), {report['commands_per_camera']} commands per camera per set-up",
        "",
        "| set-up | commands/s | p50 ms | p95 ms | RSS MiB (peak while busy) | lost / duplicated / errors |",
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
        f"**{report['throughput_ratio']:.2f}x** (target >= 1.5x: {tput_ok})",
        f"- exactly one result per command in every set-up: {report['exactly_one_result']}; the two-camera "
        f"node answered {one['batching'].get('batched_commands', 0)} of its {one['succeeded']} commands in "
        f"{one['batching'].get('batched_calls', 0)} batched model calls",
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
