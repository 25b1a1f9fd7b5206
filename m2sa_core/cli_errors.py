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
One line on stderr, not a traceback, when a command-line tool meets bad input.

A robotics engineer who points ``m2sa-eval`` at the wrong folder or ``m2sa-train`` at a
YAML file with a typo needs to read which file is wrong and why; twenty lines of stack
bury that. Every console entry point of the package is wrapped by :func:`cli_entry`:
an exception becomes ``PROG: error: MESSAGE`` and exit status 2. ``--debug`` anywhere on
the command line, or ``M2SA_DEBUG=1`` in the environment, lets the traceback through for
a bug report. ``SystemExit`` (argparse's own usage errors, explicit exit codes) and
Ctrl-C pass unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import functools
import os
import sys

DEBUG_FLAG = "--debug"
DEBUG_ENV = "M2SA_DEBUG"
BAD_INPUT_STATUS = 2

Main = Callable[..., int | None]


def one_line(exc: BaseException) -> str:
    """
    Return the exception's message on one line; its type name when the message is empty or bare.

    Some libraries (YAML, JSON, rcl) spread a message over several indented lines; those
    are joined with single spaces so the whole message survives in one line.
    """
    text = " ".join(str(exc).split())
    if not text:
        return type(exc).__name__
    if isinstance(exc, KeyError):  # str(KeyError('x')) is "'x'": say what it is
        return f"missing key {text}"
    return text


def debug_requested(argv: Sequence[str]) -> bool:
    return DEBUG_FLAG in argv or os.environ.get(DEBUG_ENV, "") not in ("", "0")


def cli_entry(prog: str) -> Callable[[Main], Callable[..., int]]:
    """
    Decorate ``main(argv=None) -> int`` so that bad input ends in one line on stderr.

    ``--debug`` is removed from the arguments before ``main`` sees them (from
    ``sys.argv`` when ``argv`` is None, which is how console scripts call it).
    """

    def wrap(main: Main) -> Callable[..., int]:
        @functools.wraps(main)
        def run(argv: Sequence[str] | None = None) -> int:
            if argv is None:
                debug = debug_requested(sys.argv[1:])
                sys.argv = [sys.argv[0], *(a for a in sys.argv[1:] if a != DEBUG_FLAG)]
                call = lambda: main()  # noqa: E731 - main reads sys.argv itself
            else:
                debug = debug_requested(argv)
                kept = [a for a in argv if a != DEBUG_FLAG]
                call = lambda: main(kept)  # noqa: E731
            try:
                status = call()
            except (SystemExit, KeyboardInterrupt):
                raise
            except Exception as exc:  # noqa: BLE001 - the point is to catch whatever bad input raised
                if debug:
                    raise
                print(f"{prog}: error: {one_line(exc)} (add {DEBUG_FLAG} for the traceback)", file=sys.stderr)
                return BAD_INPUT_STATUS
            return int(status or 0)

        return run

    return wrap
