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
Deprecated: ``m2sa_ros.bag.record`` was split by job; import from the new modules.

* ``m2sa_ros.bag.ground_truth``: the sidecars (``GroundTruth`` ..., ``BagError``);
* ``m2sa_ros.bag.bag_io``: the typestore, planning, writing and reading bags;
* ``m2sa_ros.bag.cli``: the ``m2sa-bag`` command.

This module hands their names on for one release and then goes.
"""

from __future__ import annotations

import sys
import warnings

from m2sa_ros.bag.bag_io import *  # noqa: F401,F403
from m2sa_ros.bag.cli import main  # noqa: F401
from m2sa_ros.bag.ground_truth import *  # noqa: F401,F403

warnings.warn("m2sa_ros.bag.record is deprecated: import from m2sa_ros.bag.ground_truth, m2sa_ros.bag.bag_io "
              "or m2sa_ros.bag.cli", DeprecationWarning, stacklevel=2)

if __name__ == "__main__":
    sys.exit(main())
