"""Deprecated path: this module moved to :mod:`m2sa_core.inference.answer`; the old name goes in the next release."""

import sys
import warnings

from m2sa_core.inference import answer

warnings.warn("m2sa_core.answer moved to m2sa_core.inference.answer; import it from there (the old path goes in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = answer
