"""Deprecated path: this module moved to :mod:`m2sa_core.evaluation.target_breakdown`; the old name goes in the next release."""

import sys
import warnings

from m2sa_core.evaluation import target_breakdown

warnings.warn("m2sa_core.target_breakdown moved to m2sa_core.evaluation.target_breakdown; import it from there (the old path goes in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = target_breakdown
