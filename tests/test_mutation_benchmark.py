"""The mutation benchmark's own machinery (benchmarks/mutation/), fast:

* every mutant's anchor occurs exactly once in the installed jax, and its
  replacement changes exactly one line; there are at least 40 mutants in at
  least 6 classes, each with a witness;
* the overlay works: `import jax` in a fresh interpreter resolves to the
  overlay's copy, the mutated file differs from site-packages in exactly one
  line, and site-packages is left untouched;
* a sample of witnesses pass on pristine jax and fail under their mutant.

The scoring runs themselves (minutes per mutant) are not run here: see
benchmarks/mutation/README.md.
"""
from __future__ import annotations

import hashlib
import os
import sys

import pytest

pytest.importorskip("jax")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.mutation import mutants as M  # noqa: E402
from benchmarks.mutation.overlay import Overlay, check_anchor, jax_package_dir, pristine_text  # noqa: E402
from benchmarks.mutation.validate import run_witness  # noqa: E402
from benchmarks.mutation.witness_lib import WITNESSES  # noqa: E402
import benchmarks.mutation.witnesses  # noqa: E402,F401  (registers every witness)

SAMPLE = ["r2_default_policy_saves_all", "ad_accum_overwrites", "p_tanh_jvp"]


def _digest(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def test_the_table():
    names = [m.name for m in M.MUTANTS]
    assert len(names) == len(set(names)) >= 40
    assert len({m.cls for m in M.MUTANTS}) >= 6
    assert {m.cls for m in M.MUTANTS} <= set(M.CLASSES)
    assert sorted(WITNESSES) == sorted(m.witness for m in M.MUTANTS)
    assert all(m.description for m in M.MUTANTS)


@pytest.mark.parametrize("m", M.MUTANTS, ids=lambda m: m.name)
def test_anchor_matches_exactly_once(m):
    assert check_anchor(m, pristine_text(m)) is None


def test_overlay_imports_jax_from_the_overlay():
    m = M.by_name()["p_tanh_jvp"]
    original = os.path.join(jax_package_dir(), m.file)
    before = _digest(original)
    with Overlay(m) as ov:
        where = ov.verify()
        assert where.startswith(ov.package) and not where.startswith(jax_package_dir())
        with open(original) as a, open(os.path.join(ov.package, m.file)) as b:
            old, new = a.read().splitlines(), b.read().splitlines()
        assert len(old) == len(new) and sum(x != y for x, y in zip(old, new)) == 1
    assert not os.path.exists(ov.root)
    assert _digest(original) == before


@pytest.mark.parametrize("name", SAMPLE)
def test_witness_fails_only_under_its_mutant(name):
    rc, out = run_witness(name)
    assert rc == 0, out
    with Overlay(M.by_name()[name]) as ov:
        rc, out = run_witness(name, env=ov.env())
    assert f"jax from {ov.package}" in out
    assert rc == 1, out
