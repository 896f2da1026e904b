"""Dense linear algebra (spec/prims_linalg.py): cholesky, triangular_solve,
lu, lu_pivots_to_permutation.

The registered Examples (tests/test_primitive_examples.py) check each
primitive against numpy. Here, with independent expected values:

* spec only: evaluation against numpy (np.linalg.cholesky / solve, P A = L U),
  the not-positive-definite NaNs, triangular_solve's vector operand, the
  refusals (complex, f16 factorizations, shapes);
* gradients of composed functions against float64 finite differences;
* with JAX: each primitive's JVP program is JAX's jvp jaxpr equation for
  equation (names, params, wiring), for every triangular_solve param
  combination, batched and rectangular LU included (before jax 0.5.3 the
  older lu rule the spec follows with spec.semantics'
  lu_jvp_vmaps_its_inner_rule=False, whose tangents are the new rule's
  and numpy's central differences); vmap programs of
  triangular_solve with one operand unbatched are JAX's; the raw
  primitives' values equal JAX's on CPU (the factor's untouched upper
  triangle, pivots, permutations); and `oracle.check` passes for user
  functions (jnp.linalg.cholesky, jax.scipy.linalg.solve_triangular /
  cho_solve / lu_factor / lu, jnp.linalg.det) under jax.checkpoint with
  policies None, dots_saveable and everything_saveable on remat2 and remat3.
  jnp.linalg.solve, inv and slogdet bind custom_linear_solve
  (spec/prims_linear_solve.py, tests/test_prims_linear_solve.py): the
  oracle checks them too.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import spec
from spec import prims_linalg as la
from spec.ir import Program, Var

RNG = np.random.default_rng(0)


def _t(x):
    return spec.ArrayType(np.shape(x), np.asarray(x).dtype)


def _run(fn, *args):
    return spec.evaluate(spec.trace(fn, *map(_t, args)), *args)


def _spd(n, batch=()):
    q, _ = np.linalg.qr(RNG.normal(size=batch + (n, n)))
    return q * RNG.uniform(1, 2, size=batch + (1, n)) @ np.swapaxes(q, -1, -2)


def _dominant(n, batch=()):
    return RNG.normal(scale=0.3, size=batch + (n, n)) + np.eye(n) * RNG.uniform(2, 3, size=batch + (n, 1))


TRSM_PARAMS = [dict(zip(la._TRSM_PARAMS, v)) for v in itertools.product([False, True], repeat=5)]


def _trsm_id(kw):
    return "-".join(k for k, v in kw.items() if v) or "plain"


# ==========================================================================
# spec only: values against numpy

def test_cholesky_factor_and_untouched_upper_triangle():
    a = _spd(4)
    a[0, 3] = 7.0                    # only the lower triangle is read; the upper one is kept
    got, = _run(la.cholesky_raw, a)
    want = np.linalg.cholesky(np.tril(a) + np.tril(a, -1).T)
    np.testing.assert_allclose(np.tril(got), want, rtol=1e-12)
    np.testing.assert_array_equal(np.triu(got, 1), np.triu(a, 1))


def test_cholesky_not_positive_definite_is_nan_per_matrix():
    a = np.stack([_spd(3), -np.eye(3)])
    raw, = _run(la.cholesky_raw, a)
    assert np.all(np.isnan(raw[1])) and not np.any(np.isnan(raw[0]))
    got, = _run(la.cholesky, a)           # the wrapper's _tril selects zeros above the diagonal
    lower = np.tril_indices(3)
    assert np.all(np.isnan(got[1][lower])) and np.all(np.triu(got[1], 1) == 0)


@pytest.mark.parametrize("kw", TRSM_PARAMS, ids=_trsm_id)
def test_triangular_solve_every_param_combination(kw):
    a, b = _dominant(3, (2,)), RNG.normal(size=(2, 3, 4) if kw["left_side"] else (2, 4, 3))
    got, = _run(lambda x, y: la.triangular_solve_raw(x, y, **kw), a, b)
    t = np.tril(a) if kw["lower"] else np.triu(a)
    if kw["unit_diagonal"]:
        t = t * (1 - np.eye(3)) + np.eye(3)
    op = np.swapaxes(t, -1, -2) if kw["transpose_a"] else t
    back = op @ got if kw["left_side"] else got @ op
    np.testing.assert_allclose(back, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("left_side", [True, False])
def test_triangular_solve_vector_operand(left_side):
    a, b = _dominant(3), RNG.normal(size=3)
    prog = spec.trace(lambda x, y: la.triangular_solve(x, y, left_side=left_side, lower=True), _t(a), _t(b))
    assert [e.primitive.name for e in prog.eqns] == ["broadcast_in_dim", "triangular_solve", "squeeze"]
    got, = spec.evaluate(prog, a, b)
    np.testing.assert_allclose(np.tril(a) @ got if left_side else got @ np.tril(a), b, rtol=1e-12)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 3, 3)])
def test_lu_reconstructs_the_permuted_matrix(shape):
    a = RNG.normal(size=shape)
    lu_, pivots, perm = _run(la.lu, a)
    m, n = shape[-2:]
    k = min(m, n)
    lower = np.tril(lu_[..., :, :k], -1) + np.eye(m, k)
    upper = np.triu(lu_[..., :k, :])
    np.testing.assert_allclose(lower @ upper, np.take_along_axis(a, perm[..., None], -2), atol=1e-12)
    assert np.all(np.abs(lower) <= 1 + 1e-12)           # partial pivoting: multipliers at most 1
    assert pivots.dtype == perm.dtype == np.int32
    swapped, = _run(lambda p: la.lu_pivots_to_permutation(p, m), pivots)
    np.testing.assert_array_equal(swapped, perm)


def test_lu_singular_matrix_keeps_finite_factors():
    a = np.array([[0.0, 1.0], [0.0, 2.0]])
    lu_, pivots, perm = _run(la.lu, a)
    np.testing.assert_array_equal(lu_, [[0.0, 1.0], [0.0, 2.0]])
    np.testing.assert_array_equal(pivots, [0, 1])


def test_refusals():
    with pytest.raises(spec.PrimitiveError, match="cholesky: operand dtype float16"):
        spec.trace(la.cholesky_raw, spec.f16[3, 3])
    with pytest.raises(spec.PrimitiveError, match="square"):
        spec.trace(la.cholesky_raw, spec.f32[3, 2])
    with pytest.raises(spec.PrimitiveError, match="rank at least 2"):
        spec.trace(la.lu, spec.f32[3])
    with pytest.raises(spec.PrimitiveError, match="incompatible shapes"):
        spec.trace(lambda a, b: la.triangular_solve_raw(a, b, left_side=True), spec.f32[3, 3], spec.f32[2, 3])
    with pytest.raises(spec.PrimitiveError, match="one dtype"):
        spec.trace(la.triangular_solve_raw, spec.f32[3, 3], spec.f64[2, 3])
    with pytest.raises(spec.PrimitiveError, match="permutation_size"):
        spec.trace(lambda p: la.lu_pivots_to_permutation(p, 2), spec.i32[3])
    with pytest.raises(spec.PrimitiveError, match="only with respect to b"):
        spec.transpose(spec.trace(la.triangular_solve_raw, spec.f32[3, 3], spec.f32[2, 3]), [True, False])


# ==========================================================================
# gradients against float64 finite differences

def _fd_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


GRAD_CASES = {
    "cholesky": (lambda a: la.cholesky(a).sum(), lambda a: np.linalg.cholesky((a + a.T) / 2).sum(), _spd),
    "triangular_solve": (
        lambda a: (la.triangular_solve(a, a, left_side=True, lower=True) * a).sum(),
        lambda a: (np.linalg.solve(np.tril(a), a) * a).sum(), _dominant),
    "lu": (lambda a: (la.lu(a)[0] * la.lu(a)[0]).sum(),
           lambda a: (_run(la.lu, a)[0] ** 2).sum(), lambda n: _dominant(n)[::-1].copy()),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_grad_matches_finite_differences(name):
    fn, ref, draw = GRAD_CASES[name]
    a = draw(3)
    got, = spec.evaluate(spec.vjp_program(spec.trace(fn, _t(a))), a, np.ones(()))[-1:]
    np.testing.assert_allclose(got, _fd_grad(ref, a), rtol=1e-6, atol=1e-6)


# ==========================================================================
# with JAX

def _jax():
    return pytest.importorskip("jax")


def _canonical(prog):
    """A program's equations with its variables numbered by first use, a
    sub-program (a nested jit's) canonical too: equal for programs equal
    up to names (and param order)."""
    ids = {}

    def atom(a):
        if isinstance(a, Var):
            return ("var", ids.setdefault(a.id, len(ids)), str(a.type))
        return ("literal", repr(np.asarray(a.value).tolist()), str(a.type))

    def param(v):
        return _canonical(v) if isinstance(v, Program) else repr(v)
    [atom(v) for v in prog.inputs]
    eqns = [(e.primitive.name, sorted((k, param(v)) for k, v in e.params.items()),
             [atom(a) for a in e.inputs], [atom(v) for v in e.outputs]) for e in prog.eqns]
    return eqns, [atom(a) for a in prog.outputs]


def _assert_jvp_is_jax(jax_fn, spec_fn, *args):
    """spec.jvp of the traced spec_fn is JAX's jvp jaxpr of jax_fn, equation for equation."""
    jax = _jax()
    import oracle
    n = len(args)
    closed = jax.make_jaxpr(lambda *a: jax.jvp(jax_fn, a[:n], a[n:]))(*args, *args)
    want = oracle.from_jaxpr(closed)
    got = spec.jvp(spec.trace(spec_fn, *map(_t, args)))
    assert [e.primitive.name for e in got.eqns] == [e.primitive.name for e in want.eqns]
    assert _canonical(got) == _canonical(want), f"spec:\n{got}\njax:\n{want}"


@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("wrapper", [False, True])
def test_cholesky_jvp_is_jax(batch, wrapper):
    from jax import lax
    a = _spd(3, batch).astype(np.float32)
    if wrapper:        # lax.linalg.cholesky: symmetrize, cholesky_p, _tril
        _assert_jvp_is_jax(lax.linalg.cholesky, la.cholesky, a)
    else:
        _assert_jvp_is_jax(lax.linalg.cholesky_p.bind, la.cholesky_raw, a)


@pytest.mark.parametrize("shape", [(3, 2), (2, 3), (3, 3)])
@pytest.mark.parametrize("kw", TRSM_PARAMS, ids=_trsm_id)
def test_triangular_solve_jvp_is_jax(kw, shape):
    from jax import lax
    n = shape[0] if kw["left_side"] else shape[1]
    a, b = _dominant(n).astype(np.float32), RNG.normal(size=shape).astype(np.float32)
    _assert_jvp_is_jax(lambda x, y: lax.linalg.triangular_solve_p.bind(x, y, **kw),
                       lambda x, y: la.triangular_solve_raw(x, y, **kw), a, b)


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 4), (2, 3, 3), (2, 4, 3), (2, 2, 3, 4)])
def test_lu_jvp_is_jax(shape):
    from jax import lax
    if _jax_release() < (0, 5, 3):
        pytest.skip(f"jax {_jax().__version__} has the old batched rule (test_lu_old_jvp_is_jax_before_0_5_3)")
    a = RNG.normal(size=shape).astype(np.float32)
    _assert_jvp_is_jax(lambda x: lax.linalg.lu_p.bind(x)[0], lambda x: la.lu(x)[0], a)


LU_SHAPES = [(4, 4), (3, 5), (5, 3), (2, 4, 4), (2, 3, 4, 4), (2, 3, 5), (2, 5, 3)]


def _jax_release():
    return tuple(int(p) for p in _jax().__version__.split(".")[:3])


@pytest.mark.parametrize("shape", LU_SHAPES)
def test_lu_old_jvp_is_jax_before_0_5_3(shape):
    """Before jax 0.5.3 lu's JVP rule is one batched rule, the tangent's
    rows permuted first (spec.semantics: lu_jvp_vmaps_its_inner_rule=False):
    the spec's JVP program following it is JAX's jvp jaxpr equation for
    equation, its dead iota kept (0.4.32 to 0.5.2, the rule of 0.4.36). On
    0.4.25 the rule calls jnp.tril/triu, jitted functions, which inlined
    give the same equations for a matrix; a batch indexes with jnp.ix_ and
    0.4.25's broadcasting (squeeze), not modelled."""
    jax = _jax()
    import oracle
    from oracle.program_variants import jits_inlined
    from spec.semantics import following
    if _jax_release() >= (0, 5, 3):
        pytest.skip(f"jax {jax.__version__} vmaps _lu_jvp_inner (test_lu_jvp_is_jax)")
    if _jax_release() < (0, 4, 32) and len(shape) > 2:
        pytest.skip(f"jax {jax.__version__}'s batched rule indexes with jnp.ix_ (not modelled)")
    a = RNG.normal(size=shape).astype(np.float32)
    closed = jax.make_jaxpr(lambda x, t: jax.jvp(lambda y: jax.lax.linalg.lu_p.bind(y)[0], (x,), (t,)))(a, a)
    want, jits = jits_inlined(oracle.from_jaxpr(closed))
    assert jits == (4 if _jax_release() < (0, 4, 32) else 0)       # _tril, _triu, _tril, _triu
    with following(lu_jvp_vmaps_its_inner_rule=False):
        got = spec.jvp(spec.trace(lambda x: la.lu(x)[0], _t(a)))
    assert _canonical(got) == _canonical(want), f"spec:\n{got}\njax:\n{want}"


@pytest.mark.parametrize("shape", LU_SHAPES)
def test_lu_old_and_new_jvp_rules_give_the_same_tangents(shape):
    """Both JVP rules (spec.semantics: lu_jvp_vmaps_its_inner_rule) compute
    d(lu) = L tril(X, -1) + triu(X) U, X = L^{-1} P dA U^{-1}: the same
    values, and numpy's central differences of the factorization in
    float64 (pivots fixed for a small step)."""
    from spec.semantics import following
    a, t = RNG.normal(size=shape), RNG.normal(size=shape)
    prog = spec.trace(lambda x: la.lu(x)[0], _t(a))
    tangents = {}
    for new in (True, False):
        with following(lu_jvp_vmaps_its_inner_rule=new):
            tangents[new] = spec.evaluate(spec.jvp(prog), a, t)[-1]
    np.testing.assert_allclose(tangents[False], tangents[True], rtol=1e-12, atol=1e-12)
    eps = 1e-6
    fd = (_run(la.lu, a + eps * t)[0] - _run(la.lu, a - eps * t)[0]) / (2 * eps)
    np.testing.assert_allclose(tangents[False], fd, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("in_axes", [(None, 0), (0, None), (1, 2), (None, 1)])
@pytest.mark.parametrize("left_side", [True, False])
def test_triangular_solve_vmap_is_jax(in_axes, left_side):
    """_triangular_solve_batching_rule: with a unbatched, b's batch axis
    folds into one solve; otherwise both go to the front."""
    jax = _jax()
    import oracle
    from jax import lax
    kw = dict(left_side=left_side, lower=True, transpose_a=False, conjugate_a=False, unit_diagonal=False)
    a, b = _dominant(3), RNG.normal(size=(3, 2) if left_side else (2, 3))
    args = [np.stack([x] * 4, axis=ax).astype(np.float32) if ax is not None else x.astype(np.float32)
            for x, ax in zip((a, b), in_axes)]
    closed = jax.make_jaxpr(jax.vmap(lambda x, y: lax.linalg.triangular_solve_p.bind(x, y, **kw),
                                     in_axes=in_axes))(*args)
    want = oracle.from_jaxpr(closed)
    prog = spec.trace(lambda x, y: la.triangular_solve_raw(x, y, **kw), spec.f32[3, 3], _t(b.astype(np.float32)))
    got = spec.vmap(prog, in_axes=list(in_axes), out_axes=[0], axis_size=4)
    assert _canonical(got)[0] == _canonical(want)[0], f"spec:\n{got}\njax:\n{want}"
    np.testing.assert_allclose(spec.evaluate(got, *args)[0], np.asarray(jax.core.eval_jaxpr(
        closed.jaxpr, closed.consts, *args)[0]), rtol=2e-5, atol=2e-5)


def test_raw_values_are_jax_on_cpu():
    """The primitives as bound (no wrapper): cholesky's untouched upper
    triangle and NaNs, LU's pivots and permutation, all triangular_solve
    params, lu_pivots_to_permutation with a repeated pivot."""
    _jax()
    from jax import lax
    f32 = np.float32
    a = _spd(4).astype(f32)
    a[0, 2] = 5.0
    bad = -np.eye(3, dtype=f32)
    for x in (a, bad):
        np.testing.assert_allclose(_run(la.cholesky_raw, x)[0], np.asarray(lax.linalg.cholesky_p.bind(x)),
                                   rtol=2e-6, atol=2e-6)
    m = RNG.normal(size=(2, 5, 4)).astype(f32)
    got, want = _run(la.lu, m), lax.linalg.lu_p.bind(m)
    np.testing.assert_allclose(got[0], np.asarray(want[0]), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got[1], np.asarray(want[1]))
    np.testing.assert_array_equal(got[2], np.asarray(want[2]))
    piv = np.array([[2, 2, 3], [0, 3, 2]], np.int32)
    np.testing.assert_array_equal(_run(lambda p: la.lu_pivots_to_permutation(p, 5), piv)[0],
                                  np.asarray(lax.linalg.lu_pivots_to_permutation(piv, 5)))
    t, b = _dominant(3).astype(f32), RNG.normal(size=(3, 3)).astype(f32)
    for kw in TRSM_PARAMS:
        np.testing.assert_allclose(_run(lambda x, y: la.triangular_solve_raw(x, y, **kw), t, b)[0],
                                   np.asarray(lax.linalg.triangular_solve_p.bind(t, b, **kw)),
                                   rtol=1e-5, atol=1e-5)


def _user_functions():
    jnp = pytest.importorskip("jax.numpy")
    jsl = pytest.importorskip("jax.scipy.linalg")
    eye = np.eye(3, dtype=np.float32)
    a = RNG.normal(size=(3, 3)).astype(np.float32)
    b = RNG.normal(size=(3, 2)).astype(np.float32)
    return {
        "cholesky": (lambda x: jnp.linalg.cholesky(x @ x.T + 3 * eye).sum(), (a,)),
        "solve_triangular": (lambda x, y: jnp.sin(jsl.solve_triangular(x + 4 * eye, y, lower=True)).sum(),
                             (a, b)),
        "solve_triangular_trans_unit": (
            lambda x, y: (jsl.solve_triangular(x + 4 * eye, y, trans=1, unit_diagonal=True) ** 2).sum(), (a, b)),
        "cho_solve": (lambda x, y: jsl.cho_solve(jsl.cho_factor(x @ x.T + 3 * eye), y).sum(), (a, b)),
        "lu_factor": (lambda x: jnp.tanh(jsl.lu_factor(x + 4 * eye)[0]).sum(), (a,)),
        "scipy_lu": (lambda x: sum(p.sum() for p in jsl.lu(x + 4 * eye)), (a,)),
        "det": (lambda x: jnp.linalg.det(x + 4 * eye), (a,)),
    }


USER = ["cholesky", "solve_triangular", "solve_triangular_trans_unit", "cho_solve", "lu_factor", "scipy_lu",
        "det"]
POLICIES = ["none", "dots_saveable", "everything_saveable"]


def _policy(name):
    jax = _jax()
    return None if name == "none" else getattr(jax.checkpoint_policies, name)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", USER)
def test_oracle_check_passes(name, policy):
    import oracle
    fn, args = _user_functions()[name]
    report = oracle.check(fn, _policy(policy), *args)
    statuses = [(r.property, r.implementation, r.status) for r in report.results]
    assert {impl for _, impl, _ in statuses} >= {"remat2", "remat3"}
    assert all(s in ("ok", "known divergence") for _, _, s in statuses), statuses


@pytest.mark.parametrize("name", ["solve", "inv", "slogdet"])
def test_custom_linear_solve_users_pass(name):
    """jnp.linalg.solve (and inv, and slogdet's JVP) bind custom_linear_solve
    on the LU factors (spec/prims_linear_solve.py; all three policies in
    tests/test_prims_linear_solve.py): oracle.check passes."""
    jax = _jax()
    import jax.numpy as jnp
    import oracle
    eye = np.eye(3, dtype=np.float32)
    a = RNG.normal(size=(3, 3)).astype(np.float32)
    fn = {"solve": lambda x: jnp.linalg.solve(x + 4 * eye, x[0]).sum(),
          "inv": lambda x: jnp.linalg.inv(x + 4 * eye).sum(),
          "slogdet": lambda x: jnp.linalg.slogdet(x + 4 * eye)[1]}[name]
    report = oracle.check(fn, jax.checkpoint_policies.dots_saveable, a)
    statuses = [(r.property, r.implementation, r.status) for r in report.results]
    assert {impl for _, impl, _ in statuses} >= {"remat2", "remat3"}
    assert all(s in ("ok", "known divergence") for _, _, s in statuses), statuses
