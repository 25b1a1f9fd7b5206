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
Every command-line tool answers bad input with one line on stderr, never a traceback.

The tools are driven the way a user meets them: through their console entry points,
with a missing file, a malformed file, the wrong kind of directory, an unknown key, a
corrupted checkpoint or bag.
"""

from __future__ import annotations

import importlib
from pathlib import Path
import shutil
import subprocess
import sys
import tomllib

from m2sa_core.cli_errors import cli_entry, DEBUG_ENV, one_line
from m2sa_core.shipped_model import SHIPPED_MODEL
import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def entry_point(prog: str):
    module, _, attr = SCRIPTS[prog].partition(":")
    return getattr(importlib.import_module(module), attr)


def run_in_process(prog: str, argv: list[str], capsys) -> tuple[int, str]:
    try:
        status = entry_point(prog)(argv)
    except SystemExit as exc:  # argparse usage errors are one line too, by argparse's design
        status = exc.code
    return status, capsys.readouterr().err


def assert_one_line(prog: str, status: int, stderr: str, *names: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert status not in (0, None), stderr
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"{prog}: "), lines[0]
    for name in names:
        assert name in lines[0], (name, lines[0])


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    bad_yaml = tmp_path / "broken.yaml"
    bad_yaml.write_text("optim:\n  lr: [1, 2\n")
    unknown_key = tmp_path / "unknown_key.yaml"
    unknown_key.write_text("optim:\n  learning_rate_typo: 0.1\n")
    bad_json = tmp_path / "broken.json"
    bad_json.write_text('[{"file_name": "a.jpg", ')
    not_a_checkpoint = tmp_path / "not_a_checkpoint"
    not_a_checkpoint.mkdir()
    (not_a_checkpoint / "notes.txt").write_text("hello")
    corrupted = tmp_path / "corrupted_model"
    shutil.copytree(SHIPPED_MODEL, corrupted)
    weights = corrupted / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 3])
    bag = tmp_path / "broken_bag"
    bag.mkdir()
    (bag / "metadata.yaml").write_text("rosbag2_bagfile_information:\n  version: [5\n")
    return {"bad_yaml": bad_yaml, "unknown_key": unknown_key, "bad_json": bad_json,
            "missing": tmp_path / "missing.json", "not_a_checkpoint": not_a_checkpoint, "corrupted": corrupted,
            "bag": bag, "tmp": tmp_path}


CASES = {
    "train_bad_yaml": ("m2sa-train", lambda f: ["--config", str(f["bad_yaml"])], ["broken.yaml"]),
    "train_missing": ("m2sa-train", lambda f: ["--config", str(f["missing"])], ["missing.json"]),
    "train_unknown_key": ("m2sa-train", lambda f: ["--config", str(f["unknown_key"])],
                          ["unknown_key.yaml", "learning_rate_typo"]),
    "eval_not_a_checkpoint": ("m2sa-eval", lambda f: ["--model", str(f["not_a_checkpoint"]), "--data",
                                                      str(f["bad_json"]), "--out", str(f["tmp"] / "r.json")],
                              ["not_a_checkpoint"]),
    "eval_corrupted_checkpoint": ("m2sa-eval", lambda f: ["--model", str(f["corrupted"]), "--data", str(f["bad_json"]),
                                                          "--out", str(f["tmp"] / "r.json")], ["corrupted_model"]),
    "eval_bad_data": ("m2sa-eval", lambda f: ["--model", str(SHIPPED_MODEL), "--data", str(f["bad_json"]),
                                              "--out", str(f["tmp"] / "r.json")], ["broken.json"]),
    "export_not_a_checkpoint": ("m2sa-export", lambda f: ["--model", str(f["not_a_checkpoint"]), "--out",
                                                          str(f["tmp"] / "out")], ["not_a_checkpoint"]),
    "export_corrupted_checkpoint": ("m2sa-export", lambda f: ["--model", str(f["corrupted"]), "--out",
                                                              str(f["tmp"] / "out")], ["corrupted_model"]),
    "synth_unwritable": ("m2sa-synth", lambda f: ["--out", str(f["bad_json"] / "sub"), "--images", "2", "--quiet"],
                         ["broken.json"]),
    "data_missing": ("m2sa-data", lambda f: ["stats", str(f["missing"])], ["missing.json"]),
    "data_malformed": ("m2sa-data", lambda f: ["stats", str(f["bad_json"])], ["broken.json"]),
    "bag_info_broken_metadata": ("m2sa-bag", lambda f: ["info", str(f["bag"])], ["broken_bag"]),
    "bag_make_missing_data": ("m2sa-bag", lambda f: ["make", "--data", str(f["missing"]), "--out",
                                                     str(f["tmp"] / "bag_out")], ["missing.json"]),
    "bag_eval_broken_metadata": ("m2sa-bag-eval", lambda f: ["--bag", str(f["bag"]), "--out", str(f["tmp"] / "ev"),
                                                             "--quiet"], ["broken_bag"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_gives_one_line_naming_the_file(case, files, capsys, monkeypatch):
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    prog, argv, names = CASES[case]
    status, stderr = run_in_process(prog, argv(files), capsys)
    assert_one_line(prog, status, stderr, *names)


def test_every_console_script_is_wrapped():
    for prog in SCRIPTS:
        assert hasattr(entry_point(prog), "__wrapped__"), f"{prog} does not go through cli_entry"


def test_debug_flag_and_environment_show_the_traceback(files, capsys, monkeypatch):
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    argv = ["--model", str(files["not_a_checkpoint"]), "--out", str(files["tmp"] / "out")]
    with pytest.raises(Exception, match="not_a_checkpoint"):
        entry_point("m2sa-export")([*argv, "--debug"])
    monkeypatch.setenv(DEBUG_ENV, "1")
    with pytest.raises(Exception, match="not_a_checkpoint"):
        entry_point("m2sa-export")(argv)


def test_one_line_joins_multiline_messages_and_names_bare_errors():
    assert one_line(ValueError("expected ','\n  in \"x.yaml\", line 2\n    ^")) == \
        "expected ',' in \"x.yaml\", line 2 ^"
    assert one_line(KeyError("image_root")) == "missing key 'image_root'"
    assert one_line(RuntimeError()) == "RuntimeError"

    @cli_entry("tool")
    def main(argv=None):
        assert "--debug" not in argv
        return 3

    assert main(["--debug"]) == 3 and main([]) == 3


def _console(prog: str, *args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name(prog)
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={"PATH": str(exe.parent), "HOME": str(ROOT), "ROS_LOG_DIR": "/tmp"})


@pytest.mark.ros
@pytest.mark.parametrize("content", [None, "perception_node:\n  ros__parameters: [\n"])
def test_perception_node_bad_params_file_is_one_line(tmp_path, content):
    params = tmp_path / "params.yaml"
    if content is not None:
        params.write_text(content)
    proc = _console("m2sa-perception", "--ros-args", "--params-file", str(params))
    assert_one_line("m2sa-perception", proc.returncode, proc.stderr, "params.yaml")


def test_console_script_prints_one_line(files):
    proc = _console("m2sa-data", "stats", str(files["bad_json"]))
    assert_one_line("m2sa-data", proc.returncode, proc.stderr, "broken.json")
