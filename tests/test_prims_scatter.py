"""The combining scatters (spec/prims_scatter.py: scatter-mul, scatter-min,
scatter-max, scatter-sub) and the total-order comparisons (lt_to, le_to,
eq_to in spec/prims_elementwise.py) as user code reaches them.

Expected values come from sources independent of the rules under test:
numpy loops, the rank order of a sorted list, hand-derived tie shares, and
JAX itself (jaxprs, gradients, oracle.check).

* spec alone: the total order of floats; the refusals JAX has too (the
  scatter-mul gradient w.r.t. the updates without unique indices; no
  transpose of scatter-max); scatter-mul's transpose w.r.t. its updates.
* (a) each JVP rule emits JAX's equations, equation for equation (name and
  params): the residuals a checkpoint saves depend on exactly these;
* (b) oracle.check of user functions (`segment_max`, `.at[].max/multiply/
  subtract`, `jnp.interp`, `jnp.searchsorted`) under jax.checkpoint with
  policies None, dots_saveable and everything_saveable, and of their JAX
  gradients;
* (c) ties in scatter-max share the tangent as JAX's does; JAX's NaN
  tangent of an out-of-bounds clip-mode scatter-max, reproduced.
"""
from __future__ import annotations

import numpy as np
import pytest

import spec
from spec import prims_elementwise as pe
from spec import prims_scatter as ps
from spec.prims_indexing import ScatterDimensionNumbers

from test_prims_indexing import _primitive_names  # the primitives of a jaxpr, sub-jaxprs included

ROWS = ScatterDimensionNumbers((), (0,), (0,))          # x.at[i] on a vector
IDX = np.array([[1], [0], [1], [3]], np.int32)           # a duplicate (1)
SPECIALS = [-np.nan, -np.inf, -1.5, -0.0, 0.0, 2.0 ** -24, 2.0, np.inf, np.nan]   # ascending (a subnormal in f16)


def _specials(dtype):
    out = np.array(SPECIALS, dtype)
    out[0] = -np.abs(out[-1])            # -NaN: the sign bit set
    return out


# ==========================================================================
# spec alone

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_total_order_is_the_rank_order(dtype):
    """lt_to/le_to/eq_to of every pair of SPECIALS compare their positions in
    the list: -NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN."""
    v = _specials(dtype)
    n = len(v)
    a, b = np.repeat(v, n), np.tile(v, n)
    ra, rb = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    t = spec.ArrayType((n * n,), np.dtype(dtype))
    prog = spec.trace(lambda x, y: [pe.lt_to(x, y), pe.le_to(x, y), pe.eq_to(x, y)], t, t)
    lt, le, eq = spec.evaluate(prog, a, b)
    np.testing.assert_array_equal(lt, ra < rb)
    np.testing.assert_array_equal(le, ra <= rb)
    np.testing.assert_array_equal(eq, ra == rb)


def test_total_order_of_ints_is_the_usual_order():
    x, y = np.array([-3, 0, 2, 5], np.int32), np.array([0, 0, 3, -1], np.int32)
    prog = spec.trace(lambda a, b: [pe.lt_to(a, b), pe.le_to(a, 1)], spec.i32[4], spec.i32[4])
    lt, le = spec.evaluate(prog, x, y)
    np.testing.assert_array_equal(lt, x < y)
    np.testing.assert_array_equal(le, x <= 1)


def _vector_scatter(fn, n=4, m=4, **kw):
    return spec.trace(lambda x, i, u: fn(x, i, u, ROWS, **kw), spec.f32[n], spec.i32[m, 1], spec.f32[m])


@pytest.mark.parametrize("fn,ufunc", [(ps.scatter_mul, np.multiply), (ps.scatter_min, np.minimum),
                                      (ps.scatter_max, np.maximum), (ps.scatter_sub, np.subtract)])
def test_eval_combines_duplicates_in_order(fn, ufunc):
    x = np.array([1.5, -2.0, 0.5, 3.0], np.float32)
    u = np.array([2.0, -1.0, -3.0, 0.25], np.float32)
    want = x.copy()
    for k, r in enumerate(IDX[:, 0]):
        want[r] = ufunc(want[r], u[k])
    np.testing.assert_array_equal(spec.evaluate(_vector_scatter(fn), x, IDX, u)[0], want)


def test_scatter_mul_jvp_wrt_updates_needs_unique_indices():
    """JAX: NotImplementedError("scatter_mul gradients are only implemented
    if `unique_indices=True`"), raised only when the updates have a tangent."""
    prog = _vector_scatter(ps.scatter_mul)
    with pytest.raises(NotImplementedError, match="only implemented if `unique_indices=True`"):
        spec.jvp(prog)
    only_operand, _ = spec.jvp_program(prog, nonzeros=[True, False, False])
    x, u = np.float32([1, 2, 3, 4]), np.float32([2, 3, 5, 7])
    _, t = spec.evaluate(only_operand, x, IDX, u, np.float32([1, 1, 1, 1]))
    np.testing.assert_array_equal(t, [3, 2 * 5, 1, 7])      # d/dx of x * prod(updates landing)


def test_scatter_mul_transpose_wrt_updates():
    """Unique indices, the operand fixed: <ybar, f(u) - f(0)> = <tbar, u>
    (f is affine in u: the rows not updated are the operand's)."""
    rng = np.random.default_rng(0)
    idx = np.array([[2], [0]], np.int32)
    x, u, ybar = (rng.normal(size=s).astype(np.float64) for s in ((4,), (2,), (4,)))
    prog = spec.trace(lambda x, i, u: ps.scatter_mul(x, i, u, ROWS, unique_indices=True),
                      spec.f64[4], spec.i32[2, 1], spec.f64[2])
    tp = spec.transpose(prog, [False, False, True])
    (tbar,) = spec.evaluate(tp, x, idx, ybar)
    lin = spec.evaluate(prog, x, idx, u)[0] - spec.evaluate(prog, x, idx, np.zeros(2))[0]
    assert np.isclose(float(ybar @ lin), float(tbar @ u), rtol=1e-12)
    np.testing.assert_allclose(tbar, ybar[[2, 0]] * x[[2, 0]])
    with pytest.raises(NotImplementedError, match="only implemented if `unique_indices=True`"):
        spec.transpose(_vector_scatter(ps.scatter_mul, m=4), [False, False, True])


def test_scatter_max_has_no_transpose():
    with pytest.raises(Exception, match="scatter-max"):
        spec.transpose(_vector_scatter(ps.scatter_max), [True, False, True])


def test_scatter_max_ties_share_the_tangent():
    """x = [1, 0], updates [1, 1, -1] at rows [0, 0, 1]: at row 0 the
    operand and two updates tie (a third of the tangent each); row 1 keeps
    the operand (the update -1 loses)."""
    prog = spec.trace(lambda x, u: ps.scatter_max(x, np.int32([[0], [0], [1]]), u, ROWS).sum(),
                      spec.f32[2], spec.f32[3])
    gx, gu = spec.evaluate(spec.grad(prog, (0, 1)), np.float32([1, 0]), np.float32([1, 1, -1]))
    np.testing.assert_allclose(gx, [1 / 3, 1], rtol=1e-6)
    np.testing.assert_allclose(gu, [1 / 3, 1 / 3, 0], rtol=1e-6)


# ==========================================================================
# with JAX

def _jax():
    return pytest.importorskip("jax")


def _scatters():
    from jax import lax
    return {"scatter-mul": (ps.scatter_mul, lax.scatter_mul), "scatter-min": (ps.scatter_min, lax.scatter_min),
            "scatter-max": (ps.scatter_max, lax.scatter_max), "scatter-sub": (ps.scatter_sub, lax.scatter_sub)}


# (name, kwargs, which of operand/updates have tangents)
JVP_CASES = [
    ("scatter-max", {}, (True, True)), ("scatter-max", {}, (True, False)), ("scatter-max", {}, (False, True)),
    ("scatter-max", {"mode": "clip", "indices_are_sorted": True}, (True, True)),
    ("scatter-min", {}, (True, True)), ("scatter-min", {"unique_indices": True}, (False, True)),
    ("scatter-mul", {"unique_indices": True}, (True, True)), ("scatter-mul", {}, (True, False)),
    ("scatter-mul", {"unique_indices": True}, (False, True)),
    ("scatter-sub", {}, (True, True)), ("scatter-sub", {"mode": "clip"}, (False, True)),
]


def _eqns(prog):
    return [(e.primitive.name, {k: v for k, v in e.params.items()}) for e in prog.eqns]


@pytest.mark.parametrize("name,kw,nonzero", JVP_CASES, ids=[f"{n}-{sorted(k)}-{nz}" for n, k, nz in JVP_CASES])
def test_jvp_emits_jax_equations(name, kw, nonzero):
    """spec.jvp_program's equations == those of JAX's jax.jvp jaxpr (imported
    with oracle.from_jaxpr), in order, params included."""
    jax = _jax()
    import jax.numpy as jnp
    import oracle
    spec_fn, jax_fn = _scatters()[name]
    idx = IDX[:3] if kw.get("unique_indices") else IDX
    x, u = np.float32([1.5, -2.0, 0.5, 3.0]), np.float32([2.0, -1.0, -3.0, 0.25])[:len(idx)]
    prog = spec.trace(lambda x, i, u: spec_fn(x, i, u, ROWS, **kw), spec.f32[4], spec.i32[len(idx), 1],
                      spec.f32[len(idx)])
    jp, _ = spec.jvp_program(prog, nonzeros=[nonzero[0], False, nonzero[1]])
    dn = jax.lax.ScatterDimensionNumbers((), (0,), (0,))

    def jax_jvp(x, i, u, *ts):
        primals = [v for v, nz in zip((x, u), nonzero) if nz]

        def f(*diff):
            it = iter(diff)
            xx, uu = (next(it) if nz else v for v, nz in zip((x, u), nonzero))
            return jax_fn(xx, i, uu, dn, **kw)
        return jax.jvp(f, tuple(primals), ts)
    ts = [jnp.ones_like(v) for v, nz in zip((x, u), nonzero) if nz]
    back = oracle.from_jaxpr(jax.make_jaxpr(jax_jvp)(x, idx, u, *ts))
    assert [n for n, _ in _eqns(back)] == [n for n, _ in _eqns(jp)]
    assert _eqns(back) == _eqns(jp)


@pytest.mark.parametrize("name", ["lt_to", "le_to", "eq_to"])
def test_comparison_jvp_emits_jax_equations(name):
    jax = _jax()
    import oracle
    from jax._src.lax import lax as lax_internal
    jax_p, spec_op = getattr(lax_internal, f"{name}_p"), getattr(pe, name)
    prog = spec.trace(lambda x, y: x * pe.convert_element_type(spec_op(x, y), np.float32), spec.f32[3], spec.f32[3])

    def f(x, y):
        return x * jax.lax.convert_element_type(jax_p.bind(x, y), np.float32)
    x, y = np.float32([1, -0.0, np.nan]), np.float32([2, 0.0, 1])
    back = oracle.from_jaxpr(jax.make_jaxpr(lambda x, y, tx, ty: jax.jvp(f, (x, y), (tx, ty)))(x, y, x, y))
    assert _eqns(back) == _eqns(spec.jvp(prog))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_total_order_agrees_with_xla(dtype):
    """XLA's TOTALORDER comparisons (JAX's lt_to_p, le_to_p, eq_to_p) on
    every pair of SPECIALS, against the spec's evaluation."""
    jax = _jax()
    from jax._src.lax import lax as lax_internal
    v = _specials(dtype)
    a, b = np.repeat(v, len(v)), np.tile(v, len(v))
    t = spec.ArrayType(a.shape, np.dtype(dtype))
    for name in ("lt_to", "le_to", "eq_to"):
        got = spec.evaluate(spec.trace(getattr(pe, name), t, t), a, b)[0]
        want = jax.jit(getattr(lax_internal, f"{name}_p").bind)(a, b)
        np.testing.assert_array_equal(got, np.asarray(want), err_msg=name)


def _user_functions():
    import jax
    import jax.numpy as jnp
    return {
        "segment-max": lambda x: jax.ops.segment_max(x * 2, jnp.array([0, 1, 0]), 2).sum(),
        "segment-min-sin": lambda x: jnp.sin(jax.ops.segment_min(x ** 2, jnp.array([1, 1, 0]), 2)).sum(),
        "at-max": lambda x: x.at[jnp.array([1, 0, 2])].max(jnp.sin(x)).sum(),
        "at-min-duplicates": lambda x: jnp.cos(x.at[jnp.array([2, 0, 2])].min(x[::-1] * 0.5)).sum(),
        "at-multiply": lambda x: x.at[0].multiply(x[1]).sum(),
        "at-multiply-rows": lambda x: jnp.sin(x.at[jnp.array([2, 0])].multiply(x[:2] + 1.0, unique_indices=True)).sum(),
        "at-subtract": lambda x: x.at[1:].subtract(x[:-1] ** 2).sum(),
        "at-subtract-duplicates": lambda x: jnp.tanh(x.at[jnp.array([0, 0, 2])].subtract(jnp.exp(x))).sum(),
        "interp": lambda x: jnp.interp(x, jnp.arange(4.), jnp.cos(jnp.arange(4.))).sum(),
        "searchsorted-index": lambda x: (x * jnp.cos(jnp.arange(4.))[
            jnp.searchsorted(jnp.array([0.5, 1.0, 1.5]), x)]).sum(),
        "digitize": lambda x: (jnp.sin(x) * jnp.digitize(x, jnp.array([0.25, 0.5, 1.0]))).sum(),
    }


X = np.array([0.3, 1.2, 0.7], np.float32)
USER = ["segment-max", "segment-min-sin", "at-max", "at-min-duplicates", "at-multiply", "at-multiply-rows",
        "at-subtract", "at-subtract-duplicates", "interp", "searchsorted-index",
        "digitize"]
EMITS = {"segment-max": "scatter-max", "segment-min-sin": "scatter-min", "at-max": "scatter-max",
         "at-min-duplicates": "scatter-min", "at-multiply": "scatter-mul", "at-multiply-rows": "scatter-mul",
         "at-subtract": "scatter-sub",
         "at-subtract-duplicates": "scatter-sub", "interp": "lt_to", "searchsorted-index": "le_to",
         "digitize": "lt_to"}
OK = {"ok", "known divergence"}
# remat3 (jax 0.10.2) applies a policy to dots and names only (oracle/divergences.py)
ALLOWED = {"None": set(), "dots_saveable": set(),
           "everything_saveable": {"remat3-policy-only-for-dots-and-names"},
           # a gradient program: remat3's barrier goes on the inputs its backward pass reads
           "grad": {"remat3-barrier-iff-backward-reads-checkpoint-inputs"}}


def _policy(name):
    cp = _jax().checkpoint_policies
    return {"None": None, "dots_saveable": cp.dots_saveable, "everything_saveable": cp.everything_saveable}[name]


def _assert_passes(report, policy_name, implementations=("remat2", "remat3")):
    statuses = [(r.property, r.implementation, r.status) for r in report.results]
    assert {s for _, _, s in statuses} <= OK, statuses
    assert {d[0] for d in report.known_divergences} <= ALLOWED[policy_name], str(report)
    assert set(implementations) == {i for _, i, _ in statuses}, statuses
    assert any(p == "residuals" and s == "ok" for p, _, s in statuses), statuses


@pytest.mark.parametrize("name", USER)
def test_user_function_emits(name):
    jax = _jax()
    assert EMITS[name] in _primitive_names(jax.make_jaxpr(_user_functions()[name])(X))


@pytest.mark.parametrize("policy_name", ["None", "dots_saveable", "everything_saveable"])
@pytest.mark.parametrize("name", USER)
def test_oracle_check_user_function(name, policy_name):
    _jax()
    import oracle
    _assert_passes(oracle.check(_user_functions()[name], _policy(policy_name), X), policy_name)


GRADS = ["segment-max", "at-max", "at-multiply", "at-multiply-rows", "at-subtract-duplicates", "interp"]


@pytest.mark.parametrize("name", GRADS)
def test_oracle_check_grad(name):
    """JAX's gradient programs (scatter-mul's transpose is a scatter-mul,
    scatter-sub's a negated gather), imported and checked as functions."""
    jax = _jax()
    import oracle
    _assert_passes(oracle.check(jax.grad(_user_functions()[name]), None, X), "grad")


def _const_factors(x):
    """x.at[i].multiply(c) with duplicate rows and constant factors c: the
    factors have no tangent, so JAX differentiates it (remat2 included)."""
    import jax.numpy as jnp
    return jnp.sin(x.at[jnp.array([0, 1, 0])].multiply(jnp.array([2.0, 3.0, 0.5]))).sum()


@pytest.mark.parametrize("policy_name", ["None", "everything_saveable"])
def test_oracle_check_constant_factors_remat2(policy_name):
    _jax()
    import oracle
    _assert_passes(oracle.check(_const_factors, _policy(policy_name), X, implementations=("remat2",)),
                   policy_name, ("remat2",))


def test_oracle_check_constant_factors_remat3():
    """jax 0.10.2's remat3 differentiates a checkpoint's body with respect to
    the constant factors it closes over too, so JAX raises scatter-mul's
    NotImplementedError where remat2 and the spec compute: the known
    divergence remat3-differentiates-a-checkpoint-s-constants, on every
    property that differentiates."""
    _jax()
    import oracle
    report = oracle.check(_const_factors, None, X, implementations=("remat3",))
    statuses = {r.property: (r.status, r.detail) for r in report.results}
    for prop in ("residuals", "jvp", "vjp", "second_order"):
        assert statuses[prop] == ("known divergence", "remat3-differentiates-a-checkpoint-s-constants"), report
    assert statuses["values"][0] == "ok"


def test_segment_prod_gradient_is_refused_by_both():
    """jax.ops.segment_prod has no gradient in JAX (scatter-mul without
    unique indices); the spec refuses the imported program's JVP alike."""
    jax = _jax()
    import jax.numpy as jnp
    import oracle
    f = lambda x: jax.ops.segment_prod(x, jnp.array([0, 1, 0]), 2).sum()    # noqa: E731
    with pytest.raises(NotImplementedError, match="unique_indices"):
        jax.grad(f)(X)
    with pytest.raises(NotImplementedError, match="only implemented if `unique_indices=True`"):
        spec.grad(oracle.trace_jax(f, X))


# ties in scatter-max: values at equal positions (the gradient depends on the winners)
TIES = [
    (np.float32([1.0, 0.0]), np.array([0, 0, 1]), np.float32([1.0, 1.0, -1.0])),
    (np.float32([0.0, 2.0, 2.0]), np.array([1, 1, 2, 0]), np.float32([2.0, 2.0, 1.0, 0.0])),
]


@pytest.mark.parametrize("case", range(len(TIES)))
def test_scatter_max_ties_match_jax_gradient(case):
    jax = _jax()
    import oracle
    x, i, u = TIES[case]
    f = lambda x, u: x.at[i].max(u).sum()                                      # noqa: E731
    prog = oracle.trace_jax(f, x, u)
    assert "scatter-max" in [e.primitive.name for e in prog.eqns]
    got = spec.evaluate(spec.grad(prog, (0, 1)), x, u)
    want = jax.grad(f, argnums=(0, 1))(x, u)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-6)
    _assert_passes(oracle.check(lambda x, u: jax.numpy.sin(x.at[i].max(u)).sum(), None, x, u), "None")


def test_clip_mode_out_of_bounds_tangent_is_nan_as_in_jax():
    """JAX's _scatter_extremal_jvp counts updates with FILL_OR_DROP
    scatter-adds whatever the mode: a clip-mode window clamped into bounds
    counts 0 references, and its position's tangent is NaN. The spec keeps
    JAX's rule, so its tangent is NaN at the same positions."""
    jax = _jax()
    dn = jax.lax.ScatterDimensionNumbers((1,), (), (0,))
    rng = np.random.default_rng(0)
    x, u = rng.normal(size=(5,)).astype(np.float32), rng.normal(size=(1, 2)).astype(np.float32)
    idx = np.array([[7]], np.int32)
    f = lambda x, u: jax.lax.scatter_max(x, idx, u, dn, mode="clip")          # noqa: E731
    _, want = jax.jvp(f, (x, u), (np.ones_like(x), np.ones_like(u)))
    prog = spec.trace(lambda x, u: ps.scatter_max(x, idx, u, ScatterDimensionNumbers((1,), (), (0,)), mode="clip"),
                      spec.f32[5], spec.f32[1, 2])
    _, got = spec.evaluate(spec.jvp(prog), x, u, np.ones_like(x), np.ones_like(u))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(np.asarray(want)))
    assert np.isnan(got[3:]).all() and not np.isnan(got[:3]).any()
    np.testing.assert_array_equal(got[:3], np.asarray(want)[:3])
