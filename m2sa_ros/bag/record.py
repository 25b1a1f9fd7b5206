"""Deprecated: ``m2sa_ros.bag.record`` was split by job; import from the new modules.

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
