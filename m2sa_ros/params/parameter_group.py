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
One concern's settings: the parameters it reads, under the parameter table's own names.

A concern of the node (the depth step, a camera's health) reads a handful of parameters.
Its settings are a frozen dataclass deriving :class:`ParameterGroup`, whose fields are
those parameters named as in node_params.py's ``PARAMETERS`` (a test holds every field of
every group to the table). The pipeline builds each group once at configure and again
when a runtime change touches one of its fields (:meth:`ParameterGroup.reads`), and hands
it whole to the concern, as Nav2 hands a ``Parameters`` struct: a new parameter of a
concern is a field of its group and its use, never a keyword carried through every
signature on the way and renamed at each hop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Any, ClassVar, TypeVar

Group = TypeVar("Group", bound="ParameterGroup")


class ParameterGroup:
    """
    Mixin of a frozen dataclass whose init fields are parameters of the table, by name.

    ``CONSTANTS`` names init fields that are not parameters (a fixed window a test may
    change); fields with ``init=False`` are built from the others in ``__post_init__``.
    """

    CONSTANTS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Return the parameters it holds, in its fields' order."""
        return tuple(f.name for f in fields(cls) if f.init and f.name not in cls.CONSTANTS)  # type: ignore[arg-type]

    @classmethod
    def from_params(cls: type[Group], params: Any) -> Group:
        """Return the group's settings of validated parameters (a node_params.NodeParams)."""
        return cls(**{name: getattr(params, name) for name in cls.names()})

    @classmethod
    def reads(cls, names: Iterable[str]) -> bool:
        """Tell whether a change of the parameters ``names`` changes this group (it must be built again)."""
        return not set(cls.names()).isdisjoint(names)
