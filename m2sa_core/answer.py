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

"""Deprecated path: this module moved to :mod:`m2sa_core.inference.answer`; the old name goes in the next release."""

import sys
import warnings

from m2sa_core.inference import answer

warnings.warn("m2sa_core.answer moved to m2sa_core.inference.answer; import it from there "
              "(the old path goes in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = answer
