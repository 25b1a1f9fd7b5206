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

r"""
``m2sa-overlap``: refuse to train on an image that an evaluation scores.

A figure measured on images the model trained on says nothing about unseen ones, and the
leak is easy to miss when stages read different data sets: the synthetic world draws image
k from (seed, k) alone, so a larger world of the same seed holds a smaller one's val and
test images in its own training split. This reads each training config's ``data``
sources and compares their image files, byte for byte (SHA-1), with those of the
evaluation files named by ``--against`` and of the config's own ``eval_data``. File names
do not count: two worlds both have a ``000042.png``, and only when the bytes agree is it
the same image. A re-encoded or resized copy is not caught.

    m2sa-overlap --config training/tiny/1b_clip.yaml training/tiny/3_m2sa.yaml \
        --against data/synth/MMR_val.json data/heldout/MMR_test_mixed.json

Exit status 0 when no training image is an evaluation image, 1 when one is (one line per
config, with the first pair), 2 for a config or file that cannot be read.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
import sys
from typing import Iterable, Sequence

from m2sa_core.cli_errors import cli_entry
from m2sa_core.data.readers import read_dataset
from tqdm import tqdm
from training.config import DataSourceConfig, load_config
from training.file_hash import file_hexdigest
from training.sources import open_source


@dataclass(frozen=True)
class SharedImage:
    """A training image whose bytes are an evaluation image's."""

    train_path: Path
    eval_path: Path
    eval_file: str


class ImageDigests:
    """SHA-1 of image files, each file read once however many data sets list it."""

    def __init__(self, progress: bool = True) -> None:
        self._by_path: dict[Path, str] = {}
        self.progress = progress

    def of(self, paths: Iterable[Path], desc: str) -> dict[str, Path]:
        """Digest -> the first path with those bytes."""
        unique = sorted(set(paths))
        out: dict[str, Path] = {}
        for path in tqdm(unique, desc=desc, unit="img", disable=not self.progress or len(unique) < 500,
                         file=sys.stderr):
            digest = self._by_path.get(path)
            if digest is None:
                digest = self._by_path[path] = _sha1(path)
            out.setdefault(digest, path)
        return out


def _sha1(path: Path) -> str:
    return file_hexdigest(path, "sha1")


def source_images(source: DataSourceConfig) -> list[Path]:
    """Return the image files a configured data source would train on."""
    return [record.image_path for record in open_source(source).items]


def eval_file_images(path: str, image_root: str | None = None) -> list[Path]:
    """Return the image files of an evaluation file (MMR, synthetic, R2SM, AmodalReasonSeg, ReasonSeg)."""
    return [record.image_path for record in read_dataset(path, image_root)]


def shared_images(train: dict[str, Path], evaluation: dict[str, tuple[Path, str]]) -> list[SharedImage]:
    """Training digests that are evaluation digests, in training-path order."""
    pairs = [SharedImage(path, *evaluation[digest]) for digest, path in train.items() if digest in evaluation]
    return sorted(pairs, key=lambda pair: str(pair.train_path))


def check_configs(configs: Sequence[str], against: Sequence[str],
                  progress: bool = True) -> dict[str, list[SharedImage]]:
    """Per config, the training images that are evaluation images (``against`` and its own eval_data)."""
    digests = ImageDigests(progress)
    fixed: dict[str, tuple[Path, str]] = {}
    for path in against:
        for digest, image in digests.of(eval_file_images(path), f"hash {Path(path).name}").items():
            fixed.setdefault(digest, (image, path))
    found: dict[str, list[SharedImage]] = {}
    for config_path in configs:
        config = load_config(config_path)
        evaluation = dict(fixed)
        for source in config.eval_data:
            for digest, image in digests.of(source_images(source), f"hash {Path(source.path).name}").items():
                evaluation.setdefault(digest, (image, source.path))
        train_paths = [image for source in config.data for image in source_images(source)]
        found[config_path] = shared_images(digests.of(train_paths, f"hash {Path(config_path).name}"), evaluation)
    return found


def report_line(config: str, shared: list[SharedImage]) -> str:
    if not shared:
        return f"{config}: no training image is an evaluation image"
    first = shared[0]
    count = "1 training image is an evaluation image" if len(shared) == 1 else \
        f"{len(shared)} training images are evaluation images"
    return f"{config}: {count} (first: {first.train_path} is {first.eval_path} of {first.eval_file})"


@cli_entry("m2sa-overlap")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="m2sa-overlap", description=__doc__.strip().splitlines()[0])
    parser.add_argument("--config", nargs="+", required=True,
                        help="training config(s) (YAML), as m2sa-train reads them")
    parser.add_argument("--against", nargs="*", default=[],
                        help="evaluation files (MMR, R2SM, AmodalReasonSeg JSON or a ReasonSeg folder); "
                             "each config's own eval_data is always compared as well")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    found = check_configs(args.config, args.against, progress=not args.quiet)  # bad input: cli_entry, status 2
    for config, shared in found.items():
        print(report_line(config, shared), file=sys.stderr if shared else sys.stdout)
    return 1 if any(found.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
