# Copyright 2026 m2sa_ros maintainers
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""
training.file_hash gives the digest hashlib gives, for every size around its chunk.

The helper replaces ``hashlib.file_digest`` (Python 3.11+) so that training/ runs on
Python 3.10; checkpoint manifests written before the change must still verify, so the
hex digests have to be identical byte for byte. Sizes straddle the chunk length because
a short or repeated last chunk is where a chunked reader goes wrong.
"""

from __future__ import annotations

import hashlib
import os

import pytest
from training.file_hash import CHUNK_BYTES, file_hexdigest

SIZES = [0, 1, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, 2 * CHUNK_BYTES + CHUNK_BYTES // 2]


@pytest.mark.parametrize("algorithm", ["sha1", "sha256", "blake2b"])
@pytest.mark.parametrize("size", SIZES)
def test_digest_equals_hashlibs(tmp_path, algorithm, size):
    data = os.urandom(size)
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    got = file_hexdigest(path, algorithm)
    assert got == hashlib.new(algorithm, data).hexdigest()
    if hasattr(hashlib, "file_digest"):  # the function it replaces, where it exists (3.11+)
        with path.open("rb") as f:
            assert got == hashlib.file_digest(f, algorithm).hexdigest()


def test_training_modules_hash_through_it(tmp_path):
    """The checkpoint manifest (SHA-256) and the overlap check (SHA-1) use the helper."""
    from training import checkpoints, overlap

    path = tmp_path / "image.png"
    data = os.urandom(CHUNK_BYTES + 17)
    path.write_bytes(data)
    assert checkpoints._sha256(path) == hashlib.sha256(data).hexdigest()
    assert overlap._sha1(path) == hashlib.sha1(data).hexdigest()


def test_unknown_algorithm_is_refused(tmp_path):
    path = tmp_path / "x"
    path.write_bytes(b"x")
    with pytest.raises(ValueError):
        file_hexdigest(path, "no-such-hash")
