"""Deprecated path: this module moved to :mod:`m2sa_core.inference.stages`; the old name goes in the next release."""

import sys
import warnings

from m2sa_core.inference import stages

warnings.warn("m2sa_core.segmenter_stages moved to m2sa_core.inference.stages; import it from there (the old path goes in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = stages
