"""Deprecated path: this module moved to :mod:`m2sa_core.labels`; the old name goes in the next release."""

import sys
import warnings

from m2sa_core import labels

warnings.warn("m2sa_core.data.labels moved to m2sa_core.labels; import it from there (the old path goes in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = labels
