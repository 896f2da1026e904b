"""Every registered primitive example (`spec.core.examples`, declared in the
primitive's block) is checked against its independent numpy reference:

* evaluation in float32 (and exactly for integer/bool outputs);
* the JVP against float64 central finite differences of the reference;
* transposition, for each linear mask: <ybar, J t> == <J^T ybar, t>;
* vmap against a loop over the batch, batch axis 0 and 1;
* with jax installed: JAX's values for the emitted program equal the
  reference, the program imports back from JAX's jaxpr to the same
  program, and `oracle.check` agrees on the residuals and values.

Tolerances are those of tests/test_primitives.py (written down there once);
tests/test_batching.py checks vmap of every example at more batch axes
(last, alternating, unbatched operands).
"""
from __future__ import annotations

import numpy as np
import pytest

import spec
from spec.core import examples, jax_facts
from spec.examples import inputs, program
from spec.ir import ArrayType, is_float
from spec.batching import AxesRefused

from test_primitives import TRANSPOSE_EPS_FACTOR, as_list, assert_eval_close, assert_fd_close, fd_jvp

EXAMPLES = [(p, ex) for p, exs in examples.items() for ex in exs]
IDS = [f"{p.name}-{ex.name}" for p, ex in EXAMPLES]
B = 3


def _exact(vals):
    return [v.astype(np.float64) if is_float(v.dtype) else v for v in vals]


@pytest.mark.parametrize("prim,ex", EXAMPLES, ids=IDS)
def test_eval_f32_matches_reference(prim, ex):
    vals = inputs(ex, np.random.default_rng(0), "f32")
    prog = program(ex, vals)
    spec.check_program(prog)
    assert any(e.primitive is prim for e in prog.eqns), f"{ex.name} does not use {prim.name}"
    got = spec.evaluate(prog, *vals)
    exact = _exact(vals)        # the reference sees the same values, exactly, in float64
    want = as_list(ex.reference(*exact))
    scales = ([float(np.max(np.abs(s))) for s in as_list(ex.reference(*[np.abs(v) for v in exact]))]
              if ex.abs_scale else [None] * len(want))
    assert len(got) == len(want)
    for g, w, t, s in zip(got, want, prog.out_types, scales):
        assert g.dtype == t.dtype and g.shape == t.shape
        assert_eval_close(g, w if is_float(g.dtype) else np.asarray(w).astype(g.dtype), g.dtype,
                          cond=ex.cond, scale=s)


@pytest.mark.parametrize("prim,ex", EXAMPLES, ids=IDS)
def test_jvp_matches_finite_differences(prim, ex):
    rng = np.random.default_rng(1)
    vals = inputs(ex, rng, "f64")
    prog = program(ex, vals)
    jp = spec.jvp(prog)
    spec.check_program(jp)
    float_idx = [i for i, v in enumerate(vals) if is_float(v.dtype)]
    ts = [rng.normal(size=vals[i].shape).astype(vals[i].dtype) for i in float_idx]
    assert jp.in_types == prog.in_types + [prog.in_types[i] for i in float_idx]
    outs = spec.evaluate(jp, *vals, *ts)
    primals, tangents = outs[:len(prog.outputs)], outs[len(prog.outputs):]
    float_outs = [t for t in prog.out_types if is_float(t.dtype)]
    assert [ArrayType(t.shape, t.dtype) for t in tangents] == float_outs
    exact = _exact(vals)
    for p, w in zip(primals, as_list(ex.reference(*exact))):     # the JVP's primal outputs are the values
        assert_fd_close(p, w) if is_float(p.dtype) else np.testing.assert_array_equal(p, w)
    if ex.tangent == "zero" or not float_idx:
        want = [np.zeros(t.shape) for t in float_outs]
    else:
        fd = fd_jvp(ex.reference, exact, [t.astype(np.float64) for t in ts], float_idx)
        want = [d for d, t in zip(fd, prog.out_types) if is_float(t.dtype)]
    for g, w in zip(tangents, want):
        assert_fd_close(g, w)


TRANSPOSE = [(p, ex, mask) for p, ex in EXAMPLES for mask in ex.linear]


@pytest.mark.parametrize("prim,ex,mask", TRANSPOSE,
                         ids=[f"{p.name}-{ex.name}-{''.join('L' if m else 'n' for m in mask)}"
                              for p, ex, mask in TRANSPOSE])
def test_transpose_dot_product_identity(prim, ex, mask):
    rng = np.random.default_rng(2)
    vals = inputs(ex, rng, "f64")
    prog = program(ex, vals)
    for i, lin in enumerate(mask):      # linear inputs get random directions t (the others keep their values)
        if lin:
            vals[i] = rng.normal(size=vals[i].shape).astype(vals[i].dtype)
    tp = spec.transpose(prog, mask)
    spec.check_program(tp)
    jt = spec.evaluate(prog, *vals)
    ybar = [rng.normal(size=t.shape).astype(t.dtype) for t in prog.out_types]
    tbar = spec.evaluate(tp, *[v for v, lin in zip(vals, mask) if not lin], *ybar)
    lin_vals = [v for v, lin in zip(vals, mask) if lin]
    assert [ArrayType(b.shape, b.dtype) for b in tbar] == [ArrayType(v.shape, v.dtype) for v in lin_vals]

    def inner(a, b):
        prods = [np.asarray(x, np.float64) * np.asarray(y, np.float64) for x, y in zip(a, b)]
        return sum(float(p.sum()) for p in prods), sum(float(np.abs(p).sum()) for p in prods)
    (lhs, lhs_abs), (rhs, rhs_abs) = inner(ybar, jt), inner(tbar, lin_vals)
    eps = max(float(np.finfo(v.dtype).eps) for v in vals + jt if is_float(v.dtype))   # the least precise dtype
    assert abs(lhs - rhs) <= TRANSPOSE_EPS_FACTOR * eps * (lhs_abs + rhs_abs) + 1e-300, (lhs, rhs)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("prim,ex", EXAMPLES, ids=IDS)
def test_vmap_equals_loop(prim, ex, axis):
    rng = np.random.default_rng(3)
    members = [inputs(ex, rng, "f64") for _ in range(B)]
    prog = program(ex, members[0])
    in_axes = [min(axis, v.ndim) for v in members[0]]
    stacked = [np.stack([m[i] for m in members], axis=a) for i, a in enumerate(in_axes)]
    try:
        vp = spec.vmap(prog, in_axes=in_axes, out_axes=[0] * len(prog.outputs), axis_size=B)
    except AxesRefused as e:     # JAX's rule refuses these axes too (tie)
        pytest.skip(f"JAX's batching rule refuses these axes too: {e}")
    got = spec.evaluate(vp, *stacked)
    per = [spec.evaluate(prog, *m) for m in members]
    for k, g in enumerate(got):
        want = np.stack([p[k] for p in per])
        if is_float(want.dtype):
            np.testing.assert_allclose(np.asarray(g, np.float64), want, rtol=1e-12, atol=1e-12)
        else:
            np.testing.assert_array_equal(g, want)


def test_every_example_primitive_has_jax_facts():
    assert not [p.name for p in examples if p not in jax_facts]


# --------------------------------------------------------------------------
# with JAX: values, the round trip and oracle.check

def _jax():
    return pytest.importorskip("jax")


@pytest.mark.parametrize("prim,ex", EXAMPLES, ids=IDS)
def test_jax_agrees(prim, ex):
    jax = _jax()
    import oracle
    from oracle.to_jax import unbindable
    vals = inputs(ex, np.random.default_rng(4), "f32")
    prog = program(ex, vals)
    # float64 operands or results need x64 (without it JAX makes them float32)
    wide = any(t.dtype == np.float64 for t in prog.in_types + prog.out_types)
    with oracle.jax_api.enable_x64(wide):
        why = unbindable(prog)
        if why:     # e.g. lax.split on a release before it, or an emitter's library not installed
            pytest.skip(f"the installed JAX cannot bind this example: {why}")
        if _threefry_differs(prog):
            pytest.skip("jax_threefry_partitionable is off: the key's bits are another algorithm's "
                        "(known divergence threefry-not-partitionable)")
        _jax_agrees(jax, oracle, ex, prog, vals)


def _threefry_differs(prog) -> bool:
    """The example derives bits from a threefry key on a release where the
    known divergence threefry-not-partitionable holds (the flag off)."""
    from oracle.divergences import DIVERGENCES, THREEFRY_DERIVATIONS
    from spec.ir import subprograms
    derives = lambda p: any(e.primitive.name in THREEFRY_DERIVATIONS
                            or any(derives(b) for _, b in subprograms(e.params)) for e in p.eqns)
    return derives(prog) and next(d for d in DIVERGENCES if d.name == "threefry-not-partitionable").active()


def _jax_agrees(jax, oracle, ex, prog, vals):
    fn = oracle.to_jax(prog)
    got = jax.jit(lambda *a: fn(*a))(*vals)
    for g, w in zip(got, as_list(ex.reference(*_exact(vals)))):
        g = np.asarray(g)
        assert_eval_close(g, w if is_float(g.dtype) else np.asarray(w).astype(g.dtype), g.dtype, cond=ex.cond)
    back = oracle.from_jaxpr(jax.make_jaxpr(fn)(*vals))
    assert [e.primitive.name for e in back.eqns] == [e.primitive.name for e in prog.eqns]
    props = ("residuals", "values") + (("jvp",) if ex.tangent == "fd" else ())
    oracle.check(fn, oracle.AS_IS, *vals, properties=props)


# --------------------------------------------------------------------------
# exact: the JVP rule == sympy.diff of the evaluation rule, where the
# primitive evaluates symbolically (otherwise finite differences above)

SMALL = 6    # elements per operand for the symbolic check (sympy is slow)


@pytest.mark.parametrize("prim,ex", EXAMPLES, ids=IDS)
def test_jvp_is_exact_where_symbolic(prim, ex):
    sympy = pytest.importorskip("sympy")
    from spec.arrays import SymbolicError
    from test_rules_exact import directional_derivative, exactly_zero, symbols_for
    if ex.tangent != "fd" or any(int(np.prod(s)) > SMALL for s, _, _ in ex.operands):
        pytest.skip("larger than the symbolic check's budget: finite differences only")
    vals = inputs(ex, np.random.default_rng(5), "f64")
    prog = program(ex, vals)
    if any(e.primitive.name == "stop_gradient" for e in prog.eqns):
        pytest.skip("stop_gradient evaluates as the identity: sympy.diff cannot see it")
    fixed = {i: v for i, v in enumerate(vals) if not is_float(v.dtype)}
    xs = symbols_for(prog.in_types, "x", fixed)
    ts = symbols_for(prog.in_types, "t")
    which = [i for i, t in enumerate(prog.in_types) if is_float(t.dtype)]
    try:
        primal = spec.evaluate(prog, *xs)
        outs = spec.evaluate(spec.jvp(prog), *xs, *[ts[i] for i in which])
    except (SymbolicError, TypeError, AttributeError) as e:
        pytest.skip(f"{prim.name} has no symbolic evaluation ({type(e).__name__}): finite differences only")
    float_outs = [i for i, t in enumerate(prog.out_types) if is_float(t.dtype)]
    for i, tan in zip(float_outs, outs[len(prog.outputs):]):
        for idx in np.ndindex(*np.shape(tan)):
            want = directional_derivative(np.asarray(primal[i])[idx], xs, ts, which)
            diff = sympy.sympify(np.asarray(tan)[idx]) - want
            assert exactly_zero(diff) or _zero_but_for_float_constants(diff, want), (prim.name, idx, diff)


def _zero_but_for_float_constants(diff, want) -> bool:
    """A rule's constants are float64 literals (2/sqrt(pi) in erf's JVP is a
    rational to 53 bits): the difference, at random points in 40 digits, is
    within 1e-14 of the derivative's size."""
    sympy = pytest.importorskip("sympy")
    rng = np.random.default_rng(6)
    free = sorted(diff.free_symbols | want.free_symbols, key=str)
    for _ in range(3):
        at = {s: sympy.Rational(int(rng.integers(-150, 150)), 100) for s in free}
        d, w = abs(diff.subs(at).evalf(40)), abs(want.subs(at).evalf(40))
        if d > 1e-14 * max(w, 1):
            return False
    return True
