"""Deprecated path: this module moved to :mod:`m2sa_core.inference.tracking`; the old name goes in the next release."""

import sys
import warnings

from m2sa_core.inference import tracking

warnings.warn("m2sa_core.tracking moved to m2sa_core.inference.tracking; import it from there (the old path goes in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = tracking
