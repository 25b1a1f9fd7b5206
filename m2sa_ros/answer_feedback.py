"""The ``segment`` action's feedback: the stage and the answer so far, once per change.

The model reports two things as a command runs: its stage ("encoding", "generating",
"decoding"; "waiting_for_image" before it) and, token by token, the answer decoded so
far. Sent as they come, a planner saw the same partial answer two or three times (a
token that decodes to nothing visible, such as a ``[SEG]`` marker the answer text drops)
and a last stage with an empty answer (a stage change carried no text). This keeps the
answer so far across stages and sends only what changed. Plain Python, no ROS: the node
gives it a function that publishes one feedback message.
"""

from __future__ import annotations

import threading
from typing import Callable


class AnswerFeedback:
    """Feedback for one goal: ``update(stage, partial)`` publishes when either changed.

    ``partial`` "" means no text yet, or none with this update (a stage change). A
    partial answer that is a prefix of the one already sent (the decoder taking back a
    character it showed) keeps the longer one, so the answer in the feedback never gets
    shorter; one that rewrites it replaces it.
    """

    def __init__(self, send: Callable[[str, str], None]) -> None:
        self._send = send
        self._stage: str | None = None
        self._answer = ""
        self._lock = threading.Lock()  # the worker and a batch's stage callback may both call

    def update(self, stage: str, partial: str = "") -> None:
        with self._lock:
            answer = self._answer
            if partial and not answer.startswith(partial):
                answer = partial
            if stage == self._stage and answer == self._answer:
                return
            self._stage, self._answer = stage, answer
            self._send(stage, answer)

    @property
    def answer(self) -> str:
        """The answer so far, as last sent."""
        return self._answer
