"""Fixtures the bag-tool tests share."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    """A small held-out synthetic set: a few test images with several questions each."""
    from m2sa_core.data.synthetic import generate_dataset

    root = tmp_path_factory.mktemp("synth")
    generate_dataset(root, 20, seed=3, size=128)
    return root
