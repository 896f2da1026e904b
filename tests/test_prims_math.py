"""The math, reduction, cumulative and sorting primitives of
spec/prims_math.py and spec/prims_reductions.py.

(a) Exact proofs of their JVP rules (tests/test_rules_exact.py's machinery:
    the tangent the spec's JVP program computes, evaluated on sympy
    symbols, equals sympy.diff of the evaluated primal). Piecewise-constant
    primitives are decided at points away from their jumps; rules whose JAX
    form carries a rounded constant (exp2's log 2, cbrt's 1/3, erf_inv's
    sqrt(pi)/2) are exact up to that literal's rounding. Whole programs:
    the spec's gradient under remat policies equals sympy's.
(b) JAX's conventions where the derivative is a choice (ties, jumps) and
    exact values at special inputs (infinities, NaN, signed zeros, halves).
(c) With JAX: every example's JVP program has the equations of JAX's jvp
    jaxpr (the rule *shape*), and oracle.check agrees on small jnp programs
    (optax-style losses, cumulative and sorting models) under the policies
    None, dots_saveable and everything_saveable.
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import spec
from spec import ops
from spec import prims_math as M
from spec import prims_reductions as R
from spec.core import examples
from spec.symbolic import array

import test_rules_exact as exact
from test_rules_exact import JvpCase

f64, f32, i32 = spec.f64, spec.f32, spec.i32
S = f64[()]


def _gather_takes_u32() -> bool:
    """Whether spec/prims_indexing.py's gather accepts uint32 indices (sort's
    JVP gathers with JAX's uint32 permutation)."""
    try:
        spec.jvp(spec.trace(lambda x: R.sort(x), f64[2]))
        return True
    except spec.PrimitiveError as e:
        return "gather" not in str(e)


GATHER_U32 = _gather_takes_u32()
NEEDS_U32_GATHER = pytest.mark.xfail(
    not GATHER_U32, strict=True, raises=spec.PrimitiveError,
    reason="sort's JVP (JAX's _sort_jvp) gathers the tangents with a uint32 permutation; "
           "spec/prims_indexing.py's gather accepts int32 indices only")


# ==========================================================================
# (a) exact JVP rules

def _at(*vals):
    return tuple(vals)


MATH_JVP_CASES = [
    # ---- smooth unary (every real point; acosh composed to stay above 1) ----
    *[JvpCase(n, n, getattr(M, n), [S]) for n in ("tan", "sinh", "cosh", "asinh", "atan", "expm1")],
    *[JvpCase(n, n, getattr(M, n), [S]) for n in ("asin", "acos", "atanh")],
    JvpCase("acosh-of-x2-plus", "acosh", lambda x: M.acosh(x * x + 1.5), [S]),
    JvpCase("tan-array", "tan", M.tan, [f64[2]]),
    # ---- binary ----
    JvpCase("atan2", "atan2", M.atan2, [S, S]),
    JvpCase("atan2-scalar-y", "atan2", M.atan2, [f64[2], S]),
    JvpCase("pow-float", "pow", M.pow, [S, S], at=_at(1.5, 0.7)),
    JvpCase("pow-float-arrays", "pow", M.pow, [f64[2], f64[2]], at=_at([0.5, 2.0], [2.0, -1.5])),
    JvpCase("pow-scalar-exponent", "pow", M.pow, [f64[2], S], at=_at([0.5, 2.0], 3.0)),
    JvpCase("pow-literal-exponent", "pow", lambda x: M.pow(x, 2.5), [S]),
    JvpCase("pow-i32-exponent", "pow", M.pow, [f64[3], i32[3]], fixed={1: np.array([3, 0, -2], np.int32)}),
    JvpCase("pow-i32-scalar-exponent", "pow", M.pow, [f64[2], i32[()]], fixed={1: np.int32(2)}),
    JvpCase("rem", "rem", M.rem, [f64[2], f64[2]], at=_at([3.7, -2.5], [1.5, 1.0])),
    JvpCase("rem-negative-divisor", "rem", M.rem, [S, S], at=_at(-3.7, -1.5)),
    # ---- piecewise constant: a zero tangent (ad.defjvp_zero), off their jumps ----
    JvpCase("floor", "floor", M.floor, [f64[2]], at=_at([0.3, -1.7]), expect="zero"),
    JvpCase("ceil", "ceil", M.ceil, [f64[2]], at=_at([0.3, -1.7]), expect="zero"),
    JvpCase("round-away", "round", lambda x: M.round(x, M.AWAY_FROM_ZERO), [f64[2]], at=_at([0.3, -1.7]),
            expect="zero"),
    JvpCase("round-even", "round", lambda x: M.round(x, M.TO_NEAREST_EVEN), [f64[2]], at=_at([2.7, -0.2]),
            expect="zero"),
    JvpCase("sign", "sign", M.sign, [f64[2]], at=_at([0.3, -1.7]), expect="zero"),
    JvpCase("is_finite", "is_finite", M.is_finite, [S], expect="none"),
    # a piecewise constant inside a smooth program: d(x floor x) = floor(x) dx there
    JvpCase("x-times-floor-x", "floor", lambda x: x * M.floor(x), [S], at=_at(2.25)),
    # ---- reductions ----
    JvpCase("reduce_min-axis1", "reduce_min", lambda x: R.reduce_min(x, (1,)), [f64[2, 3]],
            at=_at([[0.0, 2.0, -1.0], [3.0, -1.5, 0.5]])),
    JvpCase("reduce_min-all", "reduce_min", lambda x: R.reduce_min(x, (0, 1)), [f64[2, 2]],
            at=_at([[0.0, 1.0], [-2.5, 3.0]])),
    JvpCase("reduce_prod-odd", "reduce_prod", lambda x: R.reduce_prod(x, (0,)), [f64[5]]),
    JvpCase("reduce_prod-middle", "reduce_prod", lambda x: R.reduce_prod(x, (1,)), [f64[2, 3, 2]]),
    JvpCase("reduce_prod-two-axes", "reduce_prod", lambda x: R.reduce_prod(x, (0, 2)), [f64[2, 1, 3]]),
    # ---- cumulative (both directions, odd and even lengths) ----
    *[JvpCase(f"cumsum-axis{a}-rev{r}", "cumsum", (lambda a, r: lambda x: R.cumsum(x, a, r))(a, r),
              [f64[2, 3]]) for a in (0, 1) for r in (False, True)],
    *[JvpCase(f"cumprod-n{n}-rev{r}", "cumprod", (lambda r: lambda x: R.cumprod(x, 0, r))(r), [f64[n]])
      for n in (4, 5) for r in (False, True)],
    JvpCase("cumprod-axis1", "cumprod", lambda x: R.cumprod(x, 1), [f64[2, 3]]),
    JvpCase("cummax", "cummax", lambda x: R.cummax(x, 0), [f64[5]], at=_at([0.5, 2.0, -1.0, 3.0, 1.5])),
    JvpCase("cummax-reverse", "cummax", lambda x: R.cummax(x, 0, True), [f64[4]],
            at=_at([0.5, 2.0, -1.0, 1.5])),
    JvpCase("cummin-axis1", "cummin", lambda x: R.cummin(x, 1), [f64[2, 3]],
            at=_at([[0.5, -2.0, 1.0], [-1.0, 0.0, -3.0]])),
    JvpCase("cummin-reverse", "cummin", lambda x: R.cummin(x, 0, True), [f64[5]],
            at=_at([0.5, 2.0, -1.0, 3.0, 1.5])),
    # ---- top_k (gathers the tangent at the chosen indices) ----
    JvpCase("top_k", "top_k", lambda x: R.top_k(x, 2)[0], [f64[4]], at=_at([0.5, 2.0, -1.0, 1.5])),
    JvpCase("top_k-axis0", "top_k", lambda x: R.top_k(x, 1, axis=0)[0], [f64[3, 2]],
            at=_at([[0.5, 2.0], [-1.0, 3.0], [1.5, 0.0]])),
]
assert len({c.id for c in MATH_JVP_CASES}) == len(MATH_JVP_CASES)

# sort's rule gathers with a uint32 permutation (see NEEDS_U32_GATHER)
SORT_JVP_CASES = [
    JvpCase("sort", "sort", R.sort, [f64[4]], at=_at([0.5, 2.0, -1.0, 1.5])),
    JvpCase("sort-dim0", "sort", lambda x: R.sort(x, dimension=0), [f64[3, 2]],
            at=_at([[0.5, 2.0], [-1.0, 3.0], [1.5, 0.0]])),
    JvpCase("sort-key-carries-value", "sort", lambda k, v: tuple(R.sort((k, v))), [f64[3], f64[3]],
            at=_at([0.5, 2.0, -1.0], None)),
    JvpCase("sort-two-keys", "sort", lambda k, v: tuple(R.sort((k, v), num_keys=2)), [i32[3], f64[3]],
            fixed={0: np.array([1, 0, 1], np.int32)}, at=_at(None, [0.5, 2.0, -1.0])),
]

# rules whose JAX form multiplies by a rounded constant: (case, the exact constant)
ROUNDED_CONSTANT_CASES = [
    (JvpCase("exp2", "exp2", M.exp2, [S]), "log(2): `log 2.0` of a literal"),
    (JvpCase("cbrt", "cbrt", M.cbrt, [S]), "1/3 as a float literal"),
    (JvpCase("erf_inv", "erf_inv", M.erf_inv, [S]), "sqrt(pi)/2 as a float literal"),
]

JVP_PARAMS = [(c, m) for c in MATH_JVP_CASES for m in exact._nonzero_masks(c)]


@pytest.mark.parametrize("case,nonzeros", JVP_PARAMS,
                         ids=[f"{c.id}-{''.join('t' if b else '0' for b in m)}" for c, m in JVP_PARAMS])
def test_jvp_rule_is_exact_derivative(case, nonzeros):
    exact._jvp_check(case, list(nonzeros))


SORT_PARAMS = [(c, m) for c in SORT_JVP_CASES for m in exact._nonzero_masks(c)]


@NEEDS_U32_GATHER
@pytest.mark.parametrize("case,nonzeros", SORT_PARAMS,
                         ids=[f"{c.id}-{''.join('t' if b else '0' for b in m)}" for c, m in SORT_PARAMS])
def test_sort_jvp_rule_is_exact_derivative(case, nonzeros):
    exact._jvp_check(case, list(nonzeros))


@pytest.mark.parametrize("case,why", ROUNDED_CONSTANT_CASES, ids=[c.id for c, _ in ROUNDED_CONSTANT_CASES])
def test_jvp_rule_is_exact_up_to_its_rounded_constant(case, why):
    """JVP / derivative is a number (no symbols left), within 2 ulps of 1."""
    prog = case.program()
    x, t = array("x", ()), array("t", ())
    _, tan = spec.evaluate(spec.jvp(prog), x, t)
    (primal,) = spec.evaluate(prog, x)
    ratio = sympy.simplify(sympy.sympify(tan.item()) / exact.directional_derivative(primal.item(), [x], [t], [0]))
    assert ratio.free_symbols == set(), f"{case.id}: {ratio}"
    assert abs(float(ratio) - 1) <= 2 * np.finfo(np.float64).eps, f"{case.id} ({why}): ratio {ratio}"


@pytest.mark.parametrize("reverse", [False, True])
def test_cumlogsumexp_jvp_is_exact(reverse):
    """JAX differentiates cumlogsumexp as the JVP of an associative scan of
    jnp.logaddexp (a custom_jvp): its primal equals log(cumsum(exp(x)))
    (compared through exp, which is injective on the reals) and its tangent
    sympy.diff of that, exactly."""
    prog = spec.trace(lambda x: R.cumlogsumexp(x, 0, reverse), f64[3])
    assert "cumlogsumexp" in {e.primitive.name for e in prog.eqns}
    xs, ts = array("x", (3,)), array("t", (3,))
    assume = exact.point([xs], [[0.5, 2.0, -1.0]])
    outs, tans = spec.evaluate(spec.jvp(prog), xs, ts, assume=assume)
    (primal,) = spec.evaluate(prog, xs, assume=assume)
    for o, p, tan in zip(outs, primal, tans):
        assert exact.exactly_zero(sympy.exp(o) - sympy.exp(p))
        assert exact.exactly_zero(sympy.sympify(tan) - exact.directional_derivative(p, [xs], [ts], [0]))


OUR_PRIMITIVES = {"is_finite", "sign", "floor", "ceil", "round", "nextafter", "rem", "pow", "atan2", "tan",
                  "sinh", "cosh", "asinh", "acosh", "atanh", "asin", "acos", "atan", "erf_inv", "exp2",
                  "expm1", "cbrt", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "cumsum",
                  "cumprod", "cummax", "cummin", "cumlogsumexp", "top_k", "sort"}


def test_every_new_primitive_has_an_exact_case():
    """Each primitive of the two modules is proved above, except nextafter
    (JAX has no JVP for it) and the logical reductions (bool and integer
    operands: no tangent exists)."""
    assert OUR_PRIMITIVES <= set(spec.primitives)
    proved = ({c.prim for c in MATH_JVP_CASES} | {c.prim for c in SORT_JVP_CASES}
              | {c.prim for c, _ in ROUNDED_CONSTANT_CASES} | {"cumlogsumexp"})
    assert OUR_PRIMITIVES - proved == {"nextafter", "reduce_and", "reduce_or"}


# -- transposition (cumsum is linear) and whole programs --------------------

CUMSUM_TRANSPOSE = [exact.TransposeCase(f"cumsum-axis{a}-rev{r}", "cumsum",
                                        (lambda a, r: lambda x: R.cumsum(x, a, r))(a, r), [f64[2, 3]], (True,))
                    for a in (0, 1) for r in (False, True)]


@pytest.mark.parametrize("case", CUMSUM_TRANSPOSE, ids=[c.id for c in CUMSUM_TRANSPOSE])
def test_cumsum_transpose_is_exact_adjoint(case):
    exact.test_transpose_rule_is_exact_adjoint(case)


def logsumexp_as_jax(x):
    """jax.scipy.special.logsumexp's 0.10.2 equations: a stop_gradient'ed
    finite max, sign and abs of the sum, log."""
    m = ops.max(np.float64(-np.inf), ops.reduce_max(x, (0,)))
    m = ops.stop_gradient(ops.select_n(M.is_finite(m), np.float64(0.0), m))
    e = ops.checkpoint_name(ops.exp(x - ops.broadcast_in_dim(m, x.shape, ())), "h")
    s = ops.reduce_sum(e, (0,))
    M.sign(s)
    return ops.checkpoint_name(ops.log(ops.abs(s)), "a") + m


def cumulative_model(x, w):
    h = ops.checkpoint_name(R.cumprod(ops.sin(x) * w, 0), "h")
    a = ops.checkpoint_name(R.cumsum(h, 0, True), "a")
    return ops.reduce_sum(a * R.cummax(x, 0) + R.reduce_prod(w, (0,)), (0,))


def math_zoo(x, y):
    h = ops.checkpoint_name(M.tan(x) * M.atan2(x, y) + M.pow(M.cosh(y), x), "h")
    a = ops.checkpoint_name(M.asinh(h) + M.rem(h, y) * M.expm1(y), "a")
    return ops.reduce_sum(a * M.atan(x) + M.sinh(a) * M.floor(y), (0,))


WHOLE = {
    "logsumexp-as-jax": (logsumexp_as_jax, [f64[3]], ([0.5, 2.0, -1.0],)),
    "cumulative": (cumulative_model, [f64[3], f64[3]], ([0.5, 1.25, -1.0], [1.5, -0.75, 2.0])),
    "math-zoo": (math_zoo, [f64[2], f64[2]], ([0.5, 1.25], [1.5, 0.75])),
}
POLICIES = ["no-remat", "none", "dots_saveable", "everything_saveable", "save_only_h"]
WHOLE_PARAMS = [(n, p) for n in WHOLE for p in POLICIES]


@pytest.mark.parametrize("name,policy", WHOLE_PARAMS, ids=[f"{n}-{p}" for n, p in WHOLE_PARAMS])
def test_gradient_is_exact(name, policy):
    fn, types, at = WHOLE[name]
    prog = spec.trace(exact._wrap(fn, exact.POLICIES[policy]), *types)
    exact._check_gradient(prog, at)


# ==========================================================================
# (b) JAX's conventions and exact values at special inputs

def _jvp_at(fn, x, t, *types):
    prog = spec.trace(fn, *(types or [spec.ir.type_of(np.asarray(x))]))
    return spec.evaluate(spec.jvp(prog), x, t)


def test_reduce_min_tie_averages_tangents():
    """_reduce_chooser_jvp_rule: the tangent is averaged over the minima."""
    _, d = _jvp_at(lambda x: R.reduce_min(x, (0,)), np.array([1.0, -3.0, -3.0, 0.0]),
                   np.array([1.0, 2.0, 4.0, 8.0]))
    assert d == 3.0
    xs, ts = array("x", (3,)), array("t", (3,))
    jp = spec.jvp(spec.trace(lambda x: R.reduce_min(x, (0,)), f64[3]))
    _, d = spec.evaluate(jp, xs, ts, assume=exact.point([xs], [[-2.0, -2.0, 1.0]]))
    assert exact.exactly_zero(d.item() - (ts[0] + ts[1]) / 2)


def test_cummax_ties_split_as_max_does():
    """cummax's JVP is the scan's max JVP: at a tie the tangents are averaged
    (_balanced_eq), so a running max through equal values mixes their tangents."""
    x = np.array([1.0, 1.0, 0.0])
    out, d = _jvp_at(lambda x: R.cummax(x, 0), x, np.array([2.0, 4.0, 8.0]))
    np.testing.assert_array_equal(out, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(d, [2.0, 3.0, 3.0])


def test_sort_and_top_k_order_ties():
    """Stable sort keeps tied keys in order (their payloads follow); top_k
    takes the earlier index first among equals."""
    k, v = np.array([2, 1, 2, 1], np.int32), np.array([0.0, 1.0, 2.0, 3.0])
    prog = spec.trace(lambda k, v: tuple(R.sort((k, v))), i32[4], f64[4])
    ks, vs = spec.evaluate(prog, k, v)
    np.testing.assert_array_equal(ks, [1, 1, 2, 2])
    np.testing.assert_array_equal(vs, [1.0, 3.0, 0.0, 2.0])
    vals, idx = spec.evaluate(spec.trace(lambda x: R.top_k(x, 3), f64[4]), np.array([1.0, 3.0, 3.0, 1.0]))
    np.testing.assert_array_equal(vals, [3.0, 3.0, 1.0])
    np.testing.assert_array_equal(idx, [1, 2, 0])


# (no denormals: XLA:CPU flushes denormal inputs to zero, ceil(1e-45) = 0 there, a backend mode
# the spec does not model)
SPECIAL = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, 2.5, -2.5, 0.5, -0.5, 1.5, 3.7, -3.7, 1e38],
                   np.float32)
UNARY_SPECIAL = {
    "floor": (M.floor, "lambda x: lax.floor(x)"), "ceil": (M.ceil, "lambda x: lax.ceil(x)"),
    "sign": (M.sign, "lambda x: lax.sign(x)"), "is_finite": (M.is_finite, "lambda x: lax.is_finite(x)"),
    "round-away": (lambda x: M.round(x, M.AWAY_FROM_ZERO),
                   "lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO)"),
    "round-even": (lambda x: M.round(x, M.TO_NEAREST_EVEN),
                   "lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)"),
}
NUMPY_SPECIAL = {"floor": np.floor, "ceil": np.ceil, "is_finite": np.isfinite,
                 "sign": lambda x: np.where(x == 0, x, np.sign(x)),      # XLA's sign keeps -0.0
                 "round-even": np.rint,
                 "round-away": lambda x: np.where(np.abs(x) % 1 == 0.5, np.trunc(x) + np.sign(x),
                                                  np.rint(x)).astype(x.dtype)}


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype == np.bool_:
        np.testing.assert_array_equal(a, b)
    else:
        assert (np.isnan(a) == np.isnan(b)).all()
        keep = ~np.isnan(a)
        np.testing.assert_array_equal(np.signbit(a[keep]), np.signbit(b[keep]))
        np.testing.assert_array_equal(a[keep], b[keep])


@pytest.mark.parametrize("name", sorted(UNARY_SPECIAL))
def test_piecewise_constant_values_at_special_inputs(name):
    """Infinities, NaN, signed zeros and halves: exactly numpy's (round
    away from zero: halves away, others to nearest), signs of zero kept
    (sign(-0.0) is -0.0, as XLA's sign, where numpy's np.sign gives +0.0)."""
    fn, _ = UNARY_SPECIAL[name]
    (got,) = spec.evaluate(spec.trace(fn, f32[SPECIAL.size]), SPECIAL)
    with np.errstate(invalid="ignore"):
        _same_bits(got, NUMPY_SPECIAL[name](SPECIAL))


def test_rem_and_nextafter_values():
    """rem is C's fmod (the dividend's sign, exact); nextafter steps one ulp
    of the operand dtype, to denormals and through zero."""
    x = np.array([5.5, -5.5, 5.5, -5.5, 0.0, -0.0, 7.0], np.float32)
    y = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 7.0], np.float32)
    (r,) = spec.evaluate(spec.trace(M.rem, f32[7], f32[7]), x, y)
    _same_bits(r, np.fmod(x, y))
    a = np.array([0.0, 1.0, -0.0, 1.0, np.inf], np.float32)
    b = np.array([1.0, 2.0, -1.0, 0.0, 0.0], np.float32)
    (n,) = spec.evaluate(spec.trace(M.nextafter, f32[5], f32[5]), a, b)
    _same_bits(n, np.nextafter(a, b))
    assert n[0] == np.float32(1e-45)


def test_nextafter_has_no_derivative_as_in_jax():
    prog = spec.trace(lambda x, y: M.nextafter(x, y), f32[2], f32[2])
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'nextafter' not implemented"):
        spec.jvp(prog)
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'nextafter' not implemented"):
        spec.grad(spec.trace(lambda x: ops.reduce_sum(M.nextafter(x, x), (0,)), f32[2]))


def test_refused_forms():
    with pytest.raises(spec.PrimitiveError, match="accuracy"):
        spec.trace(lambda x: M.tan(x, accuracy=1e-3), f32[2])
    with pytest.raises(spec.PrimitiveError, match="rounding_method"):
        spec.trace(lambda x: M.round(x, 2), f32[2])
    with pytest.raises(spec.PrimitiveError, match="exponent"):
        spec.trace(lambda x, y: M.pow(x, y), f32[2], f64[2])
    with pytest.raises(spec.PrimitiveError, match="num_keys"):
        spec.trace(lambda x: R.sort(x, num_keys=2), f32[2])
    with pytest.raises(spec.PrimitiveError, match="k=3"):
        spec.trace(lambda x: R.top_k(x, 3), f32[2])
    with pytest.raises(spec.PrimitiveError, match="does not accept"):
        spec.trace(lambda x: R.cumlogsumexp(x), i32[2])


# ==========================================================================
# (c) with JAX

def _jax():
    return pytest.importorskip("jax")


MINE = [(p, ex) for p, exs in examples.items() for ex in exs if p.name in OUR_PRIMITIVES]

def _jvp_jaxpr_names(jax, fn, vals, float_idx):
    def f(*a):
        prim, ts = list(a[:len(vals)]), a[len(vals):]

        def g(*fa):
            args = list(prim)
            for i, x in zip(float_idx, fa):
                args[i] = x
            return fn(*args)
        return jax.jvp(g, [prim[i] for i in float_idx], list(ts))
    jaxpr = jax.make_jaxpr(f)(*vals, *[vals[i] for i in float_idx]).jaxpr
    # float0 tangents of integer outputs are JAX's alone (the spec has none)
    return [e.primitive.name for e in jaxpr.eqns
            if not all(v.aval.dtype == jax.dtypes.float0 for v in e.outvars)]


@pytest.mark.parametrize("prim,ex", MINE, ids=[f"{p.name}-{ex.name}" for p, ex in MINE])
def test_jvp_program_has_jaxs_equations(prim, ex):
    """The JVP rule's shape: the spec's JVP program binds the primitives of
    JAX's jvp jaxpr, in order (what partial evaluation can save follows)."""
    jax = _jax()
    import oracle
    from spec.examples import inputs, program
    vals = inputs(ex, np.random.default_rng(0), "f32")
    prog = program(ex, vals)
    float_idx = [i for i, v in enumerate(vals) if spec.ir.is_float(v.dtype)]
    if not float_idx:
        pytest.skip("no float inputs: no JVP")
    if prim.name == "nextafter" or (prim.name == "sort" and not GATHER_U32):
        pytest.skip("nextafter has no JVP rule" if prim.name == "nextafter" else NEEDS_U32_GATHER.kwargs["reason"])
    got = [e.primitive.name for e in spec.jvp(prog).eqns]
    want = _jvp_jaxpr_names(jax, oracle.to_jax(prog), vals, float_idx)
    assert got == want      # (reduce_prod over non-leading axes: one reshape[dimensions=perm], as JAX's)


X23 = np.linspace(0.5, 1.5, 6, dtype=np.float32).reshape(2, 3)
Y23 = np.array([[0.25, -1.0, 0.75], [1.5, -0.5, 2.0]], np.float32)
W34 = (np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5) / 6.0
LABELS = np.array([[0.0, 1.0, 0.0, 0.0], [0.25, 0.25, 0.5, 0.0]], np.float32)


def _jax_losses():
    """Optax-style losses written with jnp: name -> (fn, args, needs a uint32 gather)."""
    import jax
    import jax.numpy as jnp

    def sigmoid_binary_cross_entropy(x, w, labels):       # optax.sigmoid_binary_cross_entropy
        logits = x @ w
        log_p, log_not_p = jax.nn.log_sigmoid(logits), jax.nn.log_sigmoid(-logits)
        return jnp.mean(-labels * log_p - (1.0 - labels) * log_not_p)

    def softmax_cross_entropy(x, w, labels):              # optax.softmax_cross_entropy
        return jnp.mean(-jnp.sum(labels * jax.nn.log_softmax(x @ w, axis=-1), axis=-1))

    def logsumexp_loss(x, w):
        return jnp.sum(jax.scipy.special.logsumexp(jnp.tanh(x @ w), axis=-1))

    def safe_norm(x, w):                                   # optax.safe_norm, with a finiteness guard
        z = x @ w
        norm = jnp.sqrt(jnp.sum(z * z, axis=-1))
        norm = jnp.where(jnp.isfinite(norm), norm, 0.0)
        return jnp.sum(jnp.where(norm <= 1e-6, 1e-6, norm))

    return {
        "sigmoid_binary_cross_entropy": (sigmoid_binary_cross_entropy, (X23, W34, LABELS), False),
        "softmax_cross_entropy": (softmax_cross_entropy, (X23, W34, LABELS), False),
        "logsumexp_loss": (logsumexp_loss, (X23, W34), False),
        "safe_norm": (safe_norm, (X23, W34), False),
    }


def _jax_models():
    """Cumulative, sorting, elementwise and reduction models: name -> (fn, args, needs a uint32 gather)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def cumsum_model(x, w):                                # running and discounted sums
        h = jnp.tanh(x @ w)
        ahead = jnp.flip(jnp.cumsum(jnp.flip(h, axis=1), axis=1), axis=1)
        return jnp.sum(jnp.cumsum(h, axis=1) ** 2) + jnp.sum(ahead * h)

    def cumulative_model(x, y):
        return (jnp.sum(lax.cummax(x * y, axis=1) * jnp.cumprod(jnp.sin(x), axis=1))
                + jnp.sum(lax.cumlogsumexp(x + y, axis=1, reverse=True)) + jnp.sum(lax.cummin(y, axis=0)))

    def sort_model(x, w):                                  # a sorted-weights (trimmed) loss
        return jnp.sum(jnp.sort(x @ w, axis=-1) * jnp.array([0.0, 1.0, 1.0, 0.5]))

    def top_k_model(x, w):
        return jnp.sum(lax.top_k(jnp.tanh(x @ w), 2)[0])

    def math_zoo(x, y):
        return jnp.sum(jnp.tan(0.5 * x) + jnp.sinh(x) * jnp.arctan2(x, y) + jnp.abs(y) ** x
                       + jnp.arcsinh(y) + jnp.expm1(x) * jnp.exp2(y) + jnp.cbrt(y) + jnp.arctan(x)
                       + jnp.cosh(y) + jnp.arccosh(1.0 + x * x) + jnp.arcsin(0.5 * jnp.tanh(y))
                       + jnp.arccos(0.25 * x) + jnp.arctanh(0.5 * jnp.sin(y))
                       + jax.scipy.special.erfinv(0.5 * jnp.tanh(x)) + x ** 2.5)

    def rounding_model(x, y):                              # straight-through rounding, fmod, remainder
        q = x + lax.stop_gradient(jnp.round(x * 4.0) / 4.0 - x)
        return jnp.sum(q * y + jnp.floor(y) * x + jnp.ceil(x) * jnp.sign(y) * y
                       + jnp.fmod(3.0 * x, y) + jnp.remainder(3.0 * x, y))

    def reductions_model(x, y):
        z = jnp.prod(x * y, axis=0) + jnp.min(x * y, axis=1).sum() + jnp.prod(jnp.sin(x), axis=1).sum()
        return jnp.sum(jnp.where(jnp.all(x > 0) & jnp.any(y > 1.0), z, -z))

    return {
        "cumsum_model": (cumsum_model, (X23, W34), False),
        "cumulative_model": (cumulative_model, (X23, Y23), False),
        "sort_model": (sort_model, (X23, W34), True),
        "top_k_model": (top_k_model, (X23, W34), False),
        "math_zoo": (math_zoo, (X23, Y23), False),
        "rounding_model": (rounding_model, (X23, Y23), False),
        "reductions_model": (reductions_model, (X23, Y23), False),
    }


JAX_PROGRAMS = ["sigmoid_binary_cross_entropy", "softmax_cross_entropy", "logsumexp_loss", "safe_norm",
                "cumsum_model", "cumulative_model", "sort_model", "top_k_model", "math_zoo",
                "rounding_model", "reductions_model"]
JAX_POLICIES = ["None", "dots_saveable", "everything_saveable"]


@pytest.mark.parametrize("policy", JAX_POLICIES)
@pytest.mark.parametrize("name", JAX_PROGRAMS)
def test_oracle_agrees(name, policy):
    """oracle.check: residuals, values, JVP, VJP, ... agree (ok, or a known divergence)."""
    jax = _jax()
    import oracle
    fn, args, needs_u32 = {**_jax_losses(), **_jax_models()}[name]
    if needs_u32 and not GATHER_U32:
        pytest.xfail(NEEDS_U32_GATHER.kwargs["reason"])
    pol = None if policy == "None" else getattr(jax.checkpoint_policies, policy)
    report = oracle.check(fn, pol, *args)
    assert {r.status for r in report.results} <= {"ok", "known divergence", "not compared"}, str(report)


def test_oracle_nextafter_grad_raises_alike():
    """Differentiating nextafter raises JAX's NotImplementedError on both sides: not applicable."""
    _jax()
    import jax.numpy as jnp
    import oracle
    report = oracle.check(lambda x, y: jnp.sum(jnp.nextafter(x, y) * x), None, X23, Y23)
    statuses = {r.property: r.status for r in report.results}
    assert statuses["values"] == "ok"
    assert statuses["residuals"] == "not applicable", str(report)


def test_jax_values_at_special_inputs():
    """JAX's floor, ceil, sign, is_finite and both roundings agree with the
    spec bit for bit at infinities, NaN, signed zeros and halves; so do rem
    and nextafter."""
    jax = _jax()
    from jax import lax
    for name, (fn, src) in UNARY_SPECIAL.items():
        (want,) = spec.evaluate(spec.trace(fn, f32[SPECIAL.size]), SPECIAL)
        _same_bits(np.asarray(jax.jit(eval(src, {"lax": lax}))(SPECIAL)), want)
    x = np.array([5.5, -5.5, 5.5, -5.5, 0.0, -0.0, 7.0, 1.0], np.float32)
    y = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 7.0, 0.0], np.float32)
    for fn, jfn in ((M.rem, lax.rem), (M.nextafter, lax.nextafter)):
        (want,) = spec.evaluate(spec.trace(fn, f32[8], f32[8]), x, y)
        with np.errstate(invalid="ignore"):
            _same_bits(np.asarray(jax.jit(jfn)(x, y)), want)
