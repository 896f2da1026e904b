"""More elementwise primitives (jax/_src/lax/lax.py and special.py):
is_finite, sign, floor, ceil, round, nextafter, rem, pow, atan2, tan, sinh,
cosh, asinh, acosh, atanh, asin, acos, atan, erf_inv, exp2, expm1, cbrt.

One block per primitive (declaration, op, shape, evaluation, JVP in jax
0.10.2's rule shape with JAX's source quoted, batching, JAX facts,
examples), as in spec/prims_special.py. What the JVP shape decides: for
instance tan's rule reads `ans` (tan x) and squares it, so a backward
pass saves `1 + tan(x)^2` (the `add`), not cos(x):

    >>> import spec
    >>> prog = spec.trace(lambda x: tan(x), spec.f32[3])
    >>> [str(r) for r in spec.saved_residuals(prog)]
    ['f32[3] output of add']

Piecewise-constant primitives (is_finite, sign, floor, ceil, round) have a
symbolic-zero tangent (`ad.defjvp_zero`); nextafter has no JVP rule in JAX
at all, and differentiating it raises JAX's NotImplementedError.
"""
from __future__ import annotations

import math

import numpy as np

from spec.arrays import namespace
from spec.batching import broadcast_batcher
from spec.core import (Example, JaxFacts, PrimitiveError, Tracer, Zero, batch_rules, bind, eval_rules,
                       examples, jax_facts, jvp_rules, primitive, shape_rules)
from spec.ir import ArrayType, is_float
from spec.prims_elementwise import (_binary_eval, _binary_shape, _coerce, _full_like, _lit_like, _maybe_broadcast,
                                    abs, add, add_tangents, broadcast_shapes, convert_element_type,
                                    div, eq, exp, integer_pow, log, mul, neg, rsqrt, select_n, square,
                                    stop_gradient, sub, unary_rules)
from spec.prims_special import float_unary_shape, unary_eval
from spec.semantics import semantics

# --------------------------------------------------------------------------
# shared pieces


def _accuracy_shape(prim):
    """A floating-point operand and accuracy=None (the spec models only the
    default accuracy, as for sin/exp in spec/prims_elementwise.py)."""
    base = float_unary_shape(prim)

    def rule(x: ArrayType, *, accuracy):
        if accuracy is not None:
            raise PrimitiveError(prim, f"accuracy={accuracy!r} is not supported; "
                                       "the spec models accuracy=None (the default)")
        return base(x)
    return rule


def _numeric_shape(prim):
    """An integer or floating-point operand (not bool); the output has its type."""
    def rule(x: ArrayType, **params):
        if x.dtype == np.bool_:
            raise PrimitiveError(prim, f"operand must be numeric, got {x}")
        return [x]
    return rule


def _zero_jvp(fn):
    """ad.defjvp_zero: the primal, and a symbolic-zero tangent (None)."""
    def rule(primals, tangents, **params):
        return fn(*primals, **params), None
    return rule


def _vec(f):
    return np.vectorize(f, otypes=[np.float64])


# ==========================================================================
# is_finite

is_finite_p = primitive("is_finite")


def is_finite(x):
    """True where x is neither infinite nor NaN."""
    return bind(is_finite_p, x)


def _is_finite_shape(x: ArrayType):
    """unop(_fixed_dtype(np.bool_), _float, 'is_finite'): float in, bool out."""
    if not is_float(x.dtype):
        raise PrimitiveError(is_finite_p, f"operand must be floating point, got {x}")
    return [ArrayType(x.shape, np.bool_)]


def _is_finite_eval(x):
    xp = namespace(x)
    return np.asarray(xp.is_finite(xp.compute(x)), dtype=bool)


# ad.defjvp_zero(is_finite_p)
unary_rules(is_finite_p, _is_finite_shape, _is_finite_eval, _zero_jvp(is_finite))
jax_facts[is_finite_p] = JaxFacts("is_finite", "lambda x: lax.is_finite(x)")
examples[is_finite_p] = [
    Example("is_finite", (((2, 3), "f32", "normal"),), is_finite, np.isfinite, tangent="zero"),
    # log of -2..2 in halves: -inf at 0, nan below: both outcomes
    Example("is_finite-of-log", (((3, 4), "f32", "halves"),), lambda x: is_finite(log(x)),
            lambda x: x > 0, tangent="zero"),
]


# ==========================================================================
# sign

sign_p = primitive("sign")


def sign(x):
    """-1, 0 or +1 by the sign of x (NaN stays NaN, -0.0 gives -0.0)."""
    return bind(sign_p, x)


# standard_unop(_num, 'sign'); ad.defjvp_zero(sign_p)
unary_rules(sign_p, _numeric_shape(sign_p), unary_eval("sign"), _zero_jvp(sign))
jax_facts[sign_p] = JaxFacts("sign", "lambda x: lax.sign(x)")
examples[sign_p] = [
    Example("sign-halves-with-zeros", (((3, 4), "f32", "halves"),), sign, np.sign, tangent="zero"),
    Example("sign-i32", (((5,), "i32", "ints"),), sign, np.sign),
]


# ==========================================================================
# floor, ceil

floor_p = primitive("floor")
ceil_p = primitive("ceil")


def floor(x):
    """The largest integer <= x."""
    return bind(floor_p, x)


def ceil(x):
    """The smallest integer >= x."""
    return bind(ceil_p, x)


# standard_unop(_float, 'floor'); ad.defjvp_zero(floor_p)
unary_rules(floor_p, float_unary_shape(floor_p), unary_eval("floor"), _zero_jvp(floor))
jax_facts[floor_p] = JaxFacts("floor", "lambda x: lax.floor(x)")
examples[floor_p] = [
    Example("floor", (((2, 3), "f32", "normal"),), floor, np.floor, tangent="zero"),
    Example("floor-halves", (((6,), "f32", "halves"),), floor, np.floor, tangent="zero"),
]

# standard_unop(_float, 'ceil'); ad.defjvp_zero(ceil_p)
unary_rules(ceil_p, float_unary_shape(ceil_p), unary_eval("ceil"), _zero_jvp(ceil))
jax_facts[ceil_p] = JaxFacts("ceil", "lambda x: lax.ceil(x)")
examples[ceil_p] = [
    Example("ceil", (((2, 3), "f32", "normal"),), ceil, np.ceil, tangent="zero"),
    Example("ceil-halves", (((6,), "f32", "halves"),), ceil, np.ceil, tangent="zero"),
]


# ==========================================================================
# round

round_p = primitive("round", ["rounding_method"])
AWAY_FROM_ZERO, TO_NEAREST_EVEN = 0, 1        # lax.RoundingMethod's values (an IntEnum)


def round(x, rounding_method=AWAY_FROM_ZERO):   # noqa: A001 (lax's name)
    """x rounded to an integer; halves away from zero (0) or to even (1)."""
    return bind(round_p, x, rounding_method=int(rounding_method))


def _round_shape(x: ArrayType, *, rounding_method):
    if rounding_method not in (AWAY_FROM_ZERO, TO_NEAREST_EVEN):
        raise PrimitiveError(round_p, f"rounding_method must be 0 (AWAY_FROM_ZERO) or 1 "
                                      f"(TO_NEAREST_EVEN), got {rounding_method!r}")
    return float_unary_shape(round_p)(x)


def _round_eval(x, *, rounding_method):
    xp = namespace(x)
    op = xp.round_away if rounding_method == AWAY_FROM_ZERO else xp.round_even
    return xp.result(op(xp.compute(x)), x.dtype)


def _round_reference(method):
    def ref(x):
        if method == TO_NEAREST_EVEN:
            return np.rint(x)
        return np.sign(x) * np.floor(np.abs(x) + 0.5)
    return ref


unary_rules(round_p, _round_shape, _round_eval, _zero_jvp(round))   # ad.defjvp_zero(round_p)
jax_facts[round_p] = JaxFacts(
    "round", "lambda x, rounding_method: lax.round(x, lax.RoundingMethod(rounding_method))",
    from_jax=lambda p: {**p, "rounding_method": int(p["rounding_method"])})
examples[round_p] = [
    Example(f"round-{name}-halves", (((3, 4), "f32", "halves"),),
            (lambda m: lambda x: round(x, m))(m), _round_reference(m), tangent="zero")
    for name, m in (("away_from_zero", AWAY_FROM_ZERO), ("to_nearest_even", TO_NEAREST_EVEN))
] + [Example("round-to_nearest_even-normal", (((2, 3), "f32", "normal"),),
             lambda x: round(x, TO_NEAREST_EVEN), np.rint, tangent="zero")]


# ==========================================================================
# nextafter

nextafter_p = primitive("nextafter")
NEXTAFTER_JVP_ERROR = "Differentiation rule for 'nextafter' not implemented"


def nextafter(x, y):
    """The representable number next to x in the direction of y (in x's dtype)."""
    return bind(nextafter_p, *_coerce(x, y))


def _nextafter_eval(x, y):
    """In the operands' own dtype (no f16/bf16 upcast: the neighbour is the dtype's)."""
    return np.asarray(namespace(x, y).nextafter(x, y)).astype(x.dtype)


def _nextafter_jvp(primals, tangents):
    """JAX registers no JVP for nextafter_p (standard_naryop only): jvp, grad
    and linearize raise NotImplementedError with this message."""
    raise NotImplementedError(NEXTAFTER_JVP_ERROR)


shape_rules[nextafter_p] = _binary_shape(nextafter_p, kinds=("float",))
eval_rules[nextafter_p] = _nextafter_eval
jvp_rules[nextafter_p] = _nextafter_jvp
batch_rules[nextafter_p] = broadcast_batcher(nextafter_p)
jax_facts[nextafter_p] = JaxFacts("nextafter", "lambda x, y: lax.nextafter(x, y)")


def _nextafter_f32(x, y):
    return np.nextafter(np.float32(x) if np.ndim(x) == 0 else x.astype(np.float32), y.astype(np.float32))


# the operands pass stop_gradient first: nextafter itself cannot be differentiated
examples[nextafter_p] = [
    Example("nextafter-f32", (((2, 3), "f32", "normal"), ((2, 3), "f32", "normal")),
            lambda x, y: nextafter(stop_gradient(x), stop_gradient(y)), _nextafter_f32, tangent="zero"),
    Example("nextafter-toward-zero-scalar", (((4,), "f32", "away_from_zero"),),
            lambda x: nextafter(stop_gradient(x), 0.0),
            lambda x: _nextafter_f32(x, np.zeros_like(x)), tangent="zero"),
]


# ==========================================================================
# rem

rem_p = primitive("rem")


def rem(x, y):
    """C's fmod: x - y * trunc(x / y), with the sign of x."""
    return bind(rem_p, *_coerce(x, y))


def _rem_eval(x, y):
    xp = namespace(x, y)
    if xp.name != "sympy" and not is_float(x.dtype):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.fmod(x, y).astype(x.dtype)
    return xp.result(xp.rem(xp.compute(x), xp.compute(y)), x.dtype)


def _rem_jvp(primals, tangents):
    """d rem = dx - trunc(x / y) dy. JAX (lax.py):
    ad.defjvp(rem_p,
      lambda g, x, y: _maybe_broadcast(broadcast_shapes(np.shape(x), np.shape(y)), g),
      lambda g, x, y: mul(neg(g), mul(sign(div(x, y)), floor(abs(div(x, y))))))"""
    (x, y), (tx, ty) = primals, tangents
    ans = rem(x, y)
    shape = broadcast_shapes(rem_p, _type(x), _type(y))
    terms = [None if isinstance(tx, Zero) else _maybe_broadcast(shape, tx),
             None if isinstance(ty, Zero) else mul(neg(ty), mul(sign(div(x, y)), floor(abs(div(x, y)))))]
    return ans, add_tangents(terms)


def _type(x):
    return x.type if isinstance(x, Tracer) else ArrayType(np.shape(x), np.asarray(x).dtype)


def _rem_i32(x, y):
    # y * y - 5 is -5, -4, -1 or 4 for y in -3..3: never a zero divisor, both signs
    return rem(x, sub(mul(y, y), np.int32(5)))


shape_rules[rem_p] = _binary_shape(rem_p)               # standard_naryop([_int | _float] * 2, 'rem')
eval_rules[rem_p] = _rem_eval
jvp_rules[rem_p] = _rem_jvp
batch_rules[rem_p] = broadcast_batcher(rem_p)
jax_facts[rem_p] = JaxFacts("rem", "lambda x, y: lax.rem(x, y)")
examples[rem_p] = [
    Example("rem-signed-operands", (((2, 3), "f32", "normal"), ((2, 3), "f32", "away_from_zero")),
            lambda x, y: rem(mul(x, 3.0), y), lambda x, y: np.fmod(3.0 * x, y)),
    Example("rem-scalar-divisor", (((4,), "f32", "normal"), ((), "f32", "away_from_zero")),
            lambda x, y: rem(mul(x, 3.0), y), lambda x, y: np.fmod(3.0 * x, y)),
    Example("rem-i32", (((6,), "i32", "ints"), ((6,), "i32", "ints")), _rem_i32,
            lambda x, y: np.fmod(x, y * y - 5)),
]


# ==========================================================================
# pow

pow_p = primitive("pow")


def pow(x, y):   # noqa: A001 (lax's name)
    """x ** y: a floating base; a floating exponent of the base's dtype, or an integer one."""
    if isinstance(x, Tracer) and isinstance(y, bool):
        raise PrimitiveError(pow_p, "a bool exponent is not supported")
    if isinstance(x, Tracer) and isinstance(y, int):
        y = np.asarray(y, dtype=np.int32)
    return bind(pow_p, *_coerce(x, y))


def _pow_shape(x: ArrayType, y: ArrayType):
    """lax._pow_dtype_rule: float ** (the same float, or an integer): x's dtype."""
    if not is_float(x.dtype) or not (y.dtype == x.dtype or y.dtype == np.int32):
        raise PrimitiveError(pow_p, f"the base must be floating point and the exponent of its dtype "
                                    f"or integer, got {x} and {y}")
    return [ArrayType(broadcast_shapes(pow_p, x, y), x.dtype)]


def _pow_eval(x, y):
    xp = namespace(x, y)
    return xp.result(xp.pow(xp.compute(x), xp.compute(y)), x.dtype)


def _replace_zero(x):
    """lax._replace_zero: select(eq(x, 0), ones, x), i.e. 1 where x == 0."""
    pred = eq(x, _lit_like(x, 0))
    return select_n(pred, x, _full_like(x, 1))


def _pow_jvp_lhs(g, x, y):
    """lax._pow_jvp_lhs: g * y * x ** (y - 1); for an integer y (converted to
    x's dtype and broadcast to one shape) 0 where y == 0, as
    select(eq(y, 0), zeros, mul(_replace_zero(y), pow(x, sub(y, ones))))."""
    if _type(y).dtype == np.int32:
        y = convert_element_type(y, _type(x).dtype)
        shape = broadcast_shapes(pow_p, _type(x), _type(y))
        x, y = _maybe_broadcast(shape, x), _maybe_broadcast(shape, y)
        pred, zeros = eq(y, _lit_like(y, 0)), _full_like(y, 0)
        jac = select_n(pred, mul(_replace_zero(y), pow(x, sub(y, _full_like(y, 1)))), zeros)
    else:
        jac = mul(y, pow(x, sub(y, _full_like(y, 1))))
    return mul(g, jac)


def _pow_jvp_rhs(g, ans, x, y):
    """lax._pow_jvp_rhs: convert_element_type(mul(g, mul(log(_replace_zero(x)), ans)), y_dtype)
    (the conversion is to the same dtype: no equation)."""
    return mul(g, mul(log(_replace_zero(x)), ans))


def _pow_jvp(primals, tangents):
    """d x**y = y x**(y-1) dx + log(x) x**y dy. JAX: ad.defjvp2(pow_p, _pow_jvp_lhs, _pow_jvp_rhs)."""
    (x, y), (tx, ty) = primals, tangents
    ans = pow(x, y)
    terms = [None if isinstance(tx, Zero) else _pow_jvp_lhs(tx, x, y),
             None if isinstance(ty, Zero) else _pow_jvp_rhs(ty, ans, x, y)]
    return ans, add_tangents(terms)


shape_rules[pow_p] = _pow_shape
eval_rules[pow_p] = _pow_eval
jvp_rules[pow_p] = _pow_jvp
batch_rules[pow_p] = broadcast_batcher(pow_p)
jax_facts[pow_p] = JaxFacts("pow", "lambda x, y: lax.pow(x, y)")
examples[pow_p] = [
    Example("pow-float-exponent", (((2, 3), "f32", "positive"), ((2, 3), "f32", "normal")),
            pow, np.power),
    Example("pow-integer-valued-float-exponent", (((2, 3), "f32", "positive"), ((2, 3), "f32", "ints")),
            pow, np.power),
    # a negative base needs an integer-valued exponent; log(x) (the exponent's
    # derivative) is nan there, so the exponent carries no tangent here (and
    # the reference rounds away the finite-difference steps of y)
    Example("pow-negative-base", (((2, 3), "f32", "away_from_zero"), ((2, 3), "f32", "ints")),
            lambda x, y: pow(x, stop_gradient(y)), lambda x, y: np.power(x, np.round(y))),
    Example("pow-i32-exponent", (((2, 3), "f32", "away_from_zero"), ((2, 3), "i32", "ints")),
            pow, lambda x, n: np.power(x, n.astype(np.float64))),
    Example("pow-i32-scalar-exponent", (((4,), "f32", "away_from_zero"), ((), "i32", "ints")),
            pow, lambda x, n: np.power(x, np.float64(n))),
    Example("pow-literal-exponent", (((4,), "f32", "positive"),), lambda x: pow(x, 2.5),
            lambda x: np.power(x, 2.5)),
]


# ==========================================================================
# atan2

atan2_p = primitive("atan2")


def atan2(x, y):
    """The angle of the point (y, x): atan(x / y) in the quadrant of (y, x)."""
    return bind(atan2_p, *_coerce(x, y))


def _atan2_jvp(primals, tangents):
    """d atan2(x, y) = (y dx - x dy) / (x^2 + y^2). JAX (lax.py):
    ad.defjvp(atan2_p,
              lambda g, x, y: mul(g, div(y, add(square(x), square(y)))),
              lambda g, x, y: mul(g, div(neg(x), add(square(x), square(y)))))
    (before jax 0.5.3 `g * -x / (square(x) + square(y))` in y: spec/semantics.py)"""
    (x, y), (tx, ty) = primals, tangents
    ans = atan2(x, y)
    terms = [None if isinstance(tx, Zero) else mul(tx, div(y, add(square(x), square(y)))),
             None if isinstance(ty, Zero) else _atan2_jvp_in_y(ty, x, y)]
    return ans, add_tangents(terms)


def _atan2_jvp_in_y(g, x, y):
    if semantics().atan2_jvp_divides_first:
        return mul(g, div(neg(x), add(square(x), square(y))))
    return div(mul(g, neg(x)), add(square(x), square(y)))


shape_rules[atan2_p] = _binary_shape(atan2_p, kinds=("float",))
eval_rules[atan2_p] = _binary_eval("atan2")
jvp_rules[atan2_p] = _atan2_jvp
batch_rules[atan2_p] = broadcast_batcher(atan2_p)
jax_facts[atan2_p] = JaxFacts("atan2", "lambda x, y: lax.atan2(x, y)")
examples[atan2_p] = [
    Example("atan2-all-quadrants", (((2, 3), "f32", "away_from_zero"), ((2, 3), "f32", "away_from_zero")),
            atan2, np.arctan2),
    Example("atan2-scalar-y", (((4,), "f32", "normal"), ((), "f32", "away_from_zero")), atan2, np.arctan2),
]


# ==========================================================================
# tan

tan_p = primitive("tan", ["accuracy"])


def tan(x, accuracy=None):
    """sin(x) / cos(x)."""
    return bind(tan_p, x, accuracy=accuracy)


def _tan_jvp(primals, tangents, *, accuracy):
    """d tan x = (1 + tan^2 x) dx. JAX (lax.py):
    ad.defjvp2(tan_p, lambda g, ans, x, **kwargs: mul(g, add(_const(x, 1), square(ans))))"""
    (x,), (g,) = primals, tangents
    ans = tan(x, accuracy=accuracy)
    return ans, mul(g, add(_lit_like(x, 1), square(ans)))


unary_rules(tan_p, _accuracy_shape(tan_p), unary_eval("tan"), _tan_jvp)
jax_facts[tan_p] = JaxFacts("tan", "lambda x, accuracy=None: lax.tan(x, accuracy=accuracy)")
examples[tan_p] = [Example("tan", (((2, 3), "f32", "unit"),), tan, np.tan)]


# ==========================================================================
# sinh, cosh

sinh_p = primitive("sinh")
cosh_p = primitive("cosh")


def sinh(x):
    """(e^x - e^-x) / 2."""
    return bind(sinh_p, x)


def cosh(x):
    """(e^x + e^-x) / 2."""
    return bind(cosh_p, x)


def _sinh_jvp(primals, tangents):
    """d sinh x = cosh x dx. JAX: ad.defjvp(sinh_p, lambda g, x: mul(g, cosh(x)))"""
    (x,), (g,) = primals, tangents
    return sinh(x), mul(g, cosh(x))


def _cosh_jvp(primals, tangents):
    """d cosh x = sinh x dx. JAX: ad.defjvp(cosh_p, lambda g, x: mul(g, sinh(x)))"""
    (x,), (g,) = primals, tangents
    return cosh(x), mul(g, sinh(x))


unary_rules(sinh_p, float_unary_shape(sinh_p), unary_eval("sinh"), _sinh_jvp)
jax_facts[sinh_p] = JaxFacts("sinh", "lambda x: lax.sinh(x)")
examples[sinh_p] = [Example("sinh", (((2, 3), "f32", "normal"),), sinh, np.sinh)]

unary_rules(cosh_p, float_unary_shape(cosh_p), unary_eval("cosh"), _cosh_jvp)
jax_facts[cosh_p] = JaxFacts("cosh", "lambda x: lax.cosh(x)")
examples[cosh_p] = [Example("cosh", (((2, 3), "f32", "normal"),), cosh, np.cosh)]


# ==========================================================================
# asinh, acosh, atanh

asinh_p = primitive("asinh")
acosh_p = primitive("acosh")
atanh_p = primitive("atanh")


def asinh(x):
    """log(x + sqrt(x^2 + 1))."""
    return bind(asinh_p, x)


def acosh(x):
    """log(x + sqrt(x^2 - 1)), for x >= 1."""
    return bind(acosh_p, x)


def atanh(x):
    """log((1 + x) / (1 - x)) / 2, for |x| < 1."""
    return bind(atanh_p, x)


def _asinh_jvp(primals, tangents):
    """d asinh x = dx / sqrt(x^2 + 1). JAX:
    ad.defjvp(asinh_p, lambda g, x: mul(g, rsqrt(add(square(x), _one(x)))))"""
    (x,), (g,) = primals, tangents
    return asinh(x), mul(g, rsqrt(add(square(x), _lit_like(x, 1))))


def _acosh_jvp(primals, tangents):
    """d acosh x = dx / sqrt(x^2 - 1). JAX:
    ad.defjvp(acosh_p, lambda g, x: mul(g, rsqrt(sub(square(x), _one(x)))))
    (before jax 0.8.0 `mul(sub(x, _one(x)), add(x, _one(x)))` in place of
    the square: spec/semantics.py)"""
    (x,), (g,) = primals, tangents
    one = _lit_like(x, 1)
    if semantics().acosh_jvp_squares:
        return acosh(x), mul(g, rsqrt(sub(square(x), one)))
    return acosh(x), mul(g, rsqrt(mul(sub(x, one), add(x, one))))


def _atanh_jvp(primals, tangents):
    """d atanh x = dx / ((1 + x)(1 - x)). JAX:
    ad.defjvp(atanh_p, lambda g, x: mul(reciprocal(add(_one(x), x)), div(g, sub(_one(x), x))))
    (reciprocal is integer_pow(., -1))"""
    (x,), (g,) = primals, tangents
    ans = atanh(x)
    return ans, mul(integer_pow(add(_lit_like(x, 1), x), -1), div(g, sub(_lit_like(x, 1), x)))


unary_rules(asinh_p, float_unary_shape(asinh_p), unary_eval("asinh"), _asinh_jvp)
jax_facts[asinh_p] = JaxFacts("asinh", "lambda x: lax.asinh(x)")
examples[asinh_p] = [Example("asinh", (((2, 3), "f32", "normal"),), asinh, np.arcsinh)]

unary_rules(acosh_p, float_unary_shape(acosh_p), unary_eval("acosh"), _acosh_jvp)
jax_facts[acosh_p] = JaxFacts("acosh", "lambda x: lax.acosh(x)")
examples[acosh_p] = [Example("acosh-of-1-plus", (((2, 3), "f32", "positive"),),   # argument in (1.5, 3)
                             lambda x: acosh(add(x, 1.0)), lambda x: np.arccosh(x + 1.0))]

unary_rules(atanh_p, float_unary_shape(atanh_p), unary_eval("atanh"), _atanh_jvp)
jax_facts[atanh_p] = JaxFacts("atanh", "lambda x: lax.atanh(x)")
examples[atanh_p] = [Example("atanh", (((2, 3), "f32", "unit"),), atanh, np.arctanh)]


# ==========================================================================
# asin, acos, atan

asin_p = primitive("asin")
acos_p = primitive("acos")
atan_p = primitive("atan")


def asin(x):
    """The inverse of sin on [-pi/2, pi/2]."""
    return bind(asin_p, x)


def acos(x):
    """The inverse of cos on [0, pi]."""
    return bind(acos_p, x)


def atan(x):
    """The inverse of tan on (-pi/2, pi/2)."""
    return bind(atan_p, x)


def _asin_jvp(primals, tangents):
    """d asin x = dx / sqrt(1 - x^2). JAX:
    ad.defjvp(asin_p, lambda g, x: mul(g, rsqrt(sub(_const(x, 1), square(x)))))"""
    (x,), (g,) = primals, tangents
    return asin(x), mul(g, rsqrt(sub(_lit_like(x, 1), square(x))))


def _acos_jvp(primals, tangents):
    """d acos x = -dx / sqrt(1 - x^2). JAX:
    ad.defjvp(acos_p, lambda g, x: mul(g, neg(rsqrt(sub(_const(x, 1), square(x))))))"""
    (x,), (g,) = primals, tangents
    return acos(x), mul(g, neg(rsqrt(sub(_lit_like(x, 1), square(x)))))


def _atan_jvp(primals, tangents):
    """d atan x = dx / (1 + x^2). JAX:
    ad.defjvp(atan_p, lambda g, x: div(g, add(_const(x, 1), square(x))))"""
    (x,), (g,) = primals, tangents
    return atan(x), div(g, add(_lit_like(x, 1), square(x)))


unary_rules(asin_p, float_unary_shape(asin_p), unary_eval("asin"), _asin_jvp)
jax_facts[asin_p] = JaxFacts("asin", "lambda x: lax.asin(x)")
examples[asin_p] = [Example("asin", (((2, 3), "f32", "unit"),), asin, np.arcsin)]

unary_rules(acos_p, float_unary_shape(acos_p), unary_eval("acos"), _acos_jvp)
jax_facts[acos_p] = JaxFacts("acos", "lambda x: lax.acos(x)")
examples[acos_p] = [Example("acos", (((2, 3), "f32", "unit"),), acos, np.arccos)]

unary_rules(atan_p, float_unary_shape(atan_p), unary_eval("atan"), _atan_jvp)
jax_facts[atan_p] = JaxFacts("atan", "lambda x: lax.atan(x)")
examples[atan_p] = [Example("atan", (((2, 3), "f32", "normal"),), atan, np.arctan)]


# ==========================================================================
# erf_inv

erf_inv_p = primitive("erf_inv")


def erf_inv(x):
    """The inverse error function on (-1, 1): erf(erf_inv(x)) = x."""
    return bind(erf_inv_p, x)


def _erf_inv_jvp(primals, tangents):
    """d erf_inv(x) = sqrt(pi)/2 * exp(erf_inv(x)^2) dx. JAX (special.py):
    ad.defjvp2(erf_inv_p, lambda g, ans, x: mul(_const(x, np.sqrt(np.pi) / 2.),
                                                mul(g, exp(square(ans)))))"""
    (x,), (g,) = primals, tangents
    ans = erf_inv(x)
    return ans, mul(_lit_like(x, np.sqrt(np.pi) / 2.0), mul(g, exp(square(ans))))


def _erf_inv_reference(y):
    """Bisection on math.erf to float64 precision (independent of the spec's Newton steps)."""
    def one(v):
        lo, hi = -6.0, 6.0
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if math.erf(mid) < v else (lo, mid)
        return (lo + hi) / 2
    return _vec(one)(y)


unary_rules(erf_inv_p, float_unary_shape(erf_inv_p), unary_eval("erf_inv"), _erf_inv_jvp)
jax_facts[erf_inv_p] = JaxFacts("erf_inv", "lambda x: lax.erf_inv(x)")
examples[erf_inv_p] = [Example("erf_inv", (((2, 3), "f32", "unit"),), erf_inv, _erf_inv_reference)]


# ==========================================================================
# exp2

exp2_p = primitive("exp2", ["accuracy"])


def exp2(x, accuracy=None):
    """2 ** x."""
    return bind(exp2_p, x, accuracy=accuracy)


def _exp2_jvp(primals, tangents, *, accuracy):
    """d 2^x = log(2) 2^x dx. JAX (lax.py), with log(2) an equation on a literal:
    ad.defjvp2(exp2_p, lambda g, ans, x, **kwargs: mul(log(_const(x, 2)), mul(g, ans)))"""
    (x,), (g,) = primals, tangents
    ans = exp2(x, accuracy=accuracy)
    return ans, mul(log(_lit_like(x, 2)), mul(g, ans))


unary_rules(exp2_p, _accuracy_shape(exp2_p), unary_eval("exp2"), _exp2_jvp)
jax_facts[exp2_p] = JaxFacts("exp2", "lambda x, accuracy=None: lax.exp2(x, accuracy=accuracy)")
examples[exp2_p] = [Example("exp2", (((2, 3), "f32", "normal"),), exp2, np.exp2)]


# ==========================================================================
# expm1

expm1_p = primitive("expm1", ["accuracy"])


def expm1(x, accuracy=None):
    """e^x - 1 (accurate near 0)."""
    return bind(expm1_p, x, accuracy=accuracy)


def _expm1_jvp(primals, tangents, *, accuracy):
    """d expm1 x = (expm1 x + 1) dx. JAX (lax.py; accuracy=None takes the second branch):
    ad.defjvp2(expm1_p, lambda g, ans, x, accuracy: mul(g, exp(x, accuracy=accuracy))
               if accuracy is AccuracyMode.HIGHEST else mul(g, add(ans, _one(ans))))"""
    (x,), (g,) = primals, tangents
    ans = expm1(x, accuracy=accuracy)
    return ans, mul(g, add(ans, _lit_like(ans, 1)))


unary_rules(expm1_p, _accuracy_shape(expm1_p), unary_eval("expm1"), _expm1_jvp)
jax_facts[expm1_p] = JaxFacts("expm1", "lambda x, accuracy=None: lax.expm1(x, accuracy=accuracy)")
examples[expm1_p] = [Example("expm1", (((2, 3), "f32", "normal"),), expm1, np.expm1)]


# ==========================================================================
# cbrt

cbrt_p = primitive("cbrt", ["accuracy"])


def cbrt(x, accuracy=None):
    """The real cube root (negative for negative x)."""
    return bind(cbrt_p, x, accuracy=accuracy)


def _cbrt_jvp(primals, tangents, *, accuracy):
    """d cbrt x = dx / (3 cbrt(x)^2). JAX (lax.py):
    ad.defjvp2(cbrt_p, lambda g, ans, x, **kwargs: mul(g, mul(_const(x, 1 / 3), integer_pow(ans, -2))))"""
    (x,), (g,) = primals, tangents
    ans = cbrt(x, accuracy=accuracy)
    return ans, mul(g, mul(_lit_like(x, 1 / 3), integer_pow(ans, -2)))


unary_rules(cbrt_p, _accuracy_shape(cbrt_p), unary_eval("cbrt"), _cbrt_jvp)
jax_facts[cbrt_p] = JaxFacts("cbrt", "lambda x, accuracy=None: lax.cbrt(x, accuracy=accuracy)")
examples[cbrt_p] = [Example("cbrt-signed", (((2, 3), "f32", "away_from_zero"),), cbrt, np.cbrt)]


__all__ = ["is_finite", "sign", "floor", "ceil", "round", "nextafter", "rem", "pow", "atan2", "tan",
           "sinh", "cosh", "asinh", "acosh", "atanh", "asin", "acos", "atan", "erf_inv", "exp2",
           "expm1", "cbrt", "AWAY_FROM_ZERO", "TO_NEAREST_EVEN"]
