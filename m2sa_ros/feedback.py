"""Deprecated path: this module moved to :mod:`m2sa_ros.answer_feedback`; the old name goes in the next release."""

import sys
import warnings

from m2sa_ros import answer_feedback

warnings.warn("m2sa_ros.feedback moved to m2sa_ros.answer_feedback; import it from there (the old path goes in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = answer_feedback
