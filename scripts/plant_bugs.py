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
Plant each bug of scripts/planted_bugs.py in turn, run the tests that must catch it, restore the code.

A suite proves itself by failing: for every planted one-line slip, the tests it names
are run with the slip in the code, and the bug counts as caught only when they fail
(pytest's exit status 1). Exit status 0 means no test failed (missed: a gap in the
suite); any other status (a collection error, no test selected, a timeout) proves
nothing and is reported as an error. The code is put back byte for byte, with its
modification time, after every bug, whatever happens: a failed run, Ctrl-C or SIGTERM
(only SIGKILL cannot be caught; the next run then refuses the file, naming it).

    .venv/bin/python scripts/plant_bugs.py                     # every bug: a few minutes on 2 cores
    .venv/bin/python scripts/plant_bugs.py --only tf-at-latest request-id-not-echoed
    .venv/bin/python scripts/plant_bugs.py --list              # the bugs, nothing planted
    .venv/bin/python scripts/plant_bugs.py --markdown runs/planted_bugs.md
    .venv/bin/python scripts/plant_bugs.py --baseline          # first: the selected tests pass unplanted

``--baseline`` first runs every selected test once on the code as it is: a test that
already fails there would "catch" every bug planted under it. It edits the checkout it
lives in, so run it where nothing else reads the sources at the same time (not beside a
test run or the node). Prints a line per bug and a markdown table; exit status 0 only
when every bug was caught, 1 otherwise, 2 on bad arguments or a bug list that no longer
fits the code.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
import os
from pathlib import Path
import signal
import subprocess
import sys
import time

from planted_bugs import BUGS, PlantedBug

ROOT = Path(__file__).resolve().parents[1]
PROG = "plant_bugs"
CAUGHT, MISSED, ERROR = "caught", "missed", "error"
# pytest's exit status when tests ran and at least one failed: the only proof of a catch.
TESTS_FAILED = 1
DEFAULT_TIMEOUT_S = 600.0  # per bug; a planted bug that makes a test hang is an error, not a catch
OUTPUT_TAIL_LINES = 15  # of pytest's output, shown for a bug that was not caught
HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class PlantError(ValueError):
    """A bug that no longer fits the code (its text is missing or ambiguous); the text says which."""


class Stopped(Exception):
    """SIGTERM arrived: stop as Ctrl-C does, once the code is restored."""


@dataclass(frozen=True)
class Outcome:
    """What planting one bug showed: ``result`` is caught, missed or error; ``detail`` says why when not caught."""

    bug: PlantedBug
    result: str
    seconds: float
    detail: str = ""


# --------------------------------------------------------------------------- planting
def planted_text(text: str, bug: PlantedBug) -> str:
    """
    Return ``text`` with the bug planted; PlantError unless its original occurs exactly once.

    Exactly once, because a text found twice could plant the slip in the wrong place and a
    text found nowhere would plant nothing: either way the verdict would be about another
    bug than the one listed.
    """
    count = text.count(bug.original)
    if count != 1:
        where = "not found" if count == 0 else f"found {count} times"
        raise PlantError(f"{bug.bug_id}: {bug.path}: the original text {bug.original!r} is {where} (it must occur "
                         "exactly once; if a run was killed, `git checkout -- FILE` puts the file back)")
    if bug.replacement == bug.original:
        raise PlantError(f"{bug.bug_id}: the replacement is the original text: nothing would be planted")
    return text.replace(bug.original, bug.replacement, 1)


@contextmanager
def signals_held() -> Iterator[None]:
    """
    Hold SIGINT and SIGTERM back while the block runs; they are delivered right after it.

    Writing a file back must not be cut in the middle by the very Ctrl-C that asked for
    the code to be put back.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def planted(bug: PlantedBug, root: Path = ROOT) -> Iterator[Path]:
    """
    Plant ``bug`` in the checkout at ``root`` for the block; the file's bytes and mtime come back after it.

    The original is put back in ``finally``, so an exception, Ctrl-C or SIGTERM (raised as
    :class:`Stopped`) inside the block restores it too. The modification time is restored
    as well, so make (whose setup stamps depend on the node's sources) and Python's
    bytecode cache see the file as never touched.
    """
    path = root / bug.path
    original = path.read_bytes()
    stat = path.stat()
    mutated = planted_text(original.decode("utf-8"), bug).encode("utf-8")
    try:
        with signals_held():
            path.write_bytes(mutated)
        yield path
    finally:
        with signals_held():
            path.write_bytes(original)
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def check_fits(bugs: Sequence[PlantedBug], root: Path = ROOT) -> dict[str, str]:
    """Return why each bug that does not fit the code at ``root`` cannot be planted, by id (empty: all fit)."""
    problems = {}
    for bug in bugs:
        path = root / bug.path
        try:
            planted_text(path.read_text(encoding="utf-8"), bug)
        except (OSError, PlantError) as exc:
            problems[bug.bug_id] = str(exc)
    return problems


# --------------------------------------------------------------------------- running the tests
def pytest_command(selections: Sequence[str]) -> list[str]:
    """
    Return the pytest command line for ``selections``, with this interpreter.

    -x stops at the first failure (one is the proof); plugin order randomisation and the
    cache are off, so a run neither reorders nor remembers anything from the last bug.
    """
    return [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
            *selections]


def classify(returncode: int) -> str:
    """Return pytest's exit status as a verdict: 1 caught, 0 missed, anything else an error (no proof)."""
    if returncode == TESTS_FAILED:
        return CAUGHT
    return MISSED if returncode == 0 else ERROR


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def run_tests(selections: Sequence[str], root: Path, timeout_s: float,
              runner: Runner = subprocess.run) -> tuple[int, str]:
    """
    Run pytest on ``selections`` from ``root``; (exit status, its output).

    The child writes no bytecode: a planted module's .pyc must never outlive the bug in
    __pycache__. A run past ``timeout_s`` is killed and reported as status -1.
    """
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    try:
        proc = runner(pytest_command(selections), cwd=root, env=env, stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return -1, out + f"\n(killed after {timeout_s:g} s)"
    return proc.returncode, proc.stdout or ""


def _tail(output: str, lines: int = OUTPUT_TAIL_LINES) -> str:
    return "\n".join(output.rstrip().splitlines()[-lines:])


def try_bug(bug: PlantedBug, root: Path = ROOT, timeout_s: float = DEFAULT_TIMEOUT_S,
            runner: Runner = subprocess.run) -> Outcome:
    """Plant one bug, run its tests, restore the code; the verdict."""
    started = time.monotonic()
    with planted(bug, root):
        returncode, output = run_tests(bug.caught_by, root, timeout_s, runner)
    result = classify(returncode)
    detail = "" if result == CAUGHT else f"pytest exit status {returncode}:\n{_tail(output)}"
    return Outcome(bug, result, time.monotonic() - started, detail)


# --------------------------------------------------------------------------- reporting
def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(outcomes: Sequence[Outcome]) -> str:
    """Return the outcomes as a markdown table: id | what breaks | file | caught by | result | seconds."""
    rows = ["| id | what breaks | file | caught by | result | seconds |", "|---|---|---|---|---|---:|"]
    for o in outcomes:
        tests = "<br>".join(f"`{_cell(s)}`" for s in o.bug.caught_by)
        rows.append(f"| `{o.bug.bug_id}` | {_cell(o.bug.breaks)} | `{o.bug.path}` | {tests} | {o.result} | "
                    f"{o.seconds:.1f} |")
    caught = sum(o.result == CAUGHT for o in outcomes)
    total = sum(o.seconds for o in outcomes)
    return "\n".join(rows) + f"\n\n{caught} of {len(outcomes)} planted bugs caught in {total:.0f} s.\n"


def list_bugs(bugs: Sequence[PlantedBug]) -> str:
    """Return one line per bug: id, area, file, what breaks."""
    width = max(len(b.bug_id) for b in bugs)
    return "\n".join(f"{b.bug_id:<{width}}  {b.area:<10}  {b.path}: {b.breaks}" for b in bugs)


# --------------------------------------------------------------------------- the command
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.strip().splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="ID", default=[], action="extend",
                        help="plant only these bugs (ids as --list shows them)")
    parser.add_argument("--list", action="store_true", help="list the bugs and exit; nothing is planted")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table to FILE")
    parser.add_argument("--baseline", action="store_true",
                        help="first run the selected bugs' tests on the unplanted code: they must pass")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help=f"seconds one bug's tests may take (default {DEFAULT_TIMEOUT_S:g})")
    return parser


def select(bugs: Sequence[PlantedBug], only: Sequence[str]) -> list[PlantedBug]:
    """Return the bugs ``only`` names, in the list's order (all without ``only``); ValueError naming an unknown id."""
    if not only:
        return list(bugs)
    known = {b.bug_id for b in bugs}
    unknown = [i for i in only if i not in known]
    if unknown:
        raise ValueError(f"unknown bug id {', '.join(repr(i) for i in unknown)} (see --list)")
    return [b for b in bugs if b.bug_id in set(only)]


def _stop_on_sigterm(_signum: int, _frame: object) -> None:
    raise Stopped()


def _write_markdown(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _error(text: str) -> int:
    print(f"{PROG}: error: {text}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None, root: Path = ROOT, bugs: Sequence[PlantedBug] = BUGS) -> int:
    """Plant, test and restore each selected bug; 0 only when every one was caught."""
    args = _parser().parse_args(argv)
    try:
        chosen = select(bugs, args.only)
    except ValueError as exc:
        return _error(str(exc))
    if args.list:
        print(list_bugs(chosen))
        return 0
    if not args.timeout > 0:
        return _error(f"--timeout must be > 0 seconds, got {args.timeout:g}")
    markdown = Path(args.markdown).expanduser().resolve() if args.markdown else None
    if markdown is not None and markdown.is_dir():
        return _error(f"--markdown {args.markdown}: is a folder, not a file")
    unfit = check_fits(chosen, root)
    if unfit:
        for text in unfit.values():
            print(f"{PROG}: {text}", file=sys.stderr)
        return _error(f"{len(unfit)} bug(s) do not fit the code; nothing was planted")

    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    outcomes: list[Outcome] = []
    try:
        if args.baseline:
            selections = list(dict.fromkeys(s for b in chosen for s in b.caught_by))
            print(f"baseline: {len(selections)} test selection(s) on the unplanted code ...", flush=True)
            returncode, output = run_tests(selections, root, args.timeout * len(chosen))
            if returncode != 0:
                print(_tail(output), file=sys.stderr)
                return _error(f"the tests fail without any bug planted (pytest exit status {returncode}): "
                              "a catch would prove nothing")
        for n, bug in enumerate(chosen, 1):
            outcome = try_bug(bug, root, args.timeout)
            outcomes.append(outcome)
            print(f"[{n:2d}/{len(chosen)}] {outcome.result:<6}  {bug.bug_id}  ({outcome.seconds:.1f} s)", flush=True)
            if outcome.detail:
                print("        " + outcome.detail.replace("\n", "\n        "), flush=True)
    except (KeyboardInterrupt, Stopped) as exc:
        signum = signal.SIGTERM if isinstance(exc, Stopped) else signal.SIGINT
        print(f"{PROG}: {signum.name}: stopped after {len(outcomes)} of {len(chosen)} bugs; the code is restored",
              file=sys.stderr)
        if outcomes:
            print(markdown_table(outcomes), end="")
        return 128 + signum  # a shell's status for a command ended by that signal
    finally:
        signal.signal(signal.SIGTERM, previous)

    table = markdown_table(outcomes)
    print()
    print(table, end="")
    if markdown is not None:
        try:
            _write_markdown(markdown, table)
        except OSError as exc:
            return _error(f"--markdown {args.markdown}: {exc.strerror or exc}")
    return 0 if all(o.result == CAUGHT for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
