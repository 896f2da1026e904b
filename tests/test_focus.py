"""Shrinking checks only what failed (fuzz/focus.py): after the first
Mismatch of a run, a Focus checks just the (property, implementation)
pairs that differed, and passes programs none of them applies to."""
from __future__ import annotations

import pytest

pytest.importorskip("jax")   # only the import may skip

import spec  # noqa: E402
from spec import ops  # noqa: E402

import oracle  # noqa: E402
from fuzz.focus import Focus  # noqa: E402

import planted_bugs  # noqa: E402


def _cos_program():
    return spec.trace(lambda x: ops.cos(ops.neg(x)), spec.f32[3])


def _while_program():
    return spec.trace(lambda x: ops.while_loop(lambda c: ops.lt(c[0], 2),
                                               lambda c: (ops.add(c[0], 1), ops.sin(c[1])),
                                               (0, x))[1], spec.f32[3])


def test_after_a_mismatch_only_what_failed_is_checked():
    focus = Focus(("remat2", "remat3"))
    report = focus.check(_cos_program())                 # pristine: everything, both implementations
    assert {r.property for r in report.results} >= {"values", "jvp", "vjp", "vmap", "residuals"}
    assert {r.implementation for r in report.results} == {"remat2", "remat3"}
    with planted_bugs.BUGS["cos_jvp_sign_at_negative_inputs"]():
        with pytest.raises(oracle.Mismatch) as info:
            focus.check(_cos_program())
        assert ("jvp", "remat2") in info.value.failed
        assert focus.failed == info.value.failed
        with pytest.raises(oracle.Mismatch):             # still failing, now checked alone
            focus.check(_cos_program())
    report = focus.check(_cos_program())
    assert {(r.property, r.implementation) for r in report.results} <= set(focus.failed)
    assert {r.status for r in report.results} == {"ok"}


def test_a_program_none_of_the_failed_properties_applies_to_passes():
    focus = Focus(("remat2",))
    focus.failed = (("vjp", "remat2"),)
    assert focus.check(_while_program()) is None         # no reverse mode through a while loop


def _cos_of_double_program():
    return spec.trace(lambda x: ops.cos(ops.add(x, x)), spec.f32[3])


def test_past_the_shrink_budget_only_programs_seen_failing_are_checked():
    with planted_bugs.BUGS["cos_jvp_sign_at_negative_inputs"]():
        with pytest.raises(oracle.Mismatch):                 # it fails under the bug...
            Focus(("remat2",)).check(_cos_of_double_program())
        focus = Focus(("remat2",), shrink_seconds=0.0)
        with pytest.raises(oracle.Mismatch):
            focus.check(_cos_program())
        # ...but the budget is spent: a program not seen failing passes unchecked
        assert focus.check(_cos_of_double_program()) is None
        with pytest.raises(oracle.Mismatch):                 # Hypothesis' final replay
            focus.check(_cos_program())
    report = focus.check(_cos_program())     # seen failing: still checked (and pristine JAX agrees)
    assert report is not None and {r.status for r in report.results} == {"ok"}


def test_within_the_shrink_budget_every_program_is_checked():
    focus = Focus(("remat2",), shrink_seconds=3600.0)
    with planted_bugs.BUGS["cos_jvp_sign_at_negative_inputs"]():
        with pytest.raises(oracle.Mismatch):
            focus.check(_cos_program())
        with pytest.raises(oracle.Mismatch):
            focus.check(_cos_of_double_program())
