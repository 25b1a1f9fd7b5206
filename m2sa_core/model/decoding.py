"""Deprecated path: this module moved to :mod:`m2sa_core.model.kv_decoders`; the old name goes in the next release."""

import sys
import warnings

from m2sa_core.model import kv_decoders

warnings.warn("m2sa_core.model.decoding moved to m2sa_core.model.kv_decoders; import it from there (the old path goes in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = kv_decoders
