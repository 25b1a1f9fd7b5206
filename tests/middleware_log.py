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
Fast DDS's own log lines, left out of a process's output before a test reads it.

Fast DDS (of Jazzy and Kilted) writes lines of its own to a process's stderr, between
the process's lines, such as "<date> [RTPS_TRANSPORT_SHM Error] Failed init_port
fastdds_port7004: open_and_lock_file failed". That one comes when a shared-memory port's
lock is held by another participant or was not taken within Fast DDS's 2 s on a loaded
machine (eProsima/Fast-DDS issue 6117); the participant then talks over UDP. The lines
are the middleware's, not the process's output, so a test that asserts what a command
prints reads it without them.
"""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FASTDDS_LOG = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \[\w+ (Error|Warning|Info)\]")


def is_middleware_line(line: str) -> bool:
    """Say whether ``line`` is one of Fast DDS's own log lines (colour codes or not)."""
    return bool(_FASTDDS_LOG.match(_ANSI.sub("", line)))


def without_middleware_lines(text: str) -> str:
    """Return ``text`` without Fast DDS's own log lines; every other line as it was."""
    return "".join(line for line in text.splitlines(keepends=True) if not is_middleware_line(line))
