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
The CPU-share check m2sa-train runs before its first step.

A training started beside busy processes with more threads than free cores is told
how to avoid crawling.
"""

from __future__ import annotations

import torch
from training import cpu_share
from training.cpu_share import CpuShare, warn_if_oversubscribed


def test_two_threads_beside_a_busy_core_on_two_cores_is_oversubscribed():
    assert CpuShare(cores=2, busy_cores=1.0, threads=2).oversubscribed
    assert CpuShare(cores=2, busy_cores=2.0, threads=2).oversubscribed


def test_an_idle_machine_or_one_thread_is_not():
    assert not CpuShare(cores=2, busy_cores=0.1, threads=2).oversubscribed
    assert not CpuShare(cores=2, busy_cores=2.0, threads=1).oversubscribed  # one thread cannot spin against itself
    assert not CpuShare(cores=16, busy_cores=4.0, threads=8).oversubscribed


def test_the_advice_names_a_thread_count_that_fits_the_free_cores():
    advice = CpuShare(cores=8, busy_cores=5.8, threads=8).advice()
    assert "OMP_NUM_THREADS=2" in advice and "5.8 of 8 cores" in advice
    assert "OMP_NUM_THREADS=1" in CpuShare(cores=2, busy_cores=2.0, threads=2).advice()


def test_warns_on_cpu_only_when_oversubscribed(monkeypatch, capsys):
    busy = {"percent": 100.0}
    monkeypatch.setattr(cpu_share.psutil, "cpu_percent", lambda interval: busy["percent"])
    monkeypatch.setattr(cpu_share.psutil, "cpu_count", lambda: 2)
    monkeypatch.setattr(cpu_share.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(cpu_share.torch, "get_num_threads", lambda: 2)

    share = warn_if_oversubscribed(torch.device("cpu"))
    assert share == CpuShare(cores=2, busy_cores=2.0, threads=2)
    assert "[train] warning" in capsys.readouterr().out

    busy["percent"] = 3.0
    assert not warn_if_oversubscribed(torch.device("cpu")).oversubscribed
    assert capsys.readouterr().out == ""

    busy["percent"] = 100.0
    assert warn_if_oversubscribed(torch.device("meta")) is None  # a GPU run's threads only feed the device
    assert capsys.readouterr().out == ""

    monkeypatch.setattr(cpu_share.torch, "get_num_threads", lambda: 1)
    assert warn_if_oversubscribed(torch.device("cpu")) is None  # one thread: nothing to warn of, no sample taken
    assert capsys.readouterr().out == ""
