"""Elementwise primitives: their types, evaluation, JVP and transpose rules.

Each JVP rule has the *shape* of jax 0.10.2's rule (`jax/_src/lax/lax.py`),
cited beside it. The shape matters: which intermediates a JVP rule computes
from primals decides what partial evaluation can save as residuals. For
example tanh's rule computes ``1 - ans`` from the primal output, so ``sub``
outputs appear in JAX's residual lists, and so they do here.

Binary ops follow lax's typing: both operands have one dtype; shapes are
equal, or one operand is a scalar, or (equal rank) dimensions of size 1
broadcast. Python scalars become literals of the other operand's dtype.
"""
from __future__ import annotations

import builtins

import ml_dtypes
import numpy as np

from spec.batching import vectorized_batcher
from spec.core import (Example, JaxFacts, PrimitiveError, examples, UndefinedPrimal, Zero, batch_rules, bind, linear_jvp,
                       eval_rules, is_undefined, jax_facts, jvp_rules, primitive,
                       shape_rules, to_atom, transpose_rules, Tracer)
from spec.arrays import SymbolicError, namespace
from spec.ir import ArrayType, canonical_dtype, is_complex, is_float, real_dtype, type_of
from spec.batching import bdim_at_front, broadcast_at, broadcast_batcher, moveaxis, ndim
from spec.core import check_memory_spaces, complex_rules, instantiate
from spec.semantics import semantics
from spec.ir import is_key

# --------------------------------------------------------------------------
# evaluation: every rule is written once against the array namespace of
# spec/arrays.py, so the same rule evaluates numbers and sympy expressions

def _unary_eval(op: str):
    def rule(x, **_):
        xp = namespace(x)
        return xp.result(getattr(xp, op)(xp.compute(x)), x.dtype)
    return rule


def _binary_eval(op: str):
    def rule(x, y, **_):
        xp = namespace(x, y)
        return xp.result(getattr(xp, op)(xp.compute(x), xp.compute(y)), x.dtype)
    return rule


# --------------------------------------------------------------------------
# type rules

def _float_unary_shape(prim):
    def rule(x: ArrayType, **params):
        if not is_float(x.dtype):
            raise PrimitiveError(prim, f"operand must be floating point, got {x}")
        return [x]
    return rule


def unary_rules(prim, shape_rule, eval_rule, jvp_rule):
    """Register a unary elementwise primitive's shape, evaluation and JVP
    rules, and its batching rule: JAX's vectorized batcher (standard_unop)."""
    shape_rules[prim], eval_rules[prim], jvp_rules[prim] = shape_rule, eval_rule, jvp_rule
    batch_rules[prim] = vectorized_batcher(prim)


def broadcast_shapes(prim, x: ArrayType, y: ArrayType) -> tuple[int, ...]:
    if x.shape == y.shape:
        return x.shape
    if x.ndim == 0:
        return y.shape
    if y.ndim == 0:
        return x.shape
    if x.ndim == y.ndim and all(a == b or a == 1 or b == 1 for a, b in zip(x.shape, y.shape)):
        return tuple(builtins.max(a, b) for a, b in zip(x.shape, y.shape))
    raise PrimitiveError(prim, f"incompatible shapes {x} and {y}")


def _binary_shape(prim, kinds=("float", "int"), out_dtype=None):
    def rule(x: ArrayType, y: ArrayType, **params):
        if x.dtype != y.dtype:
            raise PrimitiveError(prim, f"operands must have one dtype, got {x} and {y}")
        kind = "float" if is_float(x.dtype) else ("bool" if x.dtype == np.bool_ else "int")
        if kind not in kinds:
            raise PrimitiveError(prim, f"dtype {x.dtype} not supported; supported kinds: {kinds}")
        return [ArrayType(broadcast_shapes(prim, x, y), out_dtype or x.dtype)]
    return rule


# --------------------------------------------------------------------------
# small helpers used by the rules (each binds a primitive)

def _lit_like(x, value):
    """A scalar literal of x's dtype (what lax's `_const(x, v)` gives)."""
    return np.asarray(value, dtype=x.dtype)


def _coerce(x, y):
    """Python scalars take the dtype of the traced operand (weak typing)."""
    if isinstance(x, Tracer) and isinstance(y, (int, float, bool)):
        y = np.asarray(y, dtype=x.dtype)
    elif isinstance(y, Tracer) and isinstance(x, (int, float, bool)):
        x = np.asarray(x, dtype=y.dtype)
    return x, y


def _full_like(x, value):
    """lax.full_like: `broadcast_in_dim value` for arrays, a literal for scalars."""
    from spec.prims_structural import broadcast_in_dim  # a cycle: prims_structural builds on this module
    v = _lit_like(x, value)
    return v if x.ndim == 0 else broadcast_in_dim(v, x.shape, ())


def _maybe_broadcast(shape, t):
    """lax._maybe_broadcast: broadcast a (scalar or size-1) tangent to `shape`."""
    from spec.prims_structural import broadcast_in_dim, reshape  # a cycle: prims_structural builds on this module
    if t.shape == tuple(shape):
        return t
    if t.ndim == 0:
        return broadcast_in_dim(t, shape, ())
    dims = [i for i, (a, b) in enumerate(zip(t.shape, shape)) if a == b]
    return broadcast_in_dim(reshape(t, tuple(t.shape[i] for i in dims)), shape, tuple(dims))


def unbroadcast(type_: ArrayType, ct):
    """lax._unbroadcast: sum a cotangent back down to an operand's shape."""
    from spec.prims_structural import reduce_sum, reshape  # a cycle: prims_structural builds on this module
    if ct.shape == type_.shape:
        return ct
    if type_.ndim == 0:
        return reduce_sum(ct, tuple(range(ct.ndim)))
    dims = tuple(i for i, (a, b) in enumerate(zip(ct.shape, type_.shape)) if a != b)
    return reshape(reduce_sum(ct, dims), type_.shape)


def add_tangents(terms):
    """Sum the nonzero terms with add_any (JAX's `defjvp` accumulation)."""
    terms = [t for t in terms if t is not None and not isinstance(t, Zero)]
    if not terms:
        return None
    out = terms[0]
    for t in terms[1:]:
        out = add_any(out, t)
    return out


def _op_type(x):
    return x.type if isinstance(x, (Tracer, UndefinedPrimal)) else type_of(x)


# ==========================================================================
# unary floating-point primitives

neg_p = primitive("neg")
sin_p = primitive("sin", ["accuracy"])
cos_p = primitive("cos", ["accuracy"])
tanh_p = primitive("tanh", ["accuracy"])
exp_p = primitive("exp", ["accuracy"])
log_p = primitive("log", ["accuracy"])
log1p_p = primitive("log1p", ["accuracy"])
logistic_p = primitive("logistic", ["accuracy"])
sqrt_p = primitive("sqrt", ["accuracy"])
rsqrt_p = primitive("rsqrt", ["accuracy"])
square_p = primitive("square")
abs_p = primitive("abs")
integer_pow_p = primitive("integer_pow", ["y"])
for _p in (sin_p, cos_p, tanh_p, exp_p, log_p, log1p_p, logistic_p, sqrt_p, rsqrt_p):
    jax_facts[_p] = JaxFacts(_p.name, f"lambda x, accuracy=None: lax.{_p.name}(x, accuracy=accuracy)")
for _p in (neg_p, square_p, abs_p):
    jax_facts[_p] = JaxFacts(_p.name, f"lambda x: lax.{_p.name}(x)")
jax_facts[integer_pow_p] = JaxFacts("integer_pow", "lambda x, y: lax.integer_pow(x, y)")


def neg(x): return bind(neg_p, x)
def sin(x, accuracy=None): return bind(sin_p, x, accuracy=accuracy)
def cos(x, accuracy=None): return bind(cos_p, x, accuracy=accuracy)
def tanh(x, accuracy=None): return bind(tanh_p, x, accuracy=accuracy)
def exp(x, accuracy=None): return bind(exp_p, x, accuracy=accuracy)
def log(x, accuracy=None): return bind(log_p, x, accuracy=accuracy)
def log1p(x, accuracy=None): return bind(log1p_p, x, accuracy=accuracy)
def logistic(x, accuracy=None): return bind(logistic_p, x, accuracy=accuracy)
def sqrt(x, accuracy=None): return bind(sqrt_p, x, accuracy=accuracy)
def rsqrt(x, accuracy=None): return bind(rsqrt_p, x, accuracy=accuracy)
def abs(x): return bind(abs_p, x)   # noqa: A001  (lax's name)


def integer_pow(x, y: int):
    return bind(integer_pow_p, x, y=y)


def square(x):
    """x * x: square_p, or integer_pow[y=2] as lax.square bound it before
    jax 0.4.36 (spec.semantics: square_is_a_primitive)."""
    if not semantics().square_is_a_primitive:
        return integer_pow(x, 2)
    return bind(square_p, x)


_unary_ops = {
    sin_p: "sin", cos_p: "cos", tanh_p: "tanh", exp_p: "exp", log_p: "log", log1p_p: "log1p",
    logistic_p: "logistic", sqrt_p: "sqrt", rsqrt_p: "rsqrt", square_p: "square",
}
for _p, _op in _unary_ops.items():
    shape_rules[_p] = _float_unary_shape(_p)
    eval_rules[_p] = _unary_eval(_op)


def _accuracy_check(prim):
    base = shape_rules[prim]

    def rule(x, *, accuracy):
        if accuracy is not None:
            raise PrimitiveError(prim, f"accuracy={accuracy!r} is not supported; "
                                       "the spec models accuracy=None (the default)")
        return base(x)
    return rule


for _p in (sin_p, cos_p, tanh_p, exp_p, log_p, log1p_p, logistic_p, sqrt_p, rsqrt_p):
    shape_rules[_p] = _accuracy_check(_p)


def _numeric_unary_shape(prim):
    def rule(x: ArrayType, **params):
        if x.dtype == np.bool_:
            raise PrimitiveError(prim, f"operand must be numeric, got {x}")
        return [x]
    return rule


shape_rules[neg_p] = _numeric_unary_shape(neg_p)
eval_rules[neg_p] = _unary_eval("negative")


def _abs_shape(x: ArrayType):
    """unop(_complex_basetype, _signedint | _float | _complex, 'abs'): a
    complex operand gives its parts' dtype (|x| is real)."""
    _numeric_unary_shape(abs_p)(x)
    return [ArrayType(x.shape, real_dtype(x.dtype))]


def _abs_eval(x):
    xp = namespace(x)
    return xp.result(xp.abs(xp.compute(x)), real_dtype(x.dtype))


shape_rules[abs_p] = _abs_shape
eval_rules[abs_p] = _abs_eval


def _integer_pow_shape(x: ArrayType, *, y):
    if not isinstance(y, (int, np.integer)) or isinstance(y, bool):
        raise PrimitiveError(integer_pow_p, f"param y must be an int, got {y!r}")
    if x.dtype == np.bool_:
        raise PrimitiveError(integer_pow_p, f"operand must be numeric, got {x}")
    if y < 0 and not is_float(x.dtype):
        raise PrimitiveError(integer_pow_p, f"negative power {y} of integer operand {x}")
    return [x]


shape_rules[integer_pow_p] = _integer_pow_shape


def _integer_pow_eval(x, *, y):
    xp = namespace(x)
    if y == 0:
        return xp.result(np.ones(x.shape, dtype=object if xp.name == "sympy" else x.dtype), x.dtype)
    return xp.result(xp.power(xp.compute(x), y), x.dtype)


eval_rules[integer_pow_p] = _integer_pow_eval


# -- JVP rules: each mirrors jax 0.10.2's rule shape -----------------------

def _jvp_neg(primals, tangents):
    (x,), (t,) = primals, tangents
    return neg(x), neg(t)              # ad.deflinear2(neg_p, ...)


def _jvp_sin(primals, tangents, *, accuracy):
    (x,), (t,) = primals, tangents     # ad.defjvp(sin_p, lambda g, x: mul(g, cos(x)))
    ans = sin(x, accuracy=accuracy)
    return ans, mul(t, cos(x, accuracy=accuracy))


def _jvp_cos(primals, tangents, *, accuracy):
    (x,), (t,) = primals, tangents     # ad.defjvp(cos_p, lambda g, x: neg(mul(g, sin(x))))
    ans = cos(x, accuracy=accuracy)
    return ans, neg(mul(t, sin(x, accuracy=accuracy)))


def _jvp_tanh(primals, tangents, *, accuracy):
    # ad.defjvp2(tanh_p, lambda g, ans, x: mul(add(g, mul(g, ans)), sub(1, ans)))
    # so `ans` and `1 - ans` are what a backward pass reads.
    (x,), (t,) = primals, tangents
    ans = tanh(x, accuracy=accuracy)
    return ans, mul(add(t, mul(t, ans)), sub(_lit_like(ans, 1), ans))


def _jvp_exp(primals, tangents, *, accuracy):
    (x,), (t,) = primals, tangents     # ad.defjvp2(exp_p, lambda g, ans, x: mul(g, ans))
    ans = exp(x, accuracy=accuracy)
    return ans, mul(t, ans)


def _jvp_log(primals, tangents, *, accuracy):
    (x,), (t,) = primals, tangents     # ad.defjvp(log_p, lambda g, x: div(g, x))
    return log(x, accuracy=accuracy), div(t, x)


def _jvp_log1p(primals, tangents, *, accuracy):
    # ad.defjvp(log1p_p, lambda g, x: div(g, add(x, _one(x))))
    (x,), (t,) = primals, tangents
    ans = log1p(x, accuracy=accuracy)
    return ans, div(t, add(x, _lit_like(x, 1)))


def _jvp_logistic(primals, tangents, *, accuracy):
    # logistic_p's JVP: t * (ans * (1 - ans)), with the product formed from ans
    (x,), (t,) = primals, tangents
    ans = logistic(x, accuracy=accuracy)
    return ans, mul(t, mul(ans, sub(_lit_like(ans, 1), ans)))


def _jvp_sqrt(primals, tangents, *, accuracy):
    # ad.defjvp2(sqrt_p, lambda g, ans, x: mul(g, div(_const(x, 0.5), ans)))
    (x,), (t,) = primals, tangents
    ans = sqrt(x, accuracy=accuracy)
    return ans, mul(t, div(_lit_like(ans, 0.5), ans))


def _jvp_rsqrt(primals, tangents, *, accuracy):
    # ad.defjvp2(rsqrt_p, lambda g, ans, x: mul(g, mul(_const(x, -0.5), div(ans, x))))
    (x,), (t,) = primals, tangents
    ans = rsqrt(x, accuracy=accuracy)
    return ans, mul(t, mul(_lit_like(x, -0.5), div(ans, x)))


def _jvp_square(primals, tangents):
    # ad.defjvp2(square_p, lambda g, ans, x: mul(g, mul(_const(x, 2), x)))
    (x,), (t,) = primals, tangents
    ans = square(x)
    return ans, mul(t, mul(_lit_like(x, 2), x))


def _jvp_abs(primals, tangents):
    # def _abs_jvp_rule(g, ans, x):
    #   if _iscomplex(x):
    #     return _maybe_real(mul(g, div(_maybe_conj(x),
    #            _replace_zero(convert_element_type(ans, _dtype(x))))))
    #   else:
    #     return select(ge(x, _zero(x)), g, neg(g))
    # ad.defjvp2(abs_p, _abs_jvp_rule)   (select(p, a, b) == select_n(p, b, a))
    (x,), (t,) = primals, tangents
    ans = abs(x)
    if is_complex(x.dtype):
        return ans, _abs_jvp_complex(t, ans, x)
    return ans, select_n(ge(x, _lit_like(x, 0)), neg(t), t)


def _abs_jvp_complex(t, ans, x):
    """d|x| = real(t * conj(x) / |x|), |x| replaced by 1 where it is 0
    (lax._replace_zero: select(eq(x, 0), ones, x))."""
    from spec.prims_complex import conj, real  # a cycle: prims_complex builds on this module
    conj_x = conj(x)                    # evaluated first, as Python evaluates div's operands
    magnitude = convert_element_type(ans, x.dtype)
    safe = select_n(eq(magnitude, _lit_like(magnitude, 0)), magnitude, _full_like(magnitude, 1))
    return real(mul(t, div(conj_x, safe)))


def _jvp_integer_pow(primals, tangents, *, y):
    # _integer_pow_jvp: g * (y * x**(y-1)); y == 0 gives zeros; from jax
    # 0.10.1 (spec/semantics.py) y == 1 the tangent and y == 2 g * (2 * x)
    (x,), (t,) = primals, tangents
    ans = integer_pow(x, y)
    if y == 0:
        return ans, _full_like(t, 0)
    if y == 1 and semantics().integer_pow_small_y_jvp:
        return ans, t
    if y == 2 and semantics().integer_pow_small_y_jvp:
        return ans, mul(t, mul(_lit_like(x, y), x))
    coeff = mul(_lit_like(x, y), integer_pow(x, y - 1))
    return ans, mul(t, coeff)


jvp_rules.update({
    neg_p: _jvp_neg, sin_p: _jvp_sin, cos_p: _jvp_cos, tanh_p: _jvp_tanh,
    exp_p: _jvp_exp, log_p: _jvp_log, log1p_p: _jvp_log1p,
    logistic_p: _jvp_logistic, sqrt_p: _jvp_sqrt, rsqrt_p: _jvp_rsqrt,
    square_p: _jvp_square, abs_p: _jvp_abs, integer_pow_p: _jvp_integer_pow,
})


def _transpose_neg(ct, x):
    return [Zero(x.type) if isinstance(ct, Zero) else neg(ct)]


transpose_rules[neg_p] = _transpose_neg


# examples (checked by tests/test_primitive_examples.py): each reference is
# numpy, written independently of the rules above
_X34 = ((3, 4), "f32", "normal")
_AWAY34 = ((3, 4), "f32", "away_from_zero")
_POSITIVE34 = ((3, 4), "f32", "positive")


def _tanh_reference(x):
    e = np.exp(2.0 * x)
    return (e - 1.0) / (e + 1.0)


def _logistic_reference(x):          # another formula than the rule's 1 / (1 + exp(-x))
    return 0.5 * (1.0 + np.tanh(0.5 * x))


examples[neg_p] = [Example("neg", (_X34,), neg, lambda x: -x, linear=((True,),))]
examples[sin_p] = [Example("sin", (_X34,), sin, np.sin)]
examples[cos_p] = [Example("cos", (_X34,), cos, np.cos)]
examples[tanh_p] = [Example("tanh", (_X34,), tanh, _tanh_reference)]
examples[exp_p] = [Example("exp", (_X34,), exp, np.exp)]
examples[log_p] = [Example("log", (_POSITIVE34,), log, np.log)]
examples[log1p_p] = [Example("log1p", (((3, 4), "f32", "uniform:-0.5:2"),), log1p, lambda x: np.log(1.0 + x))]
examples[logistic_p] = [Example("logistic", (_X34,), logistic, _logistic_reference)]
examples[sqrt_p] = [Example("sqrt", (_POSITIVE34,), sqrt, lambda x: x ** 0.5)]
examples[rsqrt_p] = [Example("rsqrt", (_POSITIVE34,), rsqrt, lambda x: x ** -0.5)]
examples[square_p] = [Example("square", (_X34,), square, lambda x: x * x)]
examples[abs_p] = [Example("abs", (_AWAY34,), abs, lambda x: np.where(x < 0, -x, x))]
examples[integer_pow_p] = [
    Example("y0", (_X34,), lambda x: integer_pow(x, 0), lambda x: np.ones_like(x)),
    Example("y1", (_X34,), lambda x: integer_pow(x, 1), lambda x: x),
    Example("y2", (_X34,), lambda x: integer_pow(x, 2), lambda x: x * x),
    Example("y3", (_X34,), lambda x: integer_pow(x, 3), lambda x: x * x * x),
    Example("y-2", (_AWAY34,), lambda x: integer_pow(x, -2), lambda x: 1.0 / (x * x)),
    Example("i32-y3", (((5,), "i32", "ints:-5:6"),), lambda x: integer_pow(x, 3), lambda x: x * x * x),
]


# ==========================================================================
# binary arithmetic

add_p = primitive("add")
sub_p = primitive("sub")
mul_p = primitive("mul")
div_p = primitive("div")
max_p = primitive("max")
min_p = primitive("min")
add_any_p = primitive("add_any")   # tangent accumulation (ad_util.add_jaxvals_p)
for _p in (add_p, sub_p, mul_p, div_p, max_p, min_p):
    jax_facts[_p] = JaxFacts(_p.name, f"lambda x, y: lax.{_p.name}(x, y)")
jax_facts[add_any_p] = JaxFacts("add_any", "lambda x, y: ad_util.add_jaxvals(x, y)")
examples[add_any_p] = [Example("add_any", (((2, 3), "f32", "normal"), ((2, 3), "f32", "normal")),
                               lambda x, y: add_any(x, y), np.add, linear=((True, True),))]


def add(x, y): return bind(add_p, *_coerce(x, y))
def sub(x, y): return bind(sub_p, *_coerce(x, y))
def mul(x, y): return bind(mul_p, *_coerce(x, y))
def div(x, y): return bind(div_p, *_coerce(x, y))
def max(x, y): return bind(max_p, *_coerce(x, y))   # noqa: A001
def min(x, y): return bind(min_p, *_coerce(x, y))   # noqa: A001
def add_any(x, y): return bind(add_any_p, x, y)


for _p in (add_p, sub_p, mul_p, div_p, max_p, min_p):
    shape_rules[_p] = _binary_shape(_p)


def _add_any_shape(x, y):
    if x != y:
        raise PrimitiveError(add_any_p, f"operands must have equal types, got {x} and {y}")
    return [x]


shape_rules[add_any_p] = _add_any_shape


def _div_eval(x, y):
    if namespace(x, y).name == "sympy" or is_float(x.dtype):
        return _binary_eval("divide")(x, y)
    # lax.div on integers rounds toward zero (C semantics)
    with np.errstate(divide="ignore"):
        q = np.trunc(np.true_divide(x, y))
    return np.asarray(q).astype(x.dtype)


eval_rules.update({
    add_p: _binary_eval("add"), sub_p: _binary_eval("subtract"),
    mul_p: _binary_eval("multiply"), div_p: _div_eval,
    max_p: _binary_eval("maximum"), min_p: _binary_eval("minimum"),
    add_any_p: _binary_eval("add"),
})


def _jvp_add(primals, tangents):          # lax._add_jvp
    (x, y), (tx, ty) = primals, tangents
    ans = add(x, y)
    if isinstance(tx, Zero) and isinstance(ty, Zero):
        return ans, Zero(ans.type)
    if isinstance(tx, Zero):
        return ans, _maybe_broadcast(ans.shape, ty)
    if isinstance(ty, Zero):
        return ans, _maybe_broadcast(ans.shape, tx)
    return ans, add(tx, ty)


def _jvp_sub(primals, tangents):          # lax._sub_jvp
    (x, y), (tx, ty) = primals, tangents
    ans = sub(x, y)
    if isinstance(tx, Zero) and isinstance(ty, Zero):
        return ans, Zero(ans.type)
    if isinstance(tx, Zero):
        return ans, _maybe_broadcast(ans.shape, neg(ty))
    if isinstance(ty, Zero):
        return ans, _maybe_broadcast(ans.shape, tx)
    return ans, sub(tx, ty)


def _jvp_mul(primals, tangents):
    # ad.defjvp(mul_p, lambda xdot, x, y: mul(xdot, y), lambda ydot, x, y: mul(x, ydot))
    (x, y), (tx, ty) = primals, tangents
    ans = mul(x, y)
    terms = [None if isinstance(tx, Zero) else mul(tx, y),
             None if isinstance(ty, Zero) else mul(x, ty)]
    return ans, add_tangents(terms)


def _jvp_div(primals, tangents):
    # ad.defjvp(div_p, lambda g, x, y: div(g, y),
    #                  lambda g, x, y: mul(mul(neg(g), x), integer_pow(y, -2)))
    (x, y), (tx, ty) = primals, tangents
    ans = div(x, y)
    terms = [None if isinstance(tx, Zero) else div(tx, y),
             None if isinstance(ty, Zero) else mul(mul(neg(ty), x), integer_pow(y, -2))]
    return ans, add_tangents(terms)


def _balanced_eq(x, z, y):
    """lax._balanced_eq: 1 where x == z, halved where also y == z (ties split
    the derivative evenly between the operands of max/min)."""
    # lax writes select(pred, on_true, on_false) with on_true built first;
    # the same order here gives the same equations in the same order.
    x_is_z = eq(x, z)
    one, zero = _full_like(z, 1), _full_like(z, 0)
    num = select_n(x_is_z, zero, one)
    y_is_z = eq(y, z)
    two, one_ = _full_like(z, 2), _full_like(z, 1)
    den = select_n(y_is_z, one_, two)
    return div(num, den)


def _minmax_jvp(prim_fn):
    # ad.defjvp2(max_p, lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),
    #                   lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)))
    def rule(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        ans = prim_fn(x, y)
        terms = [None if isinstance(tx, Zero) else mul(tx, _balanced_eq(x, ans, y)),
                 None if isinstance(ty, Zero) else mul(ty, _balanced_eq(y, ans, x))]
        return ans, add_tangents(terms)
    return rule


def _jvp_add_any(primals, tangents):
    """ad.deflinear2(add_jaxvals_p, ...) (jax/_src/interpreters/ad.py:1168):
    linear_jvp, so a zero tangent beside a nonzero one is instantiated
    (`broadcast_in_dim 0.0` for an array: a known value the linearization
    saves, found by the ci draws under jvp of vmap of grad), add_any of
    the two."""
    return linear_jvp(add_any)(primals, tangents)


jvp_rules.update({
    add_p: _jvp_add, sub_p: _jvp_sub, mul_p: _jvp_mul, div_p: _jvp_div,
    max_p: _minmax_jvp(max), min_p: _minmax_jvp(min), add_any_p: _jvp_add_any,
})


def _transpose_add(ct, x, y):
    if isinstance(ct, Zero):
        return [Zero(_op_type(x)) if is_undefined(x) else None,
                Zero(_op_type(y)) if is_undefined(y) else None]
    return [unbroadcast(_op_type(x), ct) if is_undefined(x) else None,
            unbroadcast(_op_type(y), ct) if is_undefined(y) else None]


def _transpose_sub(ct, x, y):
    if isinstance(ct, Zero):
        return [Zero(_op_type(x)) if is_undefined(x) else None,
                Zero(_op_type(y)) if is_undefined(y) else None]
    return [unbroadcast(_op_type(x), ct) if is_undefined(x) else None,
            unbroadcast(_op_type(y), neg(ct)) if is_undefined(y) else None]


def _transpose_mul(ct, x, y):
    # lax._mul_transpose: linear in exactly one operand
    if is_undefined(x) and is_undefined(y):
        raise PrimitiveError(mul_p, "transpose of a product of two linear values (not linear)")
    if is_undefined(x):
        return [Zero(x.type) if isinstance(ct, Zero) else unbroadcast(x.type, mul(ct, y)), None]
    return [None, Zero(y.type) if isinstance(ct, Zero) else unbroadcast(y.type, mul(x, ct))]


def _transpose_div(ct, x, y):
    # lax._div_transpose_rule: linear in the numerator only
    if is_undefined(y):
        raise PrimitiveError(div_p, "transpose with respect to the divisor (not linear)")
    return [Zero(x.type) if isinstance(ct, Zero) else unbroadcast(x.type, div(ct, y)), None]


def _transpose_add_any(ct, x, y):
    return [ct if is_undefined(x) else None, ct if is_undefined(y) else None]


transpose_rules.update({
    add_p: _transpose_add, sub_p: _transpose_sub, mul_p: _transpose_mul,
    div_p: _transpose_div, add_any_p: _transpose_add_any,
})


def _add_reference(x, y): return x + y
def _sub_reference(x, y): return x - y
def _mul_reference(x, y): return x * y
def _div_reference(x, y): return x / y
def _max_reference(x, y): return np.where(x > y, x, y)
def _min_reference(x, y): return np.where(x < y, x, y)


def _truncating_div_reference(x, y):  # C's integer division: rounds toward zero
    return (np.sign(x) * np.sign(y) * (np.abs(x) // np.abs(y))).astype(np.int32)


_S = ((), "f32", "normal")
_X31, _X14, _X23 = ((3, 1), "f32", "normal"), ((1, 4), "f32", "normal"), ((2, 3), "f32", "normal")
_BOTH, _FIRST, _SECOND = ((True, True),), ((True, False),), ((False, True),)
# grids 0 and 0.25 (spec.examples): max/min operands never tie
_GRID34, _GRID34_OFF = ((3, 4), "f32", "grid:0"), ((3, 4), "f32", "grid:0.25")
examples[add_p] = [
    Example("add", (_X34, _X34), add, _add_reference, linear=_BOTH),
    Example("scalar", (_X34, _S), add, _add_reference, linear=_BOTH),
    Example("size1-dims", (_X31, _X14), add, _add_reference, linear=_BOTH),
]
examples[sub_p] = [
    Example("sub", (_X34, _X34), sub, _sub_reference, linear=_BOTH),
    Example("size1-dims", (_X14, _X31), sub, _sub_reference, linear=_BOTH),
    Example("scalar", (_S, _X23), sub, _sub_reference, linear=_BOTH),
]
examples[mul_p] = [
    Example("mul", (_X34, _X34), mul, _mul_reference, linear=_FIRST + _SECOND),
    Example("size1-dims", (_X31, _X14), mul, _mul_reference, linear=_FIRST + _SECOND),
    Example("scalar", (_S, _X23), mul, _mul_reference, linear=_FIRST + _SECOND),
    Example("python-literal", (((3,), "f32", "normal"),), lambda x: x * 2.5, lambda x: 2.5 * x,
            linear=((True,),)),
]
examples[div_p] = [
    Example("div", (_X34, _AWAY34), div, _div_reference, linear=_FIRST),
    Example("size1-dims", (_X31, ((1, 4), "f32", "away_from_zero")), div, _div_reference, linear=_FIRST),
    Example("scalar-divisor", (_X23, ((), "f32", "away_from_zero")), div, _div_reference, linear=_FIRST),
    Example("i32-truncates", (((6,), "i32", "ints:-9:10"), ((6,), "i32", "divisors")), div,
            _truncating_div_reference),
]
examples[max_p] = [
    Example("max", (_GRID34, _GRID34_OFF), max, _max_reference),
    Example("size1-dims", (((3, 1), "f32", "grid:0"), ((1, 4), "f32", "grid:0.25")), max, _max_reference),
]
examples[min_p] = [
    Example("min", (_GRID34, _GRID34_OFF), min, _min_reference),
    Example("scalar", (_GRID34, ((), "f32", "grid:0.25")), min, _min_reference),
]


# ==========================================================================
# comparisons (bool results, no tangents) and select_n

gt_p, lt_p, ge_p, le_p, eq_p, ne_p = (primitive(n) for n in ("gt", "lt", "ge", "le", "eq", "ne"))
for _p in (gt_p, lt_p, ge_p, le_p, eq_p, ne_p):
    jax_facts[_p] = JaxFacts(_p.name, f"lambda x, y: lax.{_p.name}(x, y)")


def gt(x, y): return bind(gt_p, *_coerce(x, y))
def lt(x, y): return bind(lt_p, *_coerce(x, y))
def ge(x, y): return bind(ge_p, *_coerce(x, y))
def le(x, y): return bind(le_p, *_coerce(x, y))
def eq(x, y): return bind(eq_p, *_coerce(x, y))
def ne(x, y): return bind(ne_p, *_coerce(x, y))


def _compare_eval(op: str):
    def rule(x, y):
        return np.asarray(getattr(namespace(x, y), op)(x, y), dtype=bool)
    return rule


for _p, _op in ((gt_p, "greater"), (lt_p, "less"), (ge_p, "greater_equal"),
                (le_p, "less_equal"), (eq_p, "equal"), (ne_p, "not_equal")):
    shape_rules[_p] = _binary_shape(_p, kinds=("float", "int", "bool"), out_dtype=np.dtype(bool))
    eval_rules[_p] = _compare_eval(_op)
    # comparisons are piecewise constant: a zero tangent (ad.defjvp_zero)
    jvp_rules[_p] = (lambda p: lambda primals, tangents: (bind(p, *primals), None))(_p)


# --------------------------------------------------------------------------
# lt_to, le_to, eq_to: the total-order comparisons (jnp.searchsorted,
# jnp.interp, jnp.digitize and jnp.histogram reach them through
# lax._sort_lt_comparator / _sort_le_comparator, in a scan)

lt_to_p, le_to_p, eq_to_p = (primitive(n) for n in ("lt_to", "le_to", "eq_to"))
for _p in (lt_to_p, le_to_p, eq_to_p):
    # no lax wrapper: bound as lax._sort_lt_comparator binds them
    jax_facts[_p] = JaxFacts(_p.name, f"lambda x, y: lax_internal.{_p.name}_p.bind(x, y)")


def lt_to(x, y): return bind(lt_to_p, *_coerce(x, y))
def le_to(x, y): return bind(le_to_p, *_coerce(x, y))
def eq_to(x, y): return bind(eq_to_p, *_coerce(x, y))


def _total_order_key(x):
    """XLA's TOTALORDER comparison of floats (lax._compare_lower_hlo with
    total_order=True) as an integer key: the bits as a signed integer, the
    bits below the sign flipped where the sign is set. So
    -NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN, and NaNs (of one
    sign and payload) are equal. Integers and bools keep their order."""
    x = np.asarray(x)
    if not is_float(x.dtype):
        return x
    bits = x.view(np.dtype(f"int{8 * x.dtype.itemsize}"))
    return np.where(bits < 0, bits ^ np.iinfo(bits.dtype).max, bits)


def _total_order_eval(op: str):
    """The comparison `op` (of _compare_eval) on total-order keys. Exact
    (sympy) values are real numbers, with no signed zeros or NaNs: their
    total order is the ordinary one."""
    compare = _compare_eval(op)

    def rule(x, y):
        if namespace(x, y).name == "sympy":
            return compare(x, y)
        return compare(_total_order_key(x), _total_order_key(y))
    return rule


for _p, _op in ((lt_to_p, "less"), (le_to_p, "less_equal"), (eq_to_p, "equal")):
    shape_rules[_p] = _binary_shape(_p, kinds=("float", "int", "bool"), out_dtype=np.dtype(bool))
    eval_rules[_p] = _total_order_eval(_op)
    # ad.defjvp_zero, as every comparison
    jvp_rules[_p] = (lambda p: lambda primals, tangents: (bind(p, *primals), None))(_p)
    # batching: broadcast_batcher (naryop's batching.defbroadcasting), in _register_batch_rules


select_n_p = primitive("select_n")
jax_facts[select_n_p] = JaxFacts("select_n", "lambda which, *cases: lax.select_n(which, *cases)")


def select_n(which, *cases):
    """cases[which]: `which` is bool (two cases) or int32 (any number)."""
    return bind(select_n_p, which, *cases)


def _select_n_shape(which: ArrayType, *cases: ArrayType):
    if not cases:
        raise PrimitiveError(select_n_p, "needs at least one case")
    check_memory_spaces(select_n_p, which, *cases)
    if any(c != cases[0] for c in cases):
        raise PrimitiveError(select_n_p, f"cases must have equal types, got {list(cases)}")
    if which.shape not in ((), cases[0].shape):
        raise PrimitiveError(select_n_p, f"predicate shape {which.shape} must be scalar or {cases[0].shape}")
    if which.dtype == np.bool_:
        if len(cases) > 2:
            raise PrimitiveError(select_n_p, "a bool predicate selects between at most 2 cases")
    elif which.dtype != np.int32:
        raise PrimitiveError(select_n_p, f"predicate must be bool or i32, got {which}")
    return [cases[0]]


def _select_n_eval(which, *cases):
    """cases[which] elementwise; an out-of-range `which` takes the nearest
    case (lax.select_n leaves it undefined; XLA's lowering, a bisection of
    `which < mid` selects, clamps it: measured on 0.10.2, -1 takes case 0
    and n case n-1, as a vmapped cond's index does)."""
    xp = namespace(*cases)
    cases = [xp.compute(c) if xp.name == "sympy" else np.asarray(c) for c in cases]
    out = np.choose(which.astype(np.int32), cases, mode="clip")
    return namespace(*cases).result(out, cases[0].dtype)


def _jvp_select_n(primals, tangents):
    # lax._select_jvp (jax/_src/lax/lax.py:8169): select the tangents with the
    # same predicate; every zero case tangent is one shared zero (`z =
    # _zeros(...)`, made once), so a linearization saves it once. JAX makes
    # that zero (like the first nonzero tangent) whether or not a case
    # tangent is zero: a dead `broadcast_in_dim` in the JVP that a
    # checkpoint's policy is asked about (found by a pristine campaign,
    # dee03d6bcc: a policy raising when asked about broadcast_in_dim)
    which, *cases = primals
    _, *case_ts = tangents
    ans = select_n(which, *cases)
    if all(isinstance(t, Zero) for t in case_ts):
        return ans, None
    # (a tangent may be a constant array: integer_pow's for y == 0 is `_zeros(g)`)
    zero = instantiate(Zero(to_atom(next(t for t in case_ts if not isinstance(t, Zero))).type))
    return ans, select_n(which, *[zero if isinstance(t, Zero) else t for t in case_ts])


def _transpose_select_n(ct, which, *cases):
    # lax._select_transpose_rule
    if is_undefined(which):
        raise PrimitiveError(select_n_p, "transpose with respect to the predicate (not linear)")
    if isinstance(ct, Zero):
        return [None] + [Zero(c.type) if is_undefined(c) else None for c in cases]
    zeros = _full_like(ct, 0)
    if which.dtype == np.bool_:
        ct0 = select_n(which, ct, zeros) if is_undefined(cases[0]) else None
        ct1 = select_n(which, zeros, ct) if len(cases) > 1 and is_undefined(cases[1]) else None
        return [None, ct0] + ([ct1] if len(cases) > 1 else [])
    return [None] + [select_n(eq(which, np.int32(i)), zeros, ct) if is_undefined(c) else None
                     for i, c in enumerate(cases)]


shape_rules[select_n_p] = _select_n_shape
eval_rules[select_n_p] = _select_n_eval
jvp_rules[select_n_p] = _jvp_select_n
transpose_rules[select_n_p] = _transpose_select_n


# comparisons on halves (exact, and often equal): bool results, exact
_HALVES45 = ((4, 5), "f32", "halves")
examples[gt_p] = [Example("gt", (_HALVES45, _HALVES45), gt, lambda x, y: x > y),
                  Example("scalar", (_HALVES45, ((), "f32", "halves")), gt, lambda x, y: x > y)]
examples[lt_p] = [Example("lt", (_HALVES45, _HALVES45), lt, lambda x, y: x < y)]
examples[ge_p] = [Example("ge", (_HALVES45, _HALVES45), ge, lambda x, y: x >= y)]
examples[le_p] = [Example("le", (_HALVES45, _HALVES45), le, lambda x, y: x <= y)]
examples[eq_p] = [Example("eq", (_HALVES45, _HALVES45), eq, lambda x, y: x == y),
                  Example("i32", (((8,), "i32", "ints:0:3"), ((8,), "i32", "ints:0:3")), eq, lambda x, y: x == y)]
examples[ne_p] = [Example("ne", (_HALVES45, _HALVES45), ne, lambda x, y: x != y)]


def _specials(x):
    """Halves made special where |x| is 0.5 or 1: +NaN (a literal), -NaN
    (its negation), -0.0 and +0.0 (x * 0.0, the sign of x), else x."""
    nan = np.asarray(np.nan, x.dtype)
    zero = mul(x, 0.0)
    x = select_n(eq(x, 0.5), x, _full_like(x, nan))
    x = select_n(eq(x, -0.5), x, neg(_full_like(x, nan)))
    return select_n(eq(abs(x), 1.0), x, zero)


def _ref_specials(x):
    x = np.asarray(x, np.float64)
    out = np.where(np.abs(x) == 1.0, x * 0.0, x)
    return np.where(x == 0.5, np.nan, np.where(x == -0.5, -np.abs(np.nan), out))


def _ref_total_order(op):
    """numpy: `op` on XLA's total-order keys of float64 values."""
    return lambda x, y: op(_total_order_key(np.asarray(x, np.float64)), _total_order_key(np.asarray(y, np.float64)))


def _total_order_examples(fn, op):
    return [Example("halves", (_HALVES45, _HALVES45), fn, op),
            Example("signed-zeros-and-nans", (_HALVES45, _HALVES45),
                    lambda x, y: fn(_specials(x), _specials(y)),
                    lambda x, y: _ref_total_order(op)(_ref_specials(x), _ref_specials(y))),
            Example("i32", (((8,), "i32", "ints:0:3"), ((8,), "i32", "ints:0:3")), fn, op)]


examples[lt_to_p] = _total_order_examples(lt_to, np.less)
examples[le_to_p] = _total_order_examples(le_to, np.less_equal)
examples[eq_to_p] = _total_order_examples(eq_to, np.equal)
examples[select_n_p] = [
    Example("bool", (((3, 4), "bool", "bools"), _X34, _X34), select_n, lambda p, a, b: np.where(p, b, a),
            linear=((False, True, True),)),
    Example("bool-scalar-pred", (((), "bool", "bools"), _X34, _X34), select_n, lambda p, a, b: b if p else a,
            linear=((False, True, True),)),
    Example("i32", (((3, 4), "i32", "indices:3"), _X34, _X34, _X34), select_n,
            lambda w, a, b, c: np.where(w == 0, a, np.where(w == 1, b, c)), linear=((False, True, True, True),)),
]


# ==========================================================================
# dtype conversion and stop_gradient

convert_element_type_p = primitive("convert_element_type", ["new_dtype", "weak_type"])
stop_gradient_p = primitive("stop_gradient")
jax_facts[stop_gradient_p] = JaxFacts("stop_gradient", "lambda x: lax.stop_gradient(x)")
# bound directly: lax.convert_element_type drops a same-dtype conversion
jax_facts[convert_element_type_p] = JaxFacts(
    "convert_element_type", "lambda x, new_dtype, weak_type: lax_internal.convert_element_type_p.bind("
    "x, new_dtype=np.dtype(new_dtype), weak_type=weak_type, sharding=None)")


def convert_element_type(x, new_dtype):
    return bind(convert_element_type_p, x, new_dtype=canonical_dtype(new_dtype), weak_type=False)


def _convert_shape(x, *, new_dtype, weak_type):
    new_dtype = canonical_dtype(new_dtype)
    if (is_key(x.dtype) or is_key(new_dtype)) and x.dtype != new_dtype:
        # keys are not numbers (jax.random.key_data / wrap_key_data convert them)
        raise PrimitiveError(convert_element_type_p, f"cannot convert {x} to {new_dtype}: keys "
                                                     f"convert only with random_unwrap / random_wrap")
    return [ArrayType(x.shape, new_dtype)]


def _convert_eval(x, *, new_dtype, weak_type):
    new_dtype = canonical_dtype(new_dtype)
    if namespace(x).name == "sympy":
        if not is_float(new_dtype):
            raise SymbolicError(f"convert_element_type: rounding a symbolic value to {new_dtype}")
        return x    # exact values have no precision to change
    if new_dtype == np.bool_:
        return x != 0
    if is_complex(x.dtype) and not is_complex(new_dtype):
        x = np.real(x)          # complex -> real takes the real part (XLA's convert)
    if is_float(x.dtype) and not is_float(new_dtype):
        # float -> int (i32, u32) rounds toward zero and saturates, NaN -> 0 (XLA:CPU)
        info = ml_dtypes.iinfo(new_dtype)
        x = np.clip(np.nan_to_num(np.trunc(x.astype(np.float64)), nan=0.0), info.min, info.max)
    return x.astype(new_dtype)      # int -> int wraps (two's complement), int -> float rounds


def _jvp_convert(primals, tangents, *, new_dtype, weak_type):
    # lax._convert_element_type_jvp_rule: convert the tangent; none to/from ints
    (x,), (t,) = primals, tangents
    ans = convert_element_type(x, new_dtype)
    if isinstance(t, Zero) or not is_float(new_dtype):
        return ans, None
    return ans, convert_element_type(t, new_dtype)


def _transpose_convert(ct, x, *, new_dtype, weak_type):
    if isinstance(ct, Zero):
        return [Zero(x.type)]
    return [convert_element_type(ct, x.type.dtype)]


shape_rules[convert_element_type_p] = _convert_shape
eval_rules[convert_element_type_p] = _convert_eval
jvp_rules[convert_element_type_p] = _jvp_convert
transpose_rules[convert_element_type_p] = _transpose_convert


def stop_gradient(x):
    """lax.stop_gradient: the identity on values. Its JVP is zero by
    definition: no tangent flows through `stop_gradient`."""
    return bind(stop_gradient_p, x)


shape_rules[stop_gradient_p] = lambda x: [x]
eval_rules[stop_gradient_p] = lambda x: x
# its tangent is a symbolic zero (ad.defjvp_zero): nothing flows back through it
jvp_rules[stop_gradient_p] = lambda primals, tangents: (stop_gradient(primals[0]), None)


def _to_f64(x): return x.astype(np.float64)


examples[convert_element_type_p] = [
    Example("f64", (_X34,), lambda x: convert_element_type(x, np.float64), _to_f64, linear=((True,),)),
    Example("from-f32-to-f64", (_X34,), lambda x: convert_element_type(x, np.float64), _to_f64,
            linear=((True,),), kept=(0,)),
    # from float64 (kept: a float32 operand would make it the identity, which JAX's bind drops,
    # jax/_src/lax/lax.py:5333 _convert_element_type_bind_with_trace)
    Example("to-f32", (((3, 4), "f64", "normal"),), lambda x: convert_element_type(x, np.float32), _to_f64,
            kept=(0,)),
    Example("to-i32", (((3, 4), "f32", "uniform:-5:5"),), lambda x: convert_element_type(x, np.int32),
            lambda x: np.trunc(x).astype(np.int32)),
    Example("i32-to-f64", (((3, 4), "i32", "ints:-100:100"),), lambda x: convert_element_type(x, np.float64),
            _to_f64),
    Example("to-bool", (((3, 4), "f32", "halves"),), lambda x: convert_element_type(x, np.bool_),
            lambda x: x != 0),
]
examples[stop_gradient_p] = [Example("stop_gradient", (_X34,), stop_gradient, lambda x: x, tangent="zero")]


# ==========================================================================
# batching rules (jax 0.10.2: vectorized for unary ops, broadcast_batcher
# for n-ary ones, add_batched for add_any, _select_batch_rule for select_n)

def _register_batch_rules():
    for p in (neg_p, sin_p, cos_p, tanh_p, exp_p, log_p, log1p_p, logistic_p, sqrt_p,
              rsqrt_p, square_p, abs_p, integer_pow_p, convert_element_type_p, stop_gradient_p):
        batch_rules[p] = vectorized_batcher(p)
    for p in (add_p, sub_p, mul_p, div_p, max_p, min_p, gt_p, lt_p, ge_p, le_p, eq_p, ne_p,
              lt_to_p, le_to_p, eq_to_p):
        batch_rules[p] = broadcast_batcher(p)
    batch_rules[add_any_p] = _batch_add_any
    batch_rules[select_n_p] = _batch_select_n


def _batch_add_any(args, dims):
    """batching.add_batched: align the batch axes, broadcasting an unbatched operand."""
    (x, y), (dx, dy) = args, dims
    if dx == dy:
        return add_any(x, y), dx
    if dx is None:
        return add_any(broadcast_at(x, y.shape[dy], dy), y), dy
    if dy is None:
        return add_any(x, broadcast_at(y, x.shape[dx], dx)), dx
    return add_any(moveaxis(x, dx, dy), y), dy


def _batch_select_n(args, dims):
    """lax._select_batch_rule."""
    from spec.prims_structural import broadcast_in_dim  # a cycle: prims_structural builds on this module
    which, *cases = args
    which_bdim, *case_bdims = dims
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    if all(which_bdim == b for b in case_bdims):
        if tuple(which.shape) == tuple(cases[0].shape):
            return select_n(which, *cases), which_bdim
        which = broadcast_in_dim(which, cases[0].shape, [which_bdim])
        return select_n(which, *cases), which_bdim
    if ndim(which) == 0 and all(b is not None for b in case_bdims):
        if all(case_bdims[0] == b for b in case_bdims[1:]):
            return select_n(which, *cases), case_bdims[0]
        if all(tuple(cases[0].shape) == tuple(c.shape) for c in cases):
            bdim = case_bdims[0]
            others = [moveaxis(c, cb, bdim) for c, cb in zip(cases[1:], case_bdims[1:])]
            return select_n(which, cases[0], *others), bdim
    which = bdim_at_front(which, which_bdim, size) if ndim(which) else which
    if not all(ndim(c) == 0 for c in cases):
        cases = [bdim_at_front(c, b, size) for c, b in zip(cases, case_bdims)]
    if 0 < ndim(which) < ndim(cases[0]):
        which = broadcast_in_dim(which, cases[0].shape, [0])
    if ndim(which) > ndim(cases[0]):
        cases = [broadcast_in_dim(c, which.shape, ()) for c in cases]
    return select_n(which, *cases), 0


_register_batch_rules()

# rules that hold for complex operands as JAX's do (holomorphic JVPs; the
# transposes pair by Re(sum(ct * v)) and do not conjugate: mul's is mul(ct, y))
complex_rules.update({neg_p, sin_p, cos_p, tanh_p, exp_p, log_p, log1p_p, logistic_p, sqrt_p, rsqrt_p, square_p,
                      abs_p, integer_pow_p, add_p, sub_p, mul_p, div_p, add_any_p, eq_p, ne_p, select_n_p,
                      convert_element_type_p, stop_gradient_p})
