"""Deprecated path: this module moved to :mod:`m2sa_ros.latest_frame`; the old name goes in the next release."""

import sys
import warnings

from m2sa_ros import latest_frame

warnings.warn("m2sa_ros.frames moved to m2sa_ros.latest_frame; import it from there (the old path goes in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = latest_frame
