"""Run any command with jax imported from one mutant's overlay (for
debugging a mutant, or replaying a fuzzer finding under it).

    python -m benchmarks.mutation.shell MUTANT -- CMD [ARGS...]
    python -m benchmarks.mutation.shell MUTANT --diff          # show the one-line change
"""
from __future__ import annotations

import os
import subprocess
import sys

from benchmarks.mutation import mutants as M
from benchmarks.mutation.overlay import Overlay, diff

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__)
        return 2
    m = None if argv[0] == "pristine" else M.by_name()[argv[0]]
    rest = argv[1:]
    if rest[:1] == ["--diff"]:
        print(diff(m) if m else "(pristine)")
        return 0
    if rest[:1] == ["--"]:
        rest = rest[1:]
    with Overlay(m) as ov:
        env = ov.env(extra_paths=[REPO])
        return subprocess.run(rest or [sys.executable], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
