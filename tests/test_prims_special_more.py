"""The Bessel and incomplete gamma/beta blocks of spec/prims_special.py:
bessel_i0e, bessel_i1e, igamma, igammac, igamma_grad_a,
regularized_incomplete_beta.

Their Examples are checked by tests/test_primitive_examples.py (float32
values against mpmath, JVPs against finite differences of the reference,
vmap, JAX). Here:
(a) the float64 values agree with mpmath (30 digits) to 1e-10 relative,
    over wider ranges than the Examples draw (both algorithm branches);
(b) the JVP programs agree with float64 central differences of the spec's
    own evaluation, in every operand JAX differentiates;
(c) with JAX: the JVP programs bind the equations of JAX's jvp jaxprs (the
    rule shape decides what a checkpoint can save), the values at the
    special inputs (0, infinities, NaN, the domain's edges) are XLA's, the
    derivatives JAX lacks raise JAX's errors, and oracle.check agrees for
    jax.scipy.special's i0e, i1e, i0, i1, gammainc, gammaincc, betainc
    under the policies None and dots_saveable.
"""
from __future__ import annotations

import mpmath
import numpy as np
import oracle
import pytest

import spec
from spec import prims_special as S

f32, f64 = spec.f32, spec.f64
RTOL = 1e-10


def _eval(fn, *args):
    args = [np.asarray(a) for a in args]
    (out,) = spec.evaluate(spec.trace(fn, *[spec.ArrayType(a.shape, a.dtype) for a in args]), *args)
    return out


def _mp(f, *cols):
    with mpmath.workdps(30):
        return np.array([float(f(*[mpmath.mpf(float(v)) for v in vals])) for vals in zip(*cols)])


# --------------------------------------------------------------------------
# (a) values against mpmath

BESSEL_X = np.array([-45.0, -30.5, -29.5, -8.0, -1.0, -1e-3, 1e-9, 0.25, 2.0, 7.9, 8.1, 15.0, 30.0, 31.0,
                     120.0, 750.0])


@pytest.mark.parametrize("nu,fn", [(0, S.bessel_i0e), (1, S.bessel_i1e)], ids=["i0e", "i1e"])
def test_bessel_matches_mpmath(nu, fn):
    want = _mp(lambda x: mpmath.besseli(nu, x) * mpmath.exp(-abs(x)), BESSEL_X)
    np.testing.assert_allclose(_eval(fn, BESSEL_X), want, rtol=RTOL)


_rng = np.random.default_rng(7)
# a from 0.05 to 25, x from 0.01 to 40: the series (x < 1 or x <= a) and the continued fraction
GAMMA_A = np.concatenate([_rng.uniform(0.05, 25, 24), [0.5, 1.0, 3.0, 10.0, 10.0, 0.1]])
GAMMA_X = np.concatenate([_rng.uniform(0.01, 40, 24), [0.5, 1.0, 3.0, 9.99, 10.01, 2.0]])
IGAMMA = {
    "igamma": (S.igamma, lambda a, x: mpmath.gammainc(a, 0, x, regularized=True)),
    "igammac": (S.igammac, lambda a, x: mpmath.gammainc(a, x, mpmath.inf, regularized=True)),
    "igamma_grad_a": (S.igamma_grad_a,
                      lambda a, x: mpmath.diff(lambda s: mpmath.gammainc(s, 0, x, regularized=True), a)),
}


@pytest.mark.parametrize("name", sorted(IGAMMA))
def test_igamma_family_matches_mpmath(name):
    fn, ref = IGAMMA[name]
    got, want = _eval(fn, GAMMA_A, GAMMA_X), _mp(ref, GAMMA_A, GAMMA_X)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-300)


def test_betainc_matches_mpmath():
    rng = np.random.default_rng(8)
    a = np.concatenate([rng.uniform(0.1, 30, 30), [1.0, 0.5, 5.0]])
    b = np.concatenate([rng.uniform(0.1, 30, 30), [1.0, 0.5, 5.0]])
    x = np.concatenate([rng.uniform(0.0, 1.0, 30), [0.5, 0.999, 1e-4]])
    want = _mp(lambda a, b, x: mpmath.betainc(a, b, 0, x, regularized=True), a, b, x)
    np.testing.assert_allclose(_eval(S.betainc, a, b, x), want, rtol=RTOL, atol=1e-300)


# --------------------------------------------------------------------------
# (b) JVPs against float64 central differences of the spec's evaluation

H = 1e-6


def _fd_check(fn, args, nonzeros):
    prog = spec.trace(fn, *[spec.ArrayType(a.shape, a.dtype) for a in args])
    jp, _ = spec.jvp_program(prog, nonzeros)
    rng = np.random.default_rng(9)
    ts = [rng.normal(size=a.shape) if nz else np.zeros(a.shape) for a, nz in zip(args, nonzeros)]
    outs = spec.evaluate(jp, *args, *[t for t, nz in zip(ts, nonzeros) if nz])

    def at(s):
        return spec.evaluate(prog, *[a + s * H * t for a, t in zip(args, ts)])[0]
    fd = (at(1) - at(-1)) / (2 * H)
    np.testing.assert_allclose(outs[1], fd, rtol=1e-6, atol=1e-7 * max(1.0, np.max(np.abs(fd))))


@pytest.mark.parametrize("fn", [S.bessel_i0e, S.bessel_i1e], ids=["i0e", "i1e"])
def test_bessel_jvp_matches_finite_differences(fn):
    x = np.array([-35.0, -3.0, -0.4, 1e-3, 0.7, 5.0, 12.0, 40.0])
    _fd_check(fn, [x], [True])


def test_bessel_i1e_jvp_at_zero_is_one_half():
    (_, t) = spec.evaluate(spec.jvp(spec.trace(S.bessel_i1e, f64[3])), np.array([0.0, -0.0, 1e-17]), np.ones(3))
    np.testing.assert_array_equal(t, [0.5, 0.5, 0.5])


@pytest.mark.parametrize("nonzeros", [[True, True], [True, False], [False, True]], ids=["a-x", "a", "x"])
@pytest.mark.parametrize("fn", [S.igamma, S.igammac], ids=["igamma", "igammac"])
def test_igamma_jvp_matches_finite_differences(fn, nonzeros):
    a = np.array([0.6, 1.5, 3.0, 7.0, 2.2, 12.0])
    x = np.array([0.3, 2.5, 2.0, 9.0, 0.9, 10.5])
    _fd_check(fn, [a, x], nonzeros)


def test_betainc_jvp_in_x_matches_finite_differences():
    a = np.array([0.7, 2.5, 6.0, 1.0, 12.0])
    b = np.array([3.0, 1.5, 9.0, 1.0, 0.8])
    x = np.array([0.2, 0.5, 0.45, 0.9, 0.97])
    _fd_check(S.betainc, [a, b, x], [False, False, True])


# --------------------------------------------------------------------------
# (c) with JAX

def _jax():
    return pytest.importorskip("jax")


def _lax():
    _jax()
    from jax import lax
    return lax


UNARY = {"i0e": (S.bessel_i0e, "bessel_i0e"), "i1e": (S.bessel_i1e, "bessel_i1e")}
BINARY = {"igamma": S.igamma, "igammac": S.igammac}


@pytest.mark.parametrize("shape", [(2,), ()], ids=["array", "scalar"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_bessel_jvp_program_has_jaxs_equations(name, shape):
    jax, lax = _jax(), _lax()
    fn, lax_name = UNARY[name]
    x = np.full(shape, 0.7, np.float32)
    jaxpr = jax.make_jaxpr(lambda x, t: jax.jvp(getattr(lax, lax_name), (x,), (t,)))(x, x).jaxpr
    got = [e.primitive.name for e in spec.jvp(spec.trace(fn, spec.ArrayType(shape, np.float32))).eqns]
    assert got == [e.primitive.name for e in jaxpr.eqns]


@pytest.mark.parametrize("nonzeros", [(True, True), (True, False), (False, True)], ids=["a-x", "a", "x"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_igamma_jvp_program_has_jaxs_equations(name, nonzeros):
    jax, lax = _jax(), _lax()
    v = np.float32([0.7, 1.9])

    diff = [i for i, nz in enumerate(nonzeros) if nz]

    def jfn(a, x, *ts):
        def f(*d):
            return getattr(lax, name)(*[d[diff.index(i)] if i in diff else (a, x)[i] for i in range(2)])
        return jax.jvp(f, tuple((a, x)[i] for i in diff), ts)
    jaxpr = jax.make_jaxpr(jfn)(v, v, *[v] * sum(nonzeros)).jaxpr
    jp, _ = spec.jvp_program(spec.trace(BINARY[name], f32[2], f32[2]), list(nonzeros))
    assert [e.primitive.name for e in jp.eqns] == [e.primitive.name for e in jaxpr.eqns]


def test_betainc_jvp_program_has_jaxs_equations():
    jax, lax = _jax(), _lax()
    v = np.float32([0.3, 0.6])
    jaxpr = jax.make_jaxpr(lambda a, b, x, t: jax.jvp(lambda x: lax.betainc(a, b, x), (x,), (t,)))(v, v, v, v).jaxpr
    jp, _ = spec.jvp_program(spec.trace(S.betainc, f32[2], f32[2], f32[2]), [False, False, True])
    assert [e.primitive.name for e in jp.eqns] == [e.primitive.name for e in jaxpr.eqns]


def test_betainc_jvp_with_constant_a_b_has_jaxs_equations():
    """jax.scipy.special.betainc(2.5, 1.5, x): the constants become jax arrays,
    so JAX binds a + b and b - 1 (as the spec always does)."""
    jax = _jax()
    import jax.scipy.special as jss
    v = np.float32([0.3, 0.6])
    jaxpr = jax.make_jaxpr(lambda x, t: jax.jvp(lambda x: jss.betainc(2.5, 1.5, x), (x,), (t,)))(v, v).jaxpr
    prog = spec.trace(lambda x: S.betainc(np.float32(2.5), np.float32(1.5), x), f32[2])
    assert [e.primitive.name for e in spec.jvp(prog).eqns] == [e.primitive.name for e in jaxpr.eqns]


INF, NAN = np.inf, np.nan
# no subnormals: XLA:CPU flushes them to zero, the spec does not model that
BESSEL_SPECIAL = np.array([0.0, -0.0, 1e-8, -2.5, 0.5, 8.0, 30.0, 700.0, 800.0, INF, -INF, NAN])
GAMMA_SPECIAL = [0.0, 0.5, 1.0, 3.0, 40.0, INF, -1.0, -INF, NAN, 1e-30, 800.0]
BETA_SPECIAL = [0.0, 0.5, 1.0, 3.0, INF, -1.0, NAN, 1e-30]
BETA_X_SPECIAL = [0.0, 0.3, 1.0, 1.5, -0.5, NAN, 1e-30]


def _grid(*axes):
    return [g.ravel() for g in np.meshgrid(*[np.array(a) for a in axes], indexing="ij")]


SPECIAL_CASES = {
    "bessel_i0e": ((BESSEL_SPECIAL,), "bessel_i0e", S.bessel_i0e),
    "bessel_i1e": ((BESSEL_SPECIAL,), "bessel_i1e", S.bessel_i1e),
    "igamma": (_grid(GAMMA_SPECIAL, GAMMA_SPECIAL), "igamma", S.igamma),
    "igammac": (_grid(GAMMA_SPECIAL, GAMMA_SPECIAL), "igammac", S.igammac),
    "igamma_grad_a": (_grid(GAMMA_SPECIAL, GAMMA_SPECIAL), "igamma_grad_a", S.igamma_grad_a),
    "betainc": (_grid(BETA_SPECIAL, BETA_SPECIAL, BETA_X_SPECIAL), "betainc", S.betainc),
}


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("name", sorted(SPECIAL_CASES))
def test_values_at_special_inputs_are_xlas(name, dtype):
    """0, +-0, infinities, NaN, negative and out-of-domain operands, a = 0,
    x = 0, x = 1, underflow of x^a e^-x / Gamma(a): XLA's values, NaNs and
    signed zeros included (XLA's float32 kernels are approximations)."""
    jax, lax = _jax(), _lax()
    cols, lax_name, fn = SPECIAL_CASES[name]
    dt = np.float32 if dtype == "f32" else np.float64
    cols = [c.astype(dt) for c in cols]
    got = _eval(fn, *cols)
    with oracle.jax_api.enable_x64(dtype == "f64"):
        want = np.asarray(jax.jit(getattr(lax, lax_name))(*cols))
    assert want.dtype == dt
    if dtype == "f32" and name.startswith("igamma"):
        # not a special point: XLA's float32 exponent a log x - x - lgamma(a) loses 4e-4 to cancellation
        keep = ~((cols[0] == 800) & (cols[1] == 800))
        got, want = got[keep], want[keep]
    rtol, atol = (2e-5, 2e-6) if dtype == "f32" else (1e-12, 1e-14)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    zeros = (want == 0) & (got == 0)      # (1 - P rounds to XLA's f32 0 where the spec has -2e-15)
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))


def test_betainc_derivative_in_a_or_b_raises_jaxs_error():
    jax, lax = _jax(), _lax()
    v = np.float32([0.3, 0.6])
    for nonzeros in ([True, False, False], [False, True, False], [True, True, True]):
        with pytest.raises(ValueError) as spec_err:
            spec.jvp_program(spec.trace(S.betainc, f32[2], f32[2], f32[2]), nonzeros)
        diff = [i for i, nz in enumerate(nonzeros) if nz]

        def f(*d):
            return lax.betainc(*[d[diff.index(i)] if i in diff else v for i in range(3)])
        with pytest.raises(ValueError) as jax_err:
            jax.jvp(f, (v,) * len(diff), (v,) * len(diff))
        assert str(spec_err.value) == str(jax_err.value) == S.BETAINC_GRAD_AB_ERROR


def test_igamma_grad_a_has_no_derivative_in_either():
    """igamma's second derivative in a: JAX registers no JVP for igamma_grad_a."""
    jax, lax = _jax(), _lax()
    v = np.float32([1.5, 2.5])
    with pytest.raises(NotImplementedError) as spec_err:
        spec.jvp(spec.trace(S.igamma_grad_a, f32[2], f32[2]))
    with pytest.raises(NotImplementedError) as jax_err:
        jax.jvp(lax.igamma_grad_a, (v, v), (v, v))
    assert str(spec_err.value) == str(jax_err.value) == S.IGAMMA_GRAD_A_JVP_ERROR
    # the first derivative in a binds it, undifferentiated
    assert "igamma_grad_a" in [e.primitive.name for e in spec.jvp(spec.trace(S.igamma, f32[2], f32[2])).eqns]


X = np.float32([[-1.7, 0.4, 2.9], [5.5, -0.1, 1.2]])
A = np.float32([[0.8, 1.5, 3.0], [6.0, 0.6, 2.2]])
G = np.float32([[0.5, 2.0, 2.5], [4.0, 0.3, 3.1]])
U = np.float32([[0.2, 0.55, 0.9], [0.35, 0.7, 0.05]])


def _user_functions():
    import jax.numpy as jnp
    import jax.scipy.special as jss
    return {
        "i0e": (lambda x: jnp.sum(jss.i0e(jnp.sin(x)) * x), (X,)),
        "i1e": (lambda x: jnp.sum(jss.i1e(x * x - 1.0) * jnp.cos(x)), (X,)),
        "i0": (lambda x: jnp.sum(jss.i0(x) @ jnp.ones((3, 2))), (X,)),
        "i1": (lambda x: jnp.sum(jnp.tanh(jss.i1(x)) @ jnp.ones((3, 2))), (X,)),
        "gammainc": (lambda a, x: jnp.sum(jss.gammainc(a, jnp.exp(x)) @ jnp.ones((3, 2))), (A, G)),
        "gammaincc": (lambda a, x: jnp.sum(jss.gammaincc(a * a, x) * jnp.sin(a)), (A, G)),
        "betainc": (lambda x: jnp.sum(jss.betainc(2.5, 1.5, jnp.sin(x) ** 2) @ jnp.ones((3, 2))), (U,)),
    }


@pytest.mark.parametrize("policy", ["None", "dots_saveable"])
@pytest.mark.parametrize("name", ["i0e", "i1e", "i0", "i1", "gammainc", "gammaincc", "betainc"])
def test_oracle_agrees(name, policy):
    """oracle.check: residuals, values, JVP, VJP, ... agree (ok, or a known divergence)."""
    jax = _jax()
    import oracle
    fn, args = _user_functions()[name]
    pol = None if policy == "None" else jax.checkpoint_policies.dots_saveable
    report = oracle.check(fn, pol, *args)
    for r in report.results:
        if name.startswith("gammainc") and r.property == "second_order":
            # a second derivative in a: igamma_grad_a has no JVP in JAX, nor in the spec
            assert r.status == "not applicable" and S.IGAMMA_GRAD_A_JVP_ERROR in r.detail, str(report)
        else:
            assert r.status in ("ok", "known divergence", "not compared"), str(report)


def _gammainc_of_constant_a():
    import jax.numpy as jnp
    import jax.scipy.special as jss
    return lambda x: jnp.sum(jss.gammainc(A, x) @ jnp.ones((3, 2)))


@pytest.mark.parametrize("policy", ["None", "dots_saveable"])
def test_oracle_agrees_gammainc_in_x_to_second_order(policy):
    """With a constant, igamma_grad_a is never differentiated: second order
    is compared (remat2; remat3: the next test)."""
    jax = _jax()
    import oracle
    pol = None if policy == "None" else jax.checkpoint_policies.dots_saveable
    report = oracle.check(_gammainc_of_constant_a(), pol, G, implementations=("remat2",))
    statuses = {r.property: r.status for r in report.results}
    assert set(statuses.values()) <= {"ok", "known divergence", "not compared"}, str(report)
    assert statuses["second_order"] == "ok", str(report)


def test_oracle_gammainc_of_constant_a_second_order_under_remat3():
    """Under jax_remat3 a checkpoint differentiates the constant a it closes
    over (its pullback holds igamma_grad_a(a, x)), and jax.jvp of that
    pullback raises JAX's NotImplementedError for igamma_grad_a; remat2
    computes (measured here). oracle.check reports the known divergence
    remat3-differentiates-a-checkpoint-s-constants, whose model raises the
    same."""
    jax = _jax()
    import jax.numpy as jnp
    from jax import lax
    import oracle
    from oracle.checker import implementation
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip("no jax_remat3 on this release")
    for impl, raises in (("remat3", True), ("remat2", False)):     # JAX's own behaviour
        with implementation(impl):
            f = jax.checkpoint(lambda x: jnp.sum(lax.igamma(A, x)))
            second = lambda: jax.jvp(lambda x: jax.vjp(f, x)[1](np.float32(1.0))[0], (G,), (G,))  # noqa: E731
            if raises:
                with pytest.raises(NotImplementedError, match="igamma_grad_a"):
                    second()
            else:
                second()
    report = oracle.check(_gammainc_of_constant_a(), None, G, implementations=("remat3",))
    assert ("remat3-differentiates-a-checkpoint-s-constants", "second_order", "remat3") in report.known_divergences


def test_oracle_betainc_grad_in_a_raises_alike():
    """Differentiating betainc in a raises JAX's ValueError on both sides."""
    _jax()
    import jax.scipy.special as jss
    import oracle
    report = oracle.check(lambda a, x: jss.betainc(a, 1.5, x).sum(), None, A, U)
    statuses = {r.property: r.status for r in report.results}
    assert statuses["values"] == "ok", str(report)
    assert "mismatch" not in set(statuses.values()), str(report)
