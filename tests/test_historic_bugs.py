"""docs/historic_bugs.md: every reproducer fails on the JAX releases its
bug was in and passes on the others (the installed one is one of them)."""
import pathlib
import re
import subprocess
import sys

import pytest

pytest.importorskip("jax")

from oracle.jax_api.versions import Releases, installed  # noqa: E402

PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "historic_bugs.md"
BLOCKS = re.findall(r"```python historic releases: >= ([\d.]+)(?:, < ([\d.]+))?(?:; >= ([\d.]+), < ([\d.]+))?\n(.*?)```",
                    PAGE.read_text(), re.S)


def test_the_page_lists_at_least_five_bugs():
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("first, fixed, again, fixed_again, code", BLOCKS,
                         ids=[f"bug{i + 1}" for i in range(len(BLOCKS))])
def test_reproducer_fails_exactly_on_the_releases_of_its_bug(first, fixed, again, fixed_again, code):
    # a second range: the bug came back (a regression) and went again
    buggy = installed() in Releases(first, fixed or None, Releases(again, fixed_again) if again else None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert (proc.returncode != 0) == buggy, f"jax {installed()}, bug in >= {first}, < {fixed} (and >= {again}, < {fixed_again}):\n{out}"
