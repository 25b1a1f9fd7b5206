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
The ``cameras`` parameter's names: what a camera may be called, checked without ROS.

Apart from camera_state.py, which holds each camera's buffers and tracks (and through them
numpy, OpenCV and torch), so that reading and checking the parameters
(m2sa_ros/params/node_params.py) stays a light import: ``ros2 param``-time checks, the launch
file and the docs' parameter table never load the model's libraries.
"""

from __future__ import annotations

import re
from typing import Any

# A relative ROS name of one or more tokens ("head", "arm/wrist"): letters, digits and
# underscores, not starting with a digit. Checked here so a bad name is one clear line
# at configure rather than rcl's exception at the first create_subscription.
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$")
MAX_CAMERAS = 16


def check_camera_names(names: Any) -> str | None:
    """Return a complaint about a ``cameras`` value (a list of names), or None when it is fine."""
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        return "expected a list of camera names, e.g. ['head', 'wrist']"
    if len(names) > MAX_CAMERAS:
        return f"at most {MAX_CAMERAS} cameras, got {len(names)}"
    bad = [n for n in names if not _NAME_RE.match(n)]
    if bad:
        return (f"invalid camera name(s) {', '.join(repr(n) for n in bad)}: use letters, digits and '_' "
                f"(not starting with a digit), tokens separated by '/'")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        return f"duplicate camera name(s) {', '.join(repr(n) for n in duplicates)}"
    return None
