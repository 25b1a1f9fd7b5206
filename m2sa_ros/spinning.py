"""Deprecated path: this module moved to :mod:`m2sa_ros.executor_spin`; the old name goes in the next release."""

import sys
import warnings

from m2sa_ros import executor_spin

warnings.warn("m2sa_ros.spinning moved to m2sa_ros.executor_spin; import it from there (the old path goes in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = executor_spin
