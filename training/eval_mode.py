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

"""The model in eval mode for one evaluation, whoever runs it (the in-loop stage evals, the promptable evaluator)."""

from __future__ import annotations

from collections.abc import Iterator
import contextlib


@contextlib.contextmanager
def eval_mode(model) -> Iterator[None]:
    """
    Put the model in eval mode for the block and back in the mode it had after it, even when the eval fails.

    The training loop goes on with dropout and the rest as they were.
    """
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
