"""The gamma family of spec/prims_special.py: lgamma, digamma, polygamma.

Their Examples are checked by tests/test_primitive_examples.py (values
against sympy's arbitrary-precision polygamma and math.lgamma, JVPs against
float64 finite differences and sympy.diff, vmap, JAX). Here:
(a) the spec's values agree with mpmath (an independent high-precision
    source) away from the poles, to float64 rounding;
(b) with JAX: the JVP programs bind the equations of JAX's jvp jaxprs (the
    rule shape decides what a checkpoint can save), values at the special
    inputs (poles, infinities, NaN) are JAX's, and a gradient with respect
    to polygamma's order raises as JAX's does.
"""
from __future__ import annotations

import mpmath
import numpy as np
import pytest

import spec
from spec import prims_special as S

f32, f64 = spec.f32, spec.f64
POINTS = np.array([-2.5, -1.3, -0.3, 1e-3, 0.5, 1.0, 3.7, 12.0, 55.5])
SPECIAL = np.array([-3.0, -1.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 2.5], np.float32)


@pytest.mark.parametrize("m", [0, 1, 2, 3, 5])
def test_polygamma_matches_mpmath(m):
    (got,) = spec.evaluate(spec.trace(lambda x: S.polygamma(np.float64(m), x), f64[POINTS.size]), POINTS)
    want = np.array([float(mpmath.polygamma(m, x)) for x in POINTS])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_lgamma_and_digamma_match_mpmath():
    (lg,) = spec.evaluate(spec.trace(S.lgamma, f64[POINTS.size]), POINTS)
    (dg,) = spec.evaluate(spec.trace(S.digamma, f64[POINTS.size]), POINTS)
    np.testing.assert_allclose(lg, [float(mpmath.log(abs(mpmath.gamma(x)))) for x in POINTS], rtol=1e-12,
                               atol=1e-15)
    np.testing.assert_allclose(dg, [float(mpmath.digamma(x)) for x in POINTS], rtol=1e-12)


def _jax():
    return pytest.importorskip("jax")


FNS = {"lgamma": (S.lgamma, "lax.lgamma"), "digamma": (S.digamma, "lax.digamma"),
       "trigamma": (lambda x: S.polygamma(np.float32(1), x), "lambda x: lax.polygamma(np.float32(1), x)"),
       "tetragamma": (lambda x: S.polygamma(np.float32(2), x), "lambda x: lax.polygamma(np.float32(2), x)"),
       "non-integer-order": (lambda x: S.polygamma(np.float32(1.5), x),
                             "lambda x: lax.polygamma(np.float32(1.5), x)")}


@pytest.mark.parametrize("name", sorted(FNS))
def test_jvp_program_has_jaxs_equations(name):
    jax = _jax()
    from jax import lax
    fn, src = FNS[name]
    jfn = eval(src, {"lax": lax, "np": np})
    x = np.float32([0.7, 1.9])
    jaxpr = jax.make_jaxpr(lambda x, t: jax.jvp(jfn, (x,), (t,)))(x, x).jaxpr
    got = [e.primitive.name for e in spec.jvp(spec.trace(fn, f32[2])).eqns]
    assert got == [e.primitive.name for e in jaxpr.eqns]


@pytest.mark.parametrize("name", sorted(FNS))
def test_values_at_special_inputs_are_jaxs(name):
    """Poles (+inf for lgamma and odd orders, nan for digamma and even
    orders), infinities and NaN as XLA computes them."""
    jax = _jax()
    from jax import lax
    fn, src = FNS[name]
    (got,) = spec.evaluate(spec.trace(fn, f32[SPECIAL.size]), SPECIAL)
    want = np.asarray(jax.jit(eval(src, {"lax": lax, "np": np}))(SPECIAL))
    # XLA's f32 kernels are approximations: lgamma(1) is 4.8e-7 there
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_polygamma_order_has_no_derivative_in_either():
    jax = _jax()
    from jax import lax
    prog = spec.trace(S.polygamma, f32[2], f32[2])
    with pytest.raises(ValueError, match="polygamma gradient with respect to m is not supported"):
        spec.jvp(prog)
    with pytest.raises(ValueError, match="polygamma gradient with respect to m is not supported"):
        jax.jvp(lax.polygamma, (np.float32([1, 2]), np.float32([1, 2])), (np.float32([1, 1]),) * 2)
