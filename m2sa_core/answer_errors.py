"""Deprecated path: this module moved to :mod:`m2sa_core.evaluation.answer_errors`; the old name goes in the next release."""

import sys
import warnings

from m2sa_core.evaluation import answer_errors

warnings.warn("m2sa_core.answer_errors moved to m2sa_core.evaluation.answer_errors; import it from there (the old path goes in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = answer_errors
