"""Spec self-consistency on drawn float64 programs (no JAX)."""
import re

import numpy as np
from hypothesis import given, reject

import spec
from fuzz import properties
from fuzz.strategies import policies, programs

F64 = programs(dtype=np.float64)


@given(programs(dtype=np.float64, stop_gradient=False))   # finite differences see through stop_gradient
def test_jvp_matches_finite_differences(prog):
    properties.jvp_matches_finite_differences(prog)


def _unless_jax_refuses_too(run):
    """run(), rejecting the example where it raises what JAX raises for the
    same program: pad transposed with respect to its padding value alone
    (its operand's tangent an instantiated zero: JAX's _pad_transpose takes
    `total(t_operand)` of None, jax/_src/lax/lax.py:7568; no reverse mode),
    a rule JAX registers none of (the spec raises JAX's NotImplementedError:
    igamma_grad_a's JVP in the reverse pass of igamma(a, x) in a, drawn on
    jax 0.6.2's venv), a save_from_both_policies JAX refuses alike
    (properties._pullback), a vmap that batching.vectorized_batcher asserts
    against (tie's operands batched along different axes: drawn on jax
    0.4.25's venv) or ragged_dot_general's refuses (AxesRefused)."""
    from spec.core import PrimitiveError
    from spec.policies import PolicyCombinationError
    from spec.batching import AxesRefused
    try:
        return run()
    except (PolicyCombinationError, AxesRefused):
        pass
    except PrimitiveError as e:
        if "padding value alone" not in str(e):
            raise
    except NotImplementedError as e:
        # JAX's message for a primitive it registers no JVP rule for, or
        # ragged_dot_general's transpose of a mode JAX does not transpose;
        # any other NotImplementedError is the spec's own and fails the test
        if not re.fullmatch(r"Differentiation rule for '[\w-]+' not implemented"
                            r"|Unimplemented grad_[xy]_dims for ragged dot general in mode \w+\.", str(e)):
            raise
    reject()


@given(F64)
def test_vjp_is_transpose_of_jvp(prog):
    _unless_jax_refuses_too(lambda: properties.vjp_is_transpose_of_jvp(prog))


@given(F64)
def test_vjp_of_the_vjp_program_is_transpose_of_its_jvp(prog):
    """The same identity one level up, on the reverse pass as a program:
    its linearization holds what a first-order one rarely does (scans whose
    carries start at instantiated zero tangents beside linear ones,
    accumulators, transposed bodies transposed again)."""
    _unless_jax_refuses_too(lambda: properties.vjp_is_transpose_of_jvp(spec.vjp_program(prog)))


@given(F64)
def test_vmap_matches_loop(prog):
    _unless_jax_refuses_too(lambda: properties.vmap_matches_loop(prog))


@given(F64, policies())
def test_remat_is_invariant(prog, policy):
    properties.remat_is_invariant(prog, policy)


def test_a_vmap_jax_asserts_against_is_checked_at_axes_it_takes():
    """tie's operands batched along different axes: JAX's vectorized_batcher
    asserts, and so does the spec (drawn on jax 0.4.25's venv, where tie is
    drawn); the property then checks every operand batched at axis 0,
    which JAX's rules take (ragged_dot_general's take nothing else)."""
    import pytest

    from spec.batching import AxesRefused
    from spec.prims_custom import tie
    prog = spec.trace(lambda a, b, c, d: tie(c * c, d), spec.f64[()], spec.f64[()], spec.f64[3], spec.f64[3])
    with pytest.raises(AxesRefused):
        spec.vmap(prog, [0, 0, 1, 0], 0, axis_size=2)
    properties.vmap_matches_loop(prog, seed=0)


def test_vmap_matches_loop_within_the_rounding_of_an_ill_conditioned_program():
    """sin(dot(c, c) ** 8): the argument, ~1e7, moves by ~1e-9 when the dot
    sums in another order (a batched dot against a looped one), so vmap
    and the loop may differ by more than 1e-12 (found on jax 0.6.2's venv
    by test_vmap_matches_loop); the property allows SAFETY times the
    rounding noise, which bounds the change numpy's two summation orders
    make, and still fails a batched value off by 1e-3."""
    import pytest
    from oracle.tolerances import SAFETY
    from spec.prims_elementwise import integer_pow, sin
    from spec.prims_structural import dot_general

    def f(c):
        return (sin(integer_pow(dot_general(c, c, (((0, 1), (0, 1)), ((), ()))), 8)),)
    prog = spec.trace(f, spec.f64[2, 3])
    moved = 0
    for seed in range(10):
        properties.vmap_matches_loop(prog, seed=seed)
        c = np.random.default_rng(seed).uniform(0.8, 1.6, (2, 3)) * [[1, -1, 1], [-1, 1, 1]]
        # two summation orders, computed by numpy alone
        by_dot, by_sum = float(np.tensordot(c, c, 2)), float(np.sum(c[::-1] * c[::-1]))
        change = abs(np.sin(by_dot ** 8) - np.sin(by_sum ** 8))
        moved += change > 1e-12
        assert change <= SAFETY * properties.rounding_noise(prog, [c], 0, seed), (seed, change)
    assert moved, "no seed's summation order changed the value: the example tests nothing"
    want = spec.evaluate(prog, np.ones((2, 3)))[0]
    with pytest.raises(properties.PropertyFailure):
        properties._close_within_rounding(want + 1e-3, want, 1e-12,
                                          properties.rounding_noise(prog, [np.ones((2, 3))], 0, 0), "off")
