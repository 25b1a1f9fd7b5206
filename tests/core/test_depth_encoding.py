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

"""Depth written as REP 118's 16UC1 millimetres (m2sa_core/geometry/depth_encoding.py)."""

from __future__ import annotations

from m2sa_core.geometry.depth_encoding import to_16uc1
import numpy as np


def test_16uc1_millimetres():
    depth = np.array([[0.0, np.nan, 1.2344], [np.inf, 70.0, 0.0004]], np.float32)
    mm = to_16uc1(depth)
    assert mm.dtype == np.uint16
    assert mm.tolist() == [[0, 0, 1234], [0, 0, 0]]  # under half a millimetre rounds to 0: no depth
