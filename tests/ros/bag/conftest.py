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

"""Fixtures the bag-tool tests share."""

from __future__ import annotations

import pytest

# Every test here reads or writes bags with rosbags (in both locks, so CI never skips these).
pytest.importorskip("rosbags")


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    """Return a small held-out synthetic set: a few test images with several questions each."""
    from m2sa_core.data.synthetic import generate_dataset

    root = tmp_path_factory.mktemp("synth")
    generate_dataset(root, 20, seed=3, size=128)
    return root
