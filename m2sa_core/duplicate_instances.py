"""Deprecated path: this module moved to :mod:`m2sa_core.inference.duplicates`; the old name goes in the next release."""

import sys
import warnings

from m2sa_core.inference import duplicates

warnings.warn("m2sa_core.duplicate_instances moved to m2sa_core.inference.duplicates; import it from there (the old path goes in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = duplicates
