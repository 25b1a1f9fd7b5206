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

"""Fast DDS's own log lines are left out of a process's output, and nothing else is."""

from middleware_log import is_middleware_line, without_middleware_lines

# As a CI machine's node printed it, colour codes and all.
SHM_LINE = ("\x1b[37;1m2026-12-02 08:24:15.365 \x1b[31;1m[\x1b[37;1mRTPS_TRANSPORT_SHM\x1b[31;1m Error] "
            "\x1b[37mFailed init_port fastdds_port7004: open_and_lock_file failed\x1b[34;1m -> Function "
            "\x1b[36mopen_port_internal\x1b[m\n")


def test_the_shared_memory_port_line_is_the_middlewares():
    assert is_middleware_line(SHM_LINE)
    assert is_middleware_line("2026-12-02 08:24:15.365 [RTPS_TRANSPORT_SHM Error] Failed init_port x\n")


def test_the_process_lines_stay_as_they_were():
    node = ("[INFO] [1796199855.583274769] [perception_node]: model loaded on cpu in 0.1 s\n"
            "[WARN] [1796199855.6] [perception_node]: 2026-12-02 08:24:15.365 [RTPS Error] quoted in a message\n"
            "3-D values are in fuzz_camera, not base_link\n")
    assert without_middleware_lines(SHM_LINE + node + SHM_LINE) == node
