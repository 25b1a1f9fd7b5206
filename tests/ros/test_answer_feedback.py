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
The segment action's feedback stream (m2sa_ros/messages/answer_feedback.py), without ROS.

The stage and the answer so far, sent once per change, the answer never shorter than before.
"""

from __future__ import annotations

from m2sa_ros.messages.answer_feedback import AnswerFeedback


def _stream(calls: list[tuple[str, str]]) -> list[tuple[str, str]]:
    sent: list[tuple[str, str]] = []
    feedback = AnswerFeedback(lambda stage, partial: sent.append((stage, partial)))
    for stage, partial in calls:
        feedback.update(stage, partial)
    return sent


def test_what_a_command_reports_becomes_one_message_per_change():
    # As the node hears it: stages with no text, then the decoded answer after every
    # token; a [SEG] token decodes to nothing the answer text shows, so it repeats.
    sent = _stream([("waiting_for_image", ""), ("encoding", ""), ("generating", ""),
                    ("generating", "Press"), ("generating", "Press the"), ("generating", "Press the"),
                    ("generating", "Press the"), ("generating", "Press the button."), ("decoding", "")])
    assert sent == [("waiting_for_image", ""), ("encoding", ""), ("generating", ""),
                    ("generating", "Press"), ("generating", "Press the"), ("generating", "Press the button."),
                    ("decoding", "Press the button.")]
    assert all(a != b for a, b in zip(sent, sent[1:]))


def test_the_answer_never_gets_shorter_but_a_rewrite_replaces_it():
    sent = _stream([("generating", "It is the mug"), ("generating", "It is the"), ("generating", "It is the mug_1"),
                    ("generating", "Turn it on")])
    assert [p for _, p in sent] == ["It is the mug", "It is the mug_1", "Turn it on"]


def test_answer_property_is_the_last_one_sent():
    feedback = AnswerFeedback(lambda *_: None)
    feedback.update("generating", "It")
    feedback.update("decoding")
    assert feedback.answer == "It"
