"""Compatibility shim for tools and users that still call ``setup.py``.

Every piece of metadata (name, version, packages, entry points, dependencies) lives in
``pyproject.toml``; setuptools reads it from there, so this file must stay empty of
metadata or the two would drift. The ROS build (``colcon build``) ignores this file: it
goes through ``package.xml`` and ``CMakeLists.txt``.
"""

from setuptools import setup

setup()
