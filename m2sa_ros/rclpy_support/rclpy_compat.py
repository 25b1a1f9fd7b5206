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
What the node needs from rclpy that ROS 2 Humble's rclpy (3.3) lacks, given there too.

Iron's rclpy added pre-set and post-set parameter callbacks
(``Node.add_pre_set_parameters_callback`` and ``Node.add_post_set_parameters_callback``);
the node uses both, and on Humble the missing methods would end its start-up with an
AttributeError. :func:`add_set_parameters_callbacks` registers them natively where rclpy
has them and otherwise gives the same order of calls around Humble's setters (see
:func:`emulate_pre_post_set_callbacks`). The rest of the rclpy API the node uses exists on
Humble under the same names (docs/ROS_INTERFACE.md, "ROS 2 Humble").
"""

from __future__ import annotations

from typing import Callable

from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter

PreSetCallback = Callable[[list[Parameter]], list[Parameter]]
OnSetCallback = Callable[[list[Parameter]], SetParametersResult]
PostSetCallback = Callable[[list[Parameter]], None]

# Iron and later (rclpy >= 4); added together, so one test covers both.
HAS_PRE_POST_SET_CALLBACKS = hasattr(Node, "add_post_set_parameters_callback") and hasattr(
    Node, "add_pre_set_parameters_callback")

EMPTY_AFTER_PRE_SET = "nothing left to set: the pre-set callback returned no parameter"


def add_set_parameters_callbacks(node: Node, *, pre: PreSetCallback | None = None,
                                 on_set: OnSetCallback | None = None,
                                 post: PostSetCallback | None = None) -> None:
    """
    Register the three parameter callbacks of a set, on any rclpy from Humble on.

    ``pre`` may rewrite the parameters being set (e.g. an integer given for a double),
    ``on_set`` accepts or refuses them, ``post`` sees them once they are stored. Declaring
    a parameter runs ``on_set`` (and, on Iron and later, ``post``) but never ``pre``.
    """
    if HAS_PRE_POST_SET_CALLBACKS:
        if pre is not None:
            node.add_pre_set_parameters_callback(pre)
        if on_set is not None:
            node.add_on_set_parameters_callback(on_set)
        if post is not None:
            node.add_post_set_parameters_callback(post)
        return
    if on_set is not None:
        node.add_on_set_parameters_callback(on_set)
    if pre is not None or post is not None:
        emulate_pre_post_set_callbacks(node, pre=pre, post=post)


def emulate_pre_post_set_callbacks(node: Node, *, pre: PreSetCallback | None = None,
                                   post: PostSetCallback | None = None) -> None:
    """
    Run ``pre`` and ``post`` around the node's setters, in the order Iron's rclpy does.

    For Humble, whose rclpy has neither callback. Every set reaches the node through
    ``set_parameters`` (rclpy's API) or ``set_parameters_atomically`` (also what the
    ``~/set_parameters`` and ``~/set_parameters_atomically`` services call), so these two
    are wrapped on this node instance: ``pre`` rewrites the list before rclpy checks
    anything (an empty result refuses the set with a reason saying so), the original
    setter applies the descriptors and the on-set callbacks and stores the values, and
    ``post`` gets the parameters only if that succeeded. ``set_parameters`` sets one
    parameter at a time, each with its own pre and post call, as rclpy does since Iron.
    Only the two public setters are touched, no private rclpy attribute.
    """
    set_atomically = node.set_parameters_atomically

    def set_parameters_atomically(parameter_list: list[Parameter]) -> SetParametersResult:
        if pre is not None:
            parameter_list = list(pre(list(parameter_list)))
            if not parameter_list:
                return SetParametersResult(successful=False, reason=EMPTY_AFTER_PRE_SET)
        result = set_atomically(parameter_list)
        if result.successful and post is not None:
            post(parameter_list)
        return result

    def set_parameters(parameter_list: list[Parameter]) -> list[SetParametersResult]:
        return [set_parameters_atomically([parameter]) for parameter in parameter_list]

    node.set_parameters_atomically = set_parameters_atomically  # type: ignore[method-assign]
    node.set_parameters = set_parameters  # type: ignore[method-assign]
