"""Deprecated path: this module moved to :mod:`m2sa_core.evaluation.metrics`; the old name goes in the next release."""

import sys
import warnings

from m2sa_core.evaluation import metrics

warnings.warn("m2sa_core.metrics moved to m2sa_core.evaluation.metrics; import it from there (the old path goes in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = metrics
