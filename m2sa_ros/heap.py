"""Deprecated path: this module moved to :mod:`m2sa_ros.memory`; the old name goes in the next release."""

import sys
import warnings

from m2sa_ros import memory

warnings.warn("m2sa_ros.heap moved to m2sa_ros.memory; import it from there (the old path goes in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = memory
