"""The fuzzer's derandomised draws do not depend on the local modules the
process imported (fuzz/constants_pool.py): a process that imported the
modules tests/ imports (benchmarks.mutation, the campaign CLI, the corpus)
draws the same programs as one that did not, where with Hypothesis' own
pool of local constants they differ. Each draw runs in a fresh
interpreter."""
import hashlib
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# the local modules importing tests/ adds (fuzz/test_branches.py drew other
# programs under `pytest tests fuzz` than under `pytest fuzz/`)
IMPORTED_BY_TESTS = tuple(f"benchmarks.mutation.{m}" for m in (
    "mutants", "overlay", "validate", "witness_lib", "witnesses", "witnesses_control", "witnesses_rules")) + tuple(
    f"fuzz.{m}" for m in ("cli", "cluster", "corpus", "focus", "novelty", "reduce", "spellings", "stacks", "targets",
                          "watchdog")) + ("oracle.stacks",)

_DRAW = """
import hashlib, importlib, sys
from hypothesis import HealthCheck, given, settings
from hypothesis.internal.conjecture import providers
from fuzz import constants_pool
from fuzz.strategies import programs
if sys.argv[1] == "unpinned":
    providers._get_local_constants = constants_pool.hypothesis_local_constants
for name in sys.argv[2:]:
    importlib.import_module(name)
out = []
@settings(max_examples=300, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(partial_ad=True))
def draw(prog):
    out.append(str(prog))
draw()
print(hashlib.sha1("".join(out).encode()).hexdigest())
"""


def _drawn(pool: str, *imports: str) -> str:
    """A digest of 300 derandomised draws in a fresh interpreter."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", _DRAW, pool, *imports], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()[-1]


def test_draws_do_not_depend_on_the_local_modules_imported():
    assert _drawn("pinned") == _drawn("pinned", *IMPORTED_BY_TESTS)


def test_hypothesis_own_pool_would_make_them_depend():
    """The control: with Hypothesis' own pool the draws change with the
    modules imported (so the test above could fail)."""
    assert _drawn("unpinned") != _drawn("unpinned", *IMPORTED_BY_TESTS)
