"""Deprecated path: this module moved to :mod:`m2sa_core.model.generation`; the old name goes in the next release."""

import sys
import warnings

from m2sa_core.model import generation

warnings.warn("m2sa_core.model.greedy moved to m2sa_core.model.generation; import it from there (the old path goes in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = generation
