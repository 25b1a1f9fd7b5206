"""Kept for the node's imports until they move to :mod:`m2sa_core.prompt`; do not add to it.

The prompt vocabulary lives in :mod:`m2sa_core.prompt`. ``m2sa_ros.perception_node``
still imports ``sanitize_command`` from here; once it imports from ``m2sa_core.prompt``
this module is deleted.
"""

from m2sa_core.prompt import sanitize_command

__all__ = ["sanitize_command"]
