"""Deprecated path: this module moved to :mod:`m2sa_core.data.image_list_json`; the old name goes in the next release."""

import sys
import warnings

from m2sa_core.data import image_list_json

warnings.warn("m2sa_core.data.layout moved to m2sa_core.data.image_list_json; import it from there (the old path goes in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = image_list_json
