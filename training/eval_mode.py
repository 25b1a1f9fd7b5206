"""The model in eval mode for one evaluation, whoever runs it (the in-loop stage evals,
the promptable evaluator)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def eval_mode(model) -> Iterator[None]:
    """The model in eval mode for the block and back in the mode it had after it, even when
    the eval fails: the training loop goes on with dropout and the rest as they were."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
