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
Hex digest of a file's bytes, read in fixed-size chunks.

``hashlib.file_digest`` does the same but arrived in Python 3.11; the project stays
importable on Python 3.10, the interpreter of ROS 2 Humble (docs/ROS_INTERFACE.md,
checked by tests/tools/test_python_versions.py). Checkpoint manifests (SHA-256) and the
train/eval overlap check (SHA-1) hash files of up to several GB, so the file is never
read whole: one reusable buffer is filled with ``readinto`` and handed to the hash
through a memoryview, so no chunk is copied.
"""

from __future__ import annotations

import hashlib
import os

CHUNK_BYTES = 1 << 20


def file_hexdigest(path: str | os.PathLike[str], algorithm: str) -> str:
    """Hex digest of the file at ``path`` under ``algorithm`` (any name ``hashlib.new`` takes)."""
    digest = hashlib.new(algorithm)
    buffer = bytearray(CHUNK_BYTES)
    view = memoryview(buffer)
    with open(path, "rb") as f:
        while True:
            n = f.readinto(buffer)
            if not n:
                break
            digest.update(view[:n])
    return digest.hexdigest()
