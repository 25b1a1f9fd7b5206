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
Regenerate the golden fixtures in tests/core/golden/ from the authors' stack.

    python scripts/golden/make_fixtures.py --authors-git /path/to/MMR/.git

1. writes a small text corpus from the project's own texts (the tiny model's built-in
   corpus, the question/answer templates, README.md) for the tokenizer;
2. creates the side environment ``build/golden-env`` (Python 3.11) with the pins of
   scripts/golden/requirements.txt, unless it exists (``--fresh-env`` rebuilds it);
3. exports the authors' repository (jdg900/MMR, a clone given by ``--authors-git``, at
   ``--commit``) into ``build/golden/MMR`` with ``git archive``;
4. runs scripts/golden/reference.py in the side environment, which trains the small
   sentencepiece tokenizer, prepares it as the authors' scripts do and writes token ids,
   labels and preprocessed image tensors into ``tests/core/golden/``.

Nothing of the authors' code lands in the repository; only tests/core/golden/ changes. The
tests (tests/core/test_fidelity_*.py) read the committed fixtures and need none of this.
"""

from __future__ import annotations

import argparse
from pathlib import Path
import subprocess
import sys
import venv

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
AUTHORS_COMMIT = "702a7b60e993b0c8ce24f93f57ed5fc3f425b0fa"  # jdg900/MMR main as reviewed


def write_corpus(path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from m2sa_core.data.templates import all_template_texts
    from m2sa_core.model.tokenizer import builtin_corpus

    texts = builtin_corpus()[::7] + list(all_template_texts()) + (ROOT / "README.md").read_text().splitlines()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(t.replace("\n", " ") for t in texts if t.strip()) + "\n")


def ensure_env(env: Path, fresh: bool) -> Path:
    python = env / "bin" / "python"
    if fresh or not python.exists():
        print(f"[golden] creating {env} (pins: {HERE / 'requirements.txt'})")
        venv.EnvBuilder(with_pip=True, clear=True).create(env)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-r", str(HERE / "requirements.txt")],
                       check=True)
    return python


def export_authors(git_dir: Path, commit: str, dest: Path) -> None:
    if dest.exists():
        subprocess.run(["rm", "-rf", str(dest)], check=True)
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", f"--git-dir={git_dir}", "archive", commit], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--authors-git", required=True, type=Path, help="git directory of a jdg900/MMR clone")
    parser.add_argument("--commit", default=AUTHORS_COMMIT)
    parser.add_argument("--env", type=Path, default=ROOT / "build" / "golden-env")
    parser.add_argument("--fresh-env", action="store_true", help="recreate the side environment")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "core" / "golden")
    args = parser.parse_args(argv)
    work = ROOT / "build" / "golden"
    try:
        corpus = work / "corpus.txt"
        write_corpus(corpus)
        python = ensure_env(args.env, args.fresh_env)
        export_authors(args.authors_git, args.commit, work / "MMR")
        args.out.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(python), str(HERE / "reference.py"), "--authors", str(work / "MMR"),
                        "--corpus", str(corpus), "--work", str(work), "--out", str(args.out),
                        "--commit", args.commit], check=True, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    except (subprocess.CalledProcessError, OSError) as exc:
        print(f"make_fixtures: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
