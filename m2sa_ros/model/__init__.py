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
The model inside the node: which one loads, and the memory its runs leave behind.

``model_source``: an explicit path, a preset or the shipped checkpoint, and loading it
with the node's parameters; ``memory``: the heap handed back to the OS between commands,
CUDA's cache after a failure. The model itself is m2sa_core's. Import the module you need;
this package face hands nothing on.
"""
