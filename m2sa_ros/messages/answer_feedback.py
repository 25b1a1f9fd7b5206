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
The ``segment`` action's feedback: the stage and the answer so far, once per change.

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
    """
    Feedback for one goal: ``update(stage, partial)`` publishes when either changed.

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
        """Return the answer so far, as last sent."""
        return self._answer
