"""Matrix decompositions (spec/prims_decompositions.py): qr, eigh, svd.

The registered Examples (tests/test_primitive_examples.py) check each
primitive against numpy. Here, with independent expected values:

* spec only: the factorizations' defining properties (x = q r with q
  orthonormal and r triangular; x = v diag(w) v^T with w ascending, one
  triangle read; x = u diag(s) vt with s descending), empty matrices, the
  refusals (f16, complex values, svd's JVP for full non-square vectors);
* gradients of composed functions against float64 finite differences;
* with JAX: each primitive's JVP program is JAX's jvp jaxpr equation for
  equation (names, params, wiring, nested jits included), for every shape
  kind and param combination, batched included; the raw values are JAX's
  on CPU -- qr's in float32 (Householder's signs are fixed), eigh's and
  svd's in float64 (JAX and the spec call the same LAPACK routine in
  float64, signs included); in float32 JAX runs ssyevd / sgesdd, whose
  vector signs can differ from the float64 routines', so there only
  sign-free quantities are compared; `oracle.check` passes for user
  functions under policies None, dots_saveable and everything_saveable
  on remat2 and remat3.
"""
from __future__ import annotations

import numpy as np
import oracle
import pytest

import spec
from spec import prims_decompositions as dc

from test_prims_linalg import _assert_jvp_is_jax, _fd_grad, _jax, _policy, _run, _t  # shared helpers

RNG = np.random.default_rng(0)


def _separated_sym(n, batch=()):
    """Symmetric, eigenvalues about 1 apart."""
    q, _ = np.linalg.qr(RNG.normal(size=batch + (n, n)))
    w = np.arange(n) - n / 2 + RNG.uniform(0, 0.3, size=batch + (1, n))
    return (q * w) @ np.swapaxes(q, -1, -2)


def _separated_sv(m, n, batch=()):
    """Singular values 1 .. min(m, n), about 1 apart."""
    k = min(m, n)
    u, _ = np.linalg.qr(RNG.normal(size=batch + (m, m)))
    v, _ = np.linalg.qr(RNG.normal(size=batch + (n, n)))
    s = np.arange(k, 0, -1) + RNG.uniform(0, 0.3, size=batch + (1, k))
    return (u[..., :k] * s) @ np.swapaxes(v[..., :k], -1, -2)


QR_SHAPES = [(3, 3), (4, 3), (3, 4), (2, 4, 3), (2, 3, 4), (2, 2, 3, 3), (5, 2)]
SVD_MODES = [(False, True), (True, False), (False, False), (True, True)]     # (full_matrices, compute_uv)


def _svd_modes(shape):
    return [(f, c) for f, c in SVD_MODES if not (f and c and shape[-1] != shape[-2])]


# ==========================================================================
# spec only: the defining properties

@pytest.mark.parametrize("full_matrices", [False, True])
@pytest.mark.parametrize("shape", QR_SHAPES)
def test_qr_factors(shape, full_matrices):
    x = RNG.normal(size=shape)
    q, r = _run(lambda a: dc.qr(a, full_matrices), x)
    m, n = shape[-2:]
    k = m if full_matrices else min(m, n)
    assert q.shape == shape[:-2] + (m, k) and r.shape == shape[:-2] + (k, n)
    np.testing.assert_allclose(q @ r, x, atol=1e-12)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(k), q.shape[:-2] + (k, k)),
                               atol=1e-12)
    assert np.all(np.tril(r, -1) == 0)


def test_qr_householder_signs():
    """LAPACK's dlarfg: r[j, j] = -sign(pivot) |column|, except the last
    diagonal entry of a square matrix (nothing below it to reflect)."""
    x = np.array([[2.0, 1.0, 0.5], [0.1, -3.0, 0.2], [0.3, 0.4, 5.0]])
    _, r = _run(dc.qr, x)
    assert r[0, 0] < 0 and r[1, 1] > 0 and r[2, 2] > 0
    _, r = _run(dc.qr, -x)
    assert r[0, 0] > 0 and r[1, 1] < 0 and r[2, 2] < 0


@pytest.mark.parametrize("lower", [True, False])
def test_eigh_decomposes_reading_one_triangle(lower):
    a = _separated_sym(4, (2,))
    junk = a + np.triu(RNG.normal(size=a.shape), 1) if lower else a + np.tril(RNG.normal(size=a.shape), -1)
    v, w = _run(lambda x: dc.eigh_raw(x, lower=lower), junk)
    np.testing.assert_allclose((v * w[..., None, :]) @ np.swapaxes(v, -1, -2), a, atol=1e-12)
    assert np.all(np.diff(w, axis=-1) > 0)
    v2, w2 = _run(lambda x: dc.eigh_raw(x, lower=lower, sort_eigenvalues=False), a)   # CPU always sorts
    np.testing.assert_array_equal(w2, w)


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (3, 3), (2, 4, 3)])
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd_decomposes(shape, full_matrices):
    x = RNG.normal(size=shape)
    s, u, vt = _run(lambda a: dc.svd_raw(a, full_matrices, True), x)
    k = min(shape[-2:])
    np.testing.assert_allclose((u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :], x, atol=1e-12)
    assert np.all(np.diff(s, axis=-1) <= 0) and np.all(s >= 0)
    only, = _run(lambda a: dc.svd_raw(a, full_matrices, False), x)
    np.testing.assert_allclose(only, s, rtol=1e-12)


def test_empty_matrices():
    """_qr_lowering / _empty_svd: identities and zeros."""
    q, r = _run(lambda a: dc.qr(a, True), np.zeros((3, 0)))
    np.testing.assert_array_equal(q, np.eye(3))
    assert r.shape == (3, 0)
    s, u, vt = _run(lambda a: dc.svd_raw(a, True, True), np.zeros((0, 2)))
    assert s.shape == (0,) and u.shape == (0, 0)
    np.testing.assert_array_equal(vt, np.eye(2))


def test_refusals():
    with pytest.raises(spec.PrimitiveError, match="qr: operand dtype float16.*complex dtypes are not modelled"):
        spec.trace(dc.qr, spec.f16[3, 3])
    with pytest.raises(spec.PrimitiveError, match="square"):
        spec.trace(dc.eigh_raw, spec.f32[3, 2])
    with pytest.raises(spec.PrimitiveError, match="rank at least 2"):
        spec.trace(dc.svd_raw, spec.f32[3])
    with pytest.raises(spec.PrimitiveError, match="complex operands"):
        dc._qr_eval(np.eye(2, dtype=np.complex64), full_matrices=False)
    with pytest.raises(spec.PrimitiveError, match="complex"):       # a complex operand: refused
        spec.trace(dc.qr, spec.ArrayType((2, 2), np.complex64))
    with pytest.raises(spec.PrimitiveError, match="not implemented for full matrices"):
        spec.jvp(spec.trace(lambda a: dc.svd_raw(a, True, True), spec.f32[4, 3]))


# ==========================================================================
# gradients against float64 finite differences

# fixed weights for the gradient cases' outputs
C43 = np.random.default_rng(1).normal(size=(4, 3))
C44 = np.random.default_rng(2).normal(size=(4, 4))


def _np_qr_full(a):
    q, r = np.linalg.qr(a, mode="complete")
    return q, r


GRAD_CASES = {
    "qr-r": (lambda a: (dc.qr(a, False)[1] * C43[:3]).sum(), lambda a: (np.linalg.qr(a)[1] * C43[:3]).sum(),
             lambda: RNG.normal(size=(4, 3))),
    "qr-wide": (lambda a: (dc.qr(a, False)[1] * C43.T).sum(), lambda a: (np.linalg.qr(a)[1] * C43.T).sum(),
                lambda: RNG.normal(size=(3, 4))),
    "qr-complete-q": (lambda a: (dc.qr(a, True)[0] * C44).sum(), lambda a: (_np_qr_full(a)[0] * C44).sum(),
                      lambda: RNG.normal(size=(4, 3))),
    "eigh": (lambda a: (dc.eigh(a)[1] ** 2).sum() + (dc._signless_ops(dc.eigh(a)[0]) * C44).sum(),
             lambda a: ((np.linalg.eigh(dc._sym(a))[0] ** 2).sum()
                        + (dc._signless(np.linalg.eigh(dc._sym(a))[1]) * C44).sum()),
             lambda: _separated_sym(4)),
    "svd": (lambda a: (dc.svd(a, False)[1] ** 3).sum() + (dc._signless_ops(dc.svd(a, False)[0]) * C43).sum(),
            lambda a: ((np.linalg.svd(a)[1] ** 3).sum()
                       + (dc._signless(np.linalg.svd(a, full_matrices=False)[0]) * C43).sum()),
            lambda: _separated_sv(4, 3)),
    "svd-values": (lambda a: dc.svd(a, True, False).sum(), lambda a: np.linalg.svd(a, compute_uv=False).sum(),
                   lambda: _separated_sv(3, 4)),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_grad_matches_finite_differences(name):
    fn, ref, draw = GRAD_CASES[name]
    a = draw()
    got, = spec.evaluate(spec.vjp_program(spec.trace(fn, _t(a))), a, np.ones(()))[-1:]
    np.testing.assert_allclose(got, _fd_grad(ref, a), rtol=1e-6, atol=1e-6)


# ==========================================================================
# with JAX

@pytest.mark.parametrize("full_matrices", [False, True])
@pytest.mark.parametrize("shape", QR_SHAPES)
def test_qr_jvp_is_jax(shape, full_matrices):
    """Square, tall, wide (the [X1 X2] split), full_matrices tall (lu and
    the jitted _lu_solve, vmapped over batch dims), batched."""
    from jax import lax
    x = RNG.normal(size=shape).astype(np.float32)
    _assert_jvp_is_jax(lambda a: lax.linalg.qr_p.bind(a, full_matrices=full_matrices, pivoting=False,
                                                      use_magma=None),
                       lambda a: dc.qr(a, full_matrices), x)


@pytest.mark.parametrize("wrapper", [False, True])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3), (2, 2, 3, 3), (1, 1)])
def test_eigh_jvp_is_jax(shape, lower, wrapper):
    from jax import lax
    x = RNG.normal(size=shape).astype(np.float32)
    if wrapper:        # lax.linalg.eigh: symmetrize, eigh_p
        _assert_jvp_is_jax(lambda a: lax.linalg.eigh(a, lower=lower), lambda a: dc.eigh(a, lower), x)
    else:
        _assert_jvp_is_jax(lambda a: lax.linalg.eigh_p.bind(a, lower=lower, sort_eigenvalues=True,
                                                            subset_by_index=None, algorithm=None),
                           lambda a: dc.eigh_raw(a, lower), x)


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (3, 3), (2, 4, 3), (1, 1)])
def test_svd_jvp_is_jax(shape):
    from jax import lax
    x = RNG.normal(size=shape).astype(np.float32)
    for full_matrices, compute_uv in _svd_modes(shape):
        _assert_jvp_is_jax(lambda a: lax.linalg.svd_p.bind(a, full_matrices=full_matrices, compute_uv=compute_uv,
                                                           subset_by_index=None, algorithm=None),
                           lambda a: dc.svd_raw(a, full_matrices, compute_uv), x)


@pytest.mark.parametrize("full_matrices", [False, True])
@pytest.mark.parametrize("shape", QR_SHAPES)
def test_qr_values_are_jax_in_float32(shape, full_matrices):
    """Householder's signs are fixed: JAX's sgeqrf/sorgqr and the spec's
    float64 factors agree to float32 rounding, signs included."""
    _jax()
    from jax import lax
    x = RNG.normal(size=shape).astype(np.float32)
    got = _run(lambda a: dc.qr(a, full_matrices), x)
    want = lax.linalg.qr_p.bind(x, full_matrices=full_matrices, pivoting=False, use_magma=None)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-4, atol=1e-4)


def test_eigh_and_svd_values_are_jax_in_float64():
    """Raw outputs, signs included: JAX on CPU calls dsyevd / dgesdd, as numpy does."""
    jax = _jax()
    from jax import lax
    with oracle.jax_api.enable_x64(True):
        for lower in (True, False):
            a = _separated_sym(4, (3,)) + np.triu(RNG.normal(size=(4, 4)), 1) * (not lower)
            got = _run(lambda x: dc.eigh_raw(x, lower), a)
            want = lax.linalg.eigh_p.bind(a, lower=lower, sort_eigenvalues=True, subset_by_index=None,
                                          algorithm=None)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, np.asarray(w), rtol=1e-10, atol=1e-10)
        for shape in [(4, 3), (3, 4), (3, 3), (2, 5, 2)]:
            x = RNG.normal(size=shape)
            for full_matrices, compute_uv in SVD_MODES:
                got = _run(lambda a: dc.svd_raw(a, full_matrices, compute_uv), x)
                want = lax.linalg.svd_p.bind(x, full_matrices=full_matrices, compute_uv=compute_uv,
                                             subset_by_index=None, algorithm=None)
                for g, w in zip(got, want):
                    np.testing.assert_allclose(g, np.asarray(w), rtol=1e-10, atol=1e-10)


def test_eigh_and_svd_sign_free_values_are_jax_in_float32():
    """In float32 JAX runs ssyevd / sgesdd: eigenvalues, singular values,
    v v^T-type products and each vector times its first entry agree; the
    raw vectors' signs may not (the float64 routines choose them)."""
    _jax()
    from jax import lax
    a = _separated_sym(4, (8,)).astype(np.float32)
    v, w = _run(dc.eigh_raw, a)
    jv, jw = (np.asarray(o) for o in lax.linalg.eigh_p.bind(a, lower=True, sort_eigenvalues=True,
                                                           subset_by_index=None, algorithm=None))
    np.testing.assert_allclose(w, jw, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dc._signless(v), dc._signless(jv), atol=1e-4)
    x = _separated_sv(4, 3, (8,)).astype(np.float32)
    s, u, vt = _run(lambda b: dc.svd_raw(b, False, True), x)
    js, ju, jvt = (np.asarray(o) for o in lax.linalg.svd_p.bind(x, full_matrices=False, compute_uv=True,
                                                               subset_by_index=None, algorithm=None))
    np.testing.assert_allclose(s, js, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dc._signless(u), dc._signless(ju), atol=1e-4)
    np.testing.assert_allclose(dc._signless(np.swapaxes(vt, -1, -2)), dc._signless(np.swapaxes(jvt, -1, -2)),
                               atol=1e-4)


def _user_functions():
    jax = _jax()
    jnp = pytest.importorskip("jax.numpy")
    eye = np.eye(3, dtype=np.float32)
    x = RNG.normal(size=(4, 3)).astype(np.float32)
    a = RNG.normal(size=(3, 3)).astype(np.float32)
    data = RNG.normal(size=(8, 3)).astype(np.float32)
    key = jax.random.key(0)

    def pca_whitening(d):
        """Whitened data z = (d V) / sqrt(w) of the covariance's eigh
        (sign-free: z's columns enter squared) and the ZCA whitener
        V diag(w^-1/2) V^T (sign-free) against the covariance."""
        c = d.T @ d / d.shape[0] + 0.1 * eye
        w, v = jnp.linalg.eigh(c)
        z = (d @ v) / jnp.sqrt(w)
        return jnp.sum(z ** 2 * jnp.arange(1.0, 9.0)[:, None]) + jnp.sum((v * w ** -0.5) @ v.T * c)

    return {
        "norm_2": (lambda y: jnp.linalg.norm(y, 2), (x,)),
        "norm_nuc": (lambda y: jnp.linalg.norm(y, "nuc"), (x,)),
        "svd_values": (lambda y: jnp.linalg.svd(y, compute_uv=False).sum(), (x,)),
        "svd_vectors": (lambda y: jnp.sum(jnp.linalg.svd(y, full_matrices=False)[0] ** 2
                                          * jnp.arange(4.0)[:, None]), (x,)),
        "eigh_values": (lambda y: jnp.sum(jnp.linalg.eigh(y @ y.T + 3 * eye)[0] ** 2), (a,)),
        "pca_whitening": (pca_whitening, (data,)),
        "qr_r": (lambda y: jnp.sum(jnp.linalg.qr(y)[1]), (x,)),
        "qr_wide": (lambda y: jnp.sum(jnp.tanh(jnp.linalg.qr(y.T)[1])), (x,)),
        "qr_q": (lambda y: jnp.sum(jnp.sin(jnp.linalg.qr(y)[0])), (x,)),
        "orthogonal_init": (lambda y: jnp.sum(jax.nn.initializers.orthogonal()(key, (4, 3)) * y), (x,)),
        "random_orthogonal": (lambda y: jnp.sum(jax.random.orthogonal(key, 4)[:, :3] * y), (x,)),
    }


USER = ["norm_2", "norm_nuc", "svd_values", "svd_vectors", "eigh_values", "pca_whitening", "qr_r", "qr_wide",
        "qr_q", "orthogonal_init", "random_orthogonal"]
POLICIES = ["none", "dots_saveable", "everything_saveable"]


def _assert_passes(fn, policy, *args):
    import oracle
    report = oracle.check(fn, policy, *args)
    statuses = [(r.property, r.implementation, r.status) for r in report.results]
    assert {impl for _, impl, _ in statuses} >= {"remat2", "remat3"}
    assert all(s in ("ok", "known divergence", "not applicable") for _, _, s in statuses), statuses


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", USER)
def test_oracle_check_passes(name, policy):
    fn, args = _user_functions()[name]
    _assert_passes(fn, _policy(policy), *args)


@pytest.mark.parametrize("policy", ["none", "everything_saveable"])
def test_oracle_check_passes_qr_complete(policy):
    """jnp.linalg.qr(mode="complete") of a tall matrix: the full_matrices
    block of qr's JVP (lu, the jitted _lu_solve)."""
    jnp = pytest.importorskip("jax.numpy")
    x = RNG.normal(size=(4, 3)).astype(np.float32)
    _assert_passes(lambda y: jnp.sum(jnp.linalg.qr(y, mode="complete")[0] ** 2 * jnp.arange(4.0)), _policy(policy),
                   x)


def test_qr_complete_dots_saveable_jvp_rule_dot_is_recomputed_by_remat3():
    """remat3 asks its policy only about the equations of the body as
    written (oracle/remat3_model.py `_marked_primal_level`): qr's JVP rule
    computes a dot of primal values only (q_mp @ z_pn in q_mn + q_mp @
    z_pn, full_matrices of a tall matrix), which remat2 offers to
    dots_saveable and saves, and remat3 recomputes, saving the argument
    alone. Both are checked (remat3's as its known divergence)."""
    jax = _jax()
    jnp = pytest.importorskip("jax.numpy")
    import oracle
    if not hasattr(jax.config, "jax_remat3"):
        pytest.skip("no jax_remat3 on this release")
    x = RNG.normal(size=(4, 3)).astype(np.float32)
    report = oracle.check(lambda y: jnp.sum(jnp.linalg.qr(y, mode="complete")[0] ** 2 * jnp.arange(4.0)),
                          jax.checkpoint_policies.dots_saveable, x, properties=("residuals",))
    assert ("remat3-policy-only-for-dots-and-names", "residuals", "remat3") in report.known_divergences
    assert not [d for d in report.known_divergences if d[2] == "remat2"]


@pytest.mark.parametrize("name", ["norm_2", "norm_nuc", "svd_values", "svd_vectors", "eigh_values",
                                  "pca_whitening", "qr_r", "qr_wide", "qr_q"])
def test_spec_gradient_of_user_function_matches_finite_differences(name):
    """The user function imported from JAX's float64 jaxpr; the spec's
    gradient against central differences of JAX's float64 values."""
    jax = _jax()
    import oracle
    fn, (arg,) = _user_functions()[name]
    arg = arg.astype(np.float64)
    with oracle.jax_api.enable_x64(True):
        prog = oracle.from_jaxpr(jax.make_jaxpr(fn)(arg))
        want = _fd_grad(lambda a: float(fn(a)), arg)
    got = spec.evaluate(spec.vjp_program(prog), arg, np.ones(()))[-1]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["svd_values", "norm_nuc", "eigh_values"])
def test_oracle_check_passes_at_a_degenerate_spectrum(name):
    """A rank-2 3x4 matrix (a zero singular value) and a matrix with a
    repeated eigenvalue: the derivative there is a choice among
    subgradients (the vectors' signs and basis), which JAX's float32 LAPACK
    and the spec's float64 make differently. The tolerance models LAPACK's
    backward error (oracle/tolerances.py BACKWARD_STABLE), so this is no
    false alarm (it was one: a sweep of user code)."""
    jnp = pytest.importorskip("jax.numpy")
    rank2 = np.linspace(-1.5, 1.7, 12).reshape(3, 4).astype(np.float32)
    repeated = np.diag([2.0, 2.0, 1.0]).astype(np.float32)
    fn, arg = {"svd_values": (lambda y: jnp.linalg.svd(y, compute_uv=False).sum(), rank2),
               "norm_nuc": (lambda y: jnp.linalg.norm(y, "nuc"), rank2),
               "eigh_values": (lambda y: jnp.sum(jnp.linalg.eigh(y)[1] ** 3), repeated)}[name]
    _assert_passes(fn, None, arg)
