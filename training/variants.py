"""Deprecated: ``training.variants`` is now ``training.single_seg`` (LISA-style single-[SEG]
samples); this module hands its names on for one release and then goes."""

import warnings

from training.single_seg import SINGLE_SEG_ANSWER, to_single_seg  # noqa: F401

warnings.warn("training.variants is deprecated: import from training.single_seg", DeprecationWarning, stacklevel=2)
