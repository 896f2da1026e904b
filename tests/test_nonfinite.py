"""Non-finite values in the oracle's numeric comparison
(oracle.tolerances.compare) and in the second-order property.

Expected verdicts come from IEEE arithmetic written out by hand (numpy
arrays built for each case), never from the code under test."""
import numpy as np
import pytest

import spec
from oracle import tolerances

INF, NAN = np.inf, np.nan


def compare(got, spec_value, reference, noise=0.0):
    """compare() on float32 values against a float64 reference: (ok, worst index)."""
    ok, _, _, idx, tol = tolerances.compare(np.array(got, np.float32), np.array(spec_value, np.float32),
                                            np.array(reference, np.float64), np.dtype(np.float32), 3, 1.0,
                                            noise)
    return ok, idx, tol


def test_the_same_non_finite_values_agree():
    ok, _, tol = compare([1.0, INF, NAN, -INF], [1.0, INF, NAN, -INF], [1.0, INF, NAN, -INF])
    assert ok and np.isfinite(tol)


@pytest.mark.parametrize("jax_value", [-INF, NAN, 3.0e38, 0.0])
def test_a_different_value_where_the_spec_is_infinite_is_caught(jax_value):
    assert compare([1.0, jax_value, 2.0], [1.0, INF, 2.0], [1.0, INF, 2.0])[:2] == (False, (1,))


@pytest.mark.parametrize("jax_value", [INF, -INF, NAN])
def test_a_non_finite_value_where_the_spec_is_finite_is_caught(jax_value):
    assert compare([1.0, jax_value, 2.0], [1.0, 5.0, 2.0], [1.0, 5.0, 2.0])[:2] == (False, (1,))


def test_a_finite_value_where_the_spec_is_nan_is_caught():
    assert compare([1.0, 0.0], [1.0, NAN], [1.0, NAN])[:2] == (False, (1,))


def test_finite_values_beside_infinities_are_still_compared():
    # 2.5 vs 2: far outside float32 rounding, whatever the infinities beside it
    assert compare([1.0, INF, 2.5], [1.0, INF, 2.0], [1.0, INF, 2.0])[:2] == (False, (2,))
    assert compare([1.0, INF, 2.0], [1.0, INF, 2.0], [1.0, INF, 2.0])[0]


@pytest.mark.parametrize("noise", [INF, NAN])
def test_a_non_finite_noise_estimate_does_not_widen_the_tolerance(noise):
    ok, idx, tol = compare([1.0, 2.5], [1.0, 2.0], [1.0, 2.0], noise=noise)
    assert not ok and idx == (1,) and np.isfinite(tol)
    assert compare([1.0, 2.0], [1.0, 2.0], [1.0, 2.0], noise=noise)[0]


# --------------------------------------------------------------------------
# the second-order property with an infinite input

def _mul_vjp():
    t = spec.ArrayType((3,), np.dtype(np.float32))
    return spec.vjp_program(spec.trace(lambda x, w: x * w, t, t))


X = np.array([1.0, INF, 2.0], np.float32)
W = np.array([0.5, 1.5, 3.0], np.float32)
CT = np.array([0.25, -1.25, 0.75], np.float32)
TX = np.array([1.5, 0.5, -2.0], np.float32)
TW = np.array([-0.5, 2.0, 1.0], np.float32)


def test_second_order_with_the_cotangents_held_constant_is_finite():
    """JAX's second order is jax.jvp of the pullback with the cotangents
    closed over: constants, whose tangents are symbolic zeros. For x * w the
    pullback is (ct * w, ct * x), its JVP (ct * tw, ct * tx): finite at
    x = inf. The spec's JVP of the vjp program with the cotangents held
    constant (no tangent inputs for them) is exactly that."""
    vp = _mul_vjp()
    held, _ = spec.jvp_program(vp, nonzeros=[True, True, False])
    out = spec.evaluate(held, X, W, CT, TX, TW)[len(vp.outputs):]
    np.testing.assert_array_equal(out[0], CT * TW)
    np.testing.assert_array_equal(out[1], CT * TX)


def test_second_order_with_zero_cotangent_tangents_makes_inf_times_zero():
    """The cause of the second-order false alarm at an infinite input: the
    checker's spec side perturbs the cotangents too, by explicit zeros, so
    the tangent of ct * x gains the term 0 * x = 0 * inf = nan, which JAX's
    jvp of the pullback (cotangents constant) never forms."""
    vp = _mul_vjp()
    out = spec.evaluate(spec.jvp(vp), X, W, CT, TX, TW, np.zeros_like(CT))[len(vp.outputs):]
    np.testing.assert_array_equal(out[0], CT * TW)
    assert np.isnan(out[1][1]) and np.array_equal(out[1][[0, 2]], (CT * TX)[[0, 2]])


jax = pytest.importorskip("jax")


def test_no_second_order_false_alarm_for_an_infinite_input():
    """The second-order property holds the cotangents constant, as JAX's
    jvp of the pullback does (no 0 * inf = nan terms)."""
    import jax.numpy as jnp
    import oracle
    oracle.check(lambda x, w: x * w + w, None, X, W, implementations=("remat2",),
                 properties=("values", "jvp", "vjp", "second_order"))


def test_a_planted_difference_at_an_infinite_output_is_caught():
    """A planted JAX bug that changes only a non-finite value (exp's JVP
    with the sign of its infinite tangents flipped) is a Mismatch."""
    import jax.numpy as jnp
    from jax import lax
    from jax._src.interpreters import ad

    import oracle
    good = ad.primitive_jvps[lax.exp_p]

    def planted(primals, tangents, **params):
        ans = lax.exp_p.bind(primals[0], **params)
        t = tangents[0] * ans
        return ans, jnp.where(jnp.isinf(t), -t, t)
    ad.primitive_jvps[lax.exp_p] = planted
    jax.clear_caches()
    try:
        x = np.array([0.5, INF, 1.0], np.float32)
        with pytest.raises(oracle.Mismatch, match="jvp differs"):
            oracle.check(lambda x: jnp.exp(x), None, x, implementations=("remat2",), properties=("jvp",))
    finally:
        ad.primitive_jvps[lax.exp_p] = good
        jax.clear_caches()
    oracle.check(lambda x: jnp.exp(x), None, x, implementations=("remat2",), properties=("jvp",))
