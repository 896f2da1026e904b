"""random_gamma (spec/prims_random.py): jax.random.gamma / loggamma, and
beta / dirichlet through loggamma, against independent answers.

* the sampler: the spec evaluating the program jax.make_jaxpr gives equals
  live JAX (float32 rounding) for several keys, alphas (boosted ones below
  1, large ones), shapes, log_space on and off, key arrays; its mean and
  variance are Gamma(a)'s (no JAX);
* the JVP: the traced random_gamma_grad is JAX's lax.special one equation for
  equation, the JVP program is jax.jvp's, the gradient in alpha is
  jax.grad's and the float64 finite difference (scipy) of the
  reparameterised sample x(a) = P^-1(a, P(a0, x0)), where P is the
  regularized incomplete gamma function; off the CPU the rule is JAX's
  vmap of it;
* oracle.check under nothing_saveable, everything_saveable, dots_saveable,
  under vmap over keys, for beta and dirichlet: every status ok or a known
  divergence, values/jvp/vjp/vmap/second_order ok;
* what the spec refuses (non-float32 samples) is oracle.Unsupported.
"""
from __future__ import annotations

import numpy as np
import pytest

import spec
from spec.ir import u32
from spec.prims_random import keys_of, random_gamma, random_gamma_grad, random_wrap
from test_prims_random import _assert_reported  # every property ok, remat2's residuals too

ALPHAS = [0.05, 0.4, 1.0, 2.5, 30.0, 1e4]


def _jax():
    return pytest.importorskip("jax")


def _sample(fn, key, a, shape):
    import oracle
    prog = oracle.trace_jax(lambda a: fn(key, a, shape), a)
    return spec.evaluate(prog, a)[0]


# ==========================================================================
# the sampler

def test_sampler_moments_are_gammas():
    """Gamma(a, 1) has mean a and variance a: 4000 draws are within 5 standard errors."""
    n = 4000
    for a in (0.3, 1.0, 4.0):
        prog = spec.trace(lambda k, x: random_gamma(random_wrap(k), x), u32[2], spec.f32[n])
        x = spec.evaluate(prog, np.uint32([0, 7]), np.full(n, a, np.float32))[0].astype(np.float64)
        assert abs(x.mean() - a) < 5 * np.sqrt(a / n)
        assert abs(x.var() - a) < 5 * np.sqrt((np.mean((x - a) ** 4) - a * a) / n)


@pytest.mark.parametrize("log_space", [False, True])
@pytest.mark.parametrize("shape", [(), (5,), (2, 3)])
def test_values_match_jax(shape, log_space):
    jax = _jax()
    fn = jax.random.loggamma if log_space else jax.random.gamma
    for seed in (0, 1, 42):
        key = jax.random.PRNGKey(seed)
        for alpha in ALPHAS:
            a = np.full(shape, alpha, np.float32)
            want = np.asarray(fn(key, a, shape))
            np.testing.assert_allclose(_sample(fn, key, a, shape), want, rtol=1e-5, atol=1e-5 if log_space else 0)


def test_values_match_jax_for_mixed_alphas_and_typed_keys():
    jax = _jax()
    import oracle
    a = np.float32([[0.1, 0.9, 1.0], [1.5, 8.0, 300.0]])
    keys = jax.random.split(jax.random.key(3), 2)
    fn = lambda k, a: jax.vmap(lambda k, a: jax.random.gamma(k, a))(k, a)   # random_gamma on a key<fry>[2]
    prog = oracle.trace_jax(fn, keys, a)
    assert any(e.primitive.name == "call" for e in prog.eqns)
    got = spec.evaluate(prog, keys_of(np.asarray(jax.random.key_data(keys))), a)[0]
    np.testing.assert_allclose(got, np.asarray(fn(keys, a)), rtol=1e-5)


def test_beta_and_dirichlet_match_jax():
    jax = _jax()
    import oracle
    key = jax.random.PRNGKey(5)
    a, b = np.float32([0.3, 1.0, 2.0, 9.0]), np.float32([2.0, 0.5, 2.0, 1.0])
    beta = lambda a, b: jax.random.beta(key, a, b)
    np.testing.assert_allclose(spec.evaluate(oracle.trace_jax(beta, a, b), a, b)[0], np.asarray(beta(a, b)),
                               rtol=1e-5, atol=1e-7)
    alpha = np.float32([[0.2, 1.0, 4.0], [2.0, 2.0, 2.0]])
    dirichlet = lambda alpha: jax.random.dirichlet(key, alpha)
    np.testing.assert_allclose(spec.evaluate(oracle.trace_jax(dirichlet, alpha), alpha)[0],
                               np.asarray(dirichlet(alpha)), rtol=1e-5, atol=1e-7)


# ==========================================================================
# the JVP

def test_random_gamma_grad_is_jaxs_algorithm():
    """lax.special.random_gamma_grad (not a primitive in 0.10.2) traced inline, equation for equation."""
    jax = _jax()
    import oracle
    from jax._src.lax import special
    one = np.float32(1)
    want = oracle.from_jaxpr(jax.make_jaxpr(special.random_gamma_grad)(one, one))
    assert str(spec.trace(random_gamma_grad, spec.f32[()], spec.f32[()])) == str(want)


@pytest.mark.parametrize("log_space", [False, True])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_jvp_program_is_jaxs(shape, log_space):
    """_gamma_grad's reshapes, the log-space guard and lax.map's scan, as jax.jvp traces them."""
    jax = _jax()
    import oracle
    fn = jax.random.loggamma if log_space else jax.random.gamma
    g = lambda a: fn(jax.random.PRNGKey(0), a, shape)
    a = np.full(shape, 2.0, np.float32)
    want = oracle.trace_jax(lambda a, t: jax.jvp(g, (a,), (t,)), a, a)
    assert str(spec.jvp(oracle.trace_jax(g, a))) == str(want)


@pytest.mark.parametrize("log_space", [False, True])
def test_jvp_off_the_cpu_is_jaxs_vmap(log_space):
    """Off the CPU, _gamma_grad is vmap(random_gamma_grad): the vmapped loops JAX's vmap makes."""
    jax = _jax()
    import oracle
    from jax._src.lax import special
    from spec.prims_platform import lowering_platform
    from spec.prims_random import _gamma_grad

    def jax_side(sample, a):
        if not log_space:
            return jax.vmap(special.random_gamma_grad)(a, sample)
        samples = jax.lax.exp(sample)
        tiny = jax.lax.full_like(samples, np.finfo(np.float32).tiny)
        samples = jax.lax.select(jax.lax.eq(samples, np.float32(0)), tiny, samples)
        return jax.vmap(lambda a, x: special.random_gamma_grad(a, x) / x)(a, samples)
    x = np.float32([0.3, 1.0, 2.0, 9.0])
    a = np.float32([0.5, 1.0, 2.0, 3.0])
    want = oracle.from_jaxpr(jax.make_jaxpr(jax_side)(x, a))
    with lowering_platform("cuda"):
        prog = spec.trace(lambda x, a: _gamma_grad(x, a, log_space), spec.f32[4], spec.f32[4])
        assert not any(e.primitive.name == "scan" for e in prog.eqns)
        got = spec.evaluate(prog, x, a)[0]
    assert str(prog) == str(want)
    cpu = spec.trace(lambda x, a: _gamma_grad(x, a, log_space), spec.f32[4], spec.f32[4])
    np.testing.assert_array_equal(got, spec.evaluate(cpu, x, a)[0])


def _implicit_grad(a, x, log_space):
    """d x / d a at fixed quantile q = P(a, x), by float64 central
    differences of scipy's inverse: (P^-1(a + h, q) - P^-1(a - h, q)) / 2h."""
    special = pytest.importorskip("scipy.special")
    a, x = np.float64(a), np.float64(x)
    q = special.gammainc(a, x)
    h = 1e-6 * a
    d = (special.gammaincinv(a + h, q) - special.gammaincinv(a - h, q)) / (2 * h)
    return d / x if log_space else d


@pytest.mark.parametrize("log_space", [False, True])
def test_grad_in_alpha_matches_jax_and_the_reparameterised_sample(log_space):
    jax = _jax()
    import oracle
    fn = jax.random.loggamma if log_space else jax.random.gamma
    key = jax.random.PRNGKey(2)
    a = np.float32([0.3, 0.8, 1.0, 2.5, 6.0, 40.0])
    loss = lambda a: fn(key, a).sum()
    prog = oracle.trace_jax(loss, a)
    got = spec.evaluate(spec.grad(prog), a)[0]
    np.testing.assert_allclose(got, np.asarray(jax.grad(loss)(a)), rtol=2e-5, atol=1e-6)
    sample = _sample(fn, key, a, a.shape)
    x = np.exp(sample.astype(np.float64)) if log_space else sample.astype(np.float64)
    want = np.array([_implicit_grad(ai, xi, log_space) for ai, xi in zip(a, x)])
    np.testing.assert_allclose(got, want, rtol=2e-3)


# ==========================================================================
# oracle.check

def _assert_ok(report):
    _assert_reported(report, "gamma")


@pytest.mark.parametrize("policy", ["nothing_saveable", "everything_saveable"])   # (no dot to save)
def test_oracle_check_differentiated_alpha(policy):
    import oracle
    jax = _jax()
    import jax.numpy as jnp
    key = jax.random.PRNGKey(0)
    w = np.float32([[0.5, -1.0], [2.0, 0.3], [1.0, 1.0]])

    def loss(a):
        g = jax.random.gamma(key, a, (3,))
        return jnp.sum(jnp.tanh(g @ w)) + jnp.sum(jnp.sin(g) * a)
    _assert_ok(oracle.check(loss, getattr(jax.checkpoint_policies, policy), np.float32([0.5, 2.0, 7.0])))


def test_oracle_check_the_briefs_call():
    import oracle
    jax = _jax()
    import jax.numpy as jnp
    _assert_ok(oracle.check(lambda x: jnp.sum(x * jax.random.gamma(jax.random.PRNGKey(0), 2.0, (3,))),
                            jax.checkpoint_policies.nothing_saveable, np.ones(3, np.float32)))


def test_oracle_check_vmap_over_keys_and_loggamma():
    import oracle
    jax = _jax()
    import jax.numpy as jnp

    def loss(a, keys):
        draws = jax.vmap(lambda k: jax.random.loggamma(k, a, (2,)))(keys)
        return jnp.sum(jnp.exp(draws) * a)
    keys = jax.random.split(jax.random.PRNGKey(4), 3)
    _assert_ok(oracle.check(loss, jax.checkpoint_policies.nothing_saveable, np.float32(1.3), keys))


@pytest.mark.parametrize("which", [pytest.param("beta", marks=pytest.mark.slow), "dirichlet"])   # beta: 16 s, slow
def test_oracle_check_beta_and_dirichlet(which):
    import oracle
    jax = _jax()
    import jax.numpy as jnp
    key = jax.random.PRNGKey(1)
    if which == "beta":
        fn, a = (lambda a: jnp.sum(jax.random.beta(key, a, 2.0 * a, (4,)))), np.float32([0.5, 1.5, 3.0, 0.2])
    else:
        fn, a = (lambda a: jnp.sum(jax.random.dirichlet(key, a) * jnp.arange(3.0))), np.float32([0.5, 1.5, 3.0])
    _assert_ok(oracle.check(fn, jax.checkpoint_policies.dots_saveable, a))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_other_sample_dtypes_are_unsupported(dtype):
    import oracle
    jax = _jax()
    import jax.numpy as jnp
    fn = lambda a: jnp.sum(jax.random.gamma(jax.random.PRNGKey(0), a, (3,), dtype=dtype)).astype(jnp.float32)
    with pytest.raises(oracle.Unsupported, match=r"random_gamma: a must be float32, got .*32-bit uniforms"):
        oracle.check(fn, None, np.float32(1.5))


# slow (over 10 s): `make test-slow` runs it (CI does), keeping `make test` within its ten minutes
@pytest.mark.slow
def test_third_order_of_a_constant_alpha_under_remat3():
    """Found by a pristine nightly (f2a46224f0): under jax_remat3 the backward
    pass of a checkpoint reads its inputs through an optimization_barrier
    (`rem(*optimization_barrier(primals))`), whose JVP instantiates the zero
    tangent of the constant alpha, so grad o grad o grad differentiates
    gamma_grad's while loops in alpha and raises the while loop's transpose
    error; grad o grad and remat2 compute (measured here). The remat3 model
    raises the same at the same order, so the stack is the known divergence
    remat3-differentiates-a-checkpoint-s-constants, never a Mismatch; remat2
    agrees."""
    jax = _jax()
    import jax.numpy as jnp
    import oracle
    from fuzz import properties
    from oracle import stacks as S
    from oracle.checker import implementation
    from spec.prims_control import WHILE_TRANSPOSE_ERROR
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip("no jax_remat3 on this release")
    key = jax.random.key(0)

    def f(x):       # jax.checkpoint reads jax_remat3 when it is called
        return jax.checkpoint(lambda x, a: jnp.sin(x * jax.random.gamma(key, a, ())))(x, jnp.float32(2.0))
    x = np.float32(1.0)
    for impl, third_raises in (("remat3", True), ("remat2", False)):     # JAX's own behaviour
        with implementation(impl):
            jax.grad(jax.grad(f))(x)
            if third_raises:
                with pytest.raises(ValueError) as raised:
                    jax.grad(jax.grad(jax.grad(f)))(x)
                assert str(raised.value) == WHILE_TRANSPOSE_ERROR
            else:
                jax.grad(jax.grad(jax.grad(f)))(x)
    prog = oracle.trace_jax(f, x)
    for depth, status in ((2, "ok"), (3, "known divergence")):
        stack = S.Stack(layers=(S.Layer("grad"),) * depth)
        report = properties.oracle_agrees(prog, stack=stack, only=(S.STACK,))
        assert report.status(S.STACK, "remat3") == status, str(report)
        assert report.status(S.STACK, "remat2") == "ok", str(report)
