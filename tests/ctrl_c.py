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
Ctrl-C for the processes the tests start, whatever the shell that started pytest ignored.

A shell without job control starts a background command (``make test &`` in a script,
``nohup``, a CI step sent to the background) with SIGINT ignored, and the ignore passes on
through exec to every process started from it. ``ros2 launch`` installs no SIGINT handler
of its own (it reads the signal through the one Python installs at start-up, which Python
skips when SIGINT is ignored), so it then sleeps through the tests' Ctrl-C, as does any
plain Python child. A terminal never starts a program so. With Python's own handler in the
pytest process, its children start with SIGINT at the default again: exec resets a handled
signal, never an ignored one.
"""

from __future__ import annotations

import signal
import threading


def restore_ctrl_c() -> bool:
    """Handle SIGINT as Python does by default if it was inherited ignored; return whether it was."""
    if threading.current_thread() is not threading.main_thread():
        return False  # only the main thread may set a handler; pytest runs tests there
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        return False
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return True
