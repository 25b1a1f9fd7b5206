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
Compatibility shim for tools and users that still call ``setup.py``.

Every piece of metadata (name, version, packages, entry points, dependencies) lives in
``pyproject.toml``; setuptools reads it from there, so this file must stay empty of
metadata or the two would drift. The ROS build (``colcon build``) ignores this file: it
goes through ``package.xml`` and ``CMakeLists.txt``.
"""

from setuptools import setup

setup()
