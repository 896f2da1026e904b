"""fuzz/targets.py: the targeting scores (against hand-counted programs)
and that targeting is on in the nightly profile only."""
import numpy as np
import pytest
from hypothesis import settings

import spec
from spec import ops
from fuzz import targets


def test_nesting_depth_counts_nested_sub_programs():
    flat = spec.trace(lambda x: ops.sin(x), spec.f32[3])
    inner = lambda x: ops.checkpoint(lambda y: ops.sin(y))(x)
    nested = spec.trace(lambda x: ops.checkpoint(lambda y: inner(y))(x), spec.f32[3])
    assert targets.nesting_depth(flat) == 0
    assert targets.nesting_depth(nested) == 2


def test_residual_count_is_the_spec_backward_pass_count():
    # sin(x) * x: the backward reads cos(x), sin(x) and x
    prog = spec.trace(lambda x: ops.mul(ops.sin(x), x), spec.f32[3])
    assert targets.residual_count(prog) == len(spec.saved_residuals(prog)) > 0
    assert targets.residual_count(spec.trace(lambda x: ops.neg(x), spec.f32[3])) == 0


def test_targeting_only_in_nightly():
    before = settings._current_profile
    try:
        import fuzz.profiles  # noqa: F401  (registers ci, dev, nightly; loads one: restored below)
        settings.load_profile("ci")
        assert not targets.targeting()
        assert targets.aim(spec.trace(lambda x: ops.sin(x), spec.f32[3]), [np.ones(3, np.float32)]) == {}
        settings.load_profile("nightly")
        assert targets.targeting()
    finally:
        settings.load_profile(before)


def test_remat_residual_difference_of_a_remat3_divergence():
    """Under remat3 a checkpoint whose unused output needs its input saves
    it (a known divergence): one residual more than remat2."""
    pytest.importorskip("jax")
    prog = spec.trace(lambda a, b: ops.checkpoint(lambda r: (ops.sin(r), r))(ops.mul(a, b))[1],
                      spec.f32[3], spec.f32[3])
    x = np.full(3, 0.7, np.float32)
    assert targets.remat_residual_difference(prog, [x, x]) == 1
