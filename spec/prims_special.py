"""Special functions: erf, erfc, lgamma, digamma, polygamma, bessel_i0e,
bessel_i1e, igamma, igammac, igamma_grad_a, regularized_incomplete_beta
(jax/_src/lax/special.py and lax.py).

Each primitive is one block: its declaration and op, shape, evaluation,
JVP (in jax 0.10.2's rule shape, cited), batching, JAX facts and examples.

    >>> import spec
    >>> prog = spec.trace(lambda x: erf(x), spec.f32[3])
    >>> [str(r) for r in spec.saved_residuals(prog)]    # erf's JVP reads 2/sqrt(pi) and exp(-x^2)
    ['f32[] from a literal', 'f32[3] output of exp']
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from spec.arrays import namespace
from spec.batching import broadcast_batcher
from spec.core import (Example, JaxFacts, PrimitiveError, Zero, batch_rules, bind, eval_rules, examples, jax_facts,
                       jvp_rules, primitive, shape_rules)
from spec.ir import ArrayType, is_float
from spec.prims_elementwise import (_binary_eval, _binary_shape, _coerce, _float_unary_shape, _full_like, _lit_like,
                                    _unary_eval, add, add_tangents, broadcast_shapes, exp, gt, integer_pow, log, log1p,
                                    mul, neg, select_n, square, stop_gradient, sub, unary_rules)
from spec.prims_elementwise import abs as lax_abs


# the elementwise family's rule makers, shared (spec/prims_elementwise.py)
float_unary_shape = _float_unary_shape
unary_eval = _unary_eval


def _erf_like_jvp(fn, scale: float):
    """d fn(x) = scale * exp(-x^2) dx: erf's scale is 2/sqrt(pi), erfc's
    -2/sqrt(pi). JAX (special.py):
    ad.defjvp(erf_p, lambda g, x: mul(_const(x, 2. / np.sqrt(np.pi)),
                                      mul(g, exp(neg(square(x))))))
    ad.defjvp(erfc_p, lambda g, x: mul(_const(x, -2. / np.sqrt(np.pi)),
                                       mul(g, exp(neg(square(x))))))"""
    def rule(primals, tangents):
        (x,), (g,) = primals, tangents
        out = fn(x)
        if g is None:
            return out, None
        return out, mul(_lit_like(x, scale), mul(g, exp(neg(square(x)))))
    return rule


# --------------------------------------------------------------------------
# erf

erf_p = primitive("erf")


def erf(x):
    """The error function, 2/sqrt(pi) * integral_0^x exp(-t^2) dt."""
    return bind(erf_p, x)


unary_rules(erf_p, float_unary_shape(erf_p), unary_eval("erf"), _erf_like_jvp(erf, 2.0 / np.sqrt(np.pi)))
jax_facts[erf_p] = JaxFacts("erf", "lambda x: lax.erf(x)")
examples[erf_p] = [Example("erf", (((2, 3), "f32", "normal"),), erf,
                           np.vectorize(math.erf, otypes=[np.float64]))]


# --------------------------------------------------------------------------
# erfc

erfc_p = primitive("erfc")


def erfc(x):
    """The complementary error function, 1 - erf(x)."""
    return bind(erfc_p, x)


unary_rules(erfc_p, float_unary_shape(erfc_p), unary_eval("erfc"), _erf_like_jvp(erfc, -2.0 / np.sqrt(np.pi)))
jax_facts[erfc_p] = JaxFacts("erfc", "lambda x: lax.erfc(x)")
examples[erfc_p] = [Example("erfc", (((4,), "f32", "normal"),), erfc,
                            np.vectorize(math.erfc, otypes=[np.float64]))]


# --------------------------------------------------------------------------
# the gamma family: lgamma, digamma, polygamma (special.py)

lgamma_p = primitive("lgamma")
digamma_p = primitive("digamma")
polygamma_p = primitive("polygamma")


def lgamma(x):
    """log|Gamma(x)| (jax.scipy.special.gammaln)."""
    return bind(lgamma_p, x)


def digamma(x):
    """psi(x) = d/dx log Gamma(x)."""
    return bind(digamma_p, x)


def polygamma(m, x):
    """psi^(m)(x), the m-th derivative of digamma (m a non-negative integer)."""
    return bind(polygamma_p, *_coerce(m, x))


def _lgamma_jvp(primals, tangents):
    """ad.defjvp(lgamma_p, lambda g, x: mul(g, digamma(x)))"""
    (x,), (g,) = primals, tangents
    return lgamma(x), (None if g is None else mul(g, digamma(x)))


def _digamma_jvp(primals, tangents):
    """ad.defjvp(digamma_p, lambda g, x: mul(g, polygamma(_const(x, 1), x)))"""
    (x,), (g,) = primals, tangents
    return digamma(x), (None if g is None else mul(g, polygamma(_lit_like(x, 1), x)))


def _polygamma_jvp(primals, tangents):
    """ad.defjvp(polygamma_p, polygamma_gradm, polygamma_gradx):
    polygamma_gradm raises; polygamma_gradx(g, m, x) = g * polygamma(m + 1, x)."""
    (m, x), (tm, tx) = primals, tangents
    if not isinstance(tm, Zero):
        raise ValueError("polygamma gradient with respect to m is not supported")
    ans = polygamma(m, x)
    return ans, (None if isinstance(tx, Zero) else mul(tx, polygamma(add(m, _lit_like(m, 1)), x)))


unary_rules(lgamma_p, float_unary_shape(lgamma_p), unary_eval("lgamma"), _lgamma_jvp)
unary_rules(digamma_p, float_unary_shape(digamma_p), unary_eval("digamma"), _digamma_jvp)
shape_rules[polygamma_p] = _binary_shape(polygamma_p, kinds=("float",))
eval_rules[polygamma_p] = _binary_eval("polygamma")
jvp_rules[polygamma_p] = _polygamma_jvp
batch_rules[polygamma_p] = broadcast_batcher(polygamma_p)
jax_facts[lgamma_p] = JaxFacts("lgamma", "lambda x: lax.lgamma(x)")
jax_facts[digamma_p] = JaxFacts("digamma", "lambda x: lax.digamma(x)")
jax_facts[polygamma_p] = JaxFacts("polygamma", "lambda m, x: lax.polygamma(m, x)")
def _polygamma_reference(m: int):
    """psi^(m) by sympy's arbitrary-precision evaluation (an independent source)."""
    def value(x):
        import sympy  # only for these references (slow to import)
        return float(sympy.polygamma(m, sympy.Float(float(x), 30)).evalf(25))
    return np.vectorize(value, otypes=[np.float64])


examples[lgamma_p] = [
    Example("lgamma", (((2, 3), "f32", "positive"),), lgamma, np.vectorize(math.lgamma, otypes=[np.float64])),
    Example("lgamma-negative", (((4,), "f32", "uniform:-2.9:-2.1"),), lgamma,
            np.vectorize(math.lgamma, otypes=[np.float64])),
]
examples[digamma_p] = [
    Example("digamma", (((2, 3), "f32", "positive"),), digamma, _polygamma_reference(0)),
    Example("digamma-negative", (((4,), "f32", "uniform:-1.9:-1.1"),), digamma, _polygamma_reference(0)),
]
examples[polygamma_p] = [
    Example("trigamma", (((2, 3), "f32", "positive"),), lambda x: polygamma(_lit_like(x, 1), x),
            _polygamma_reference(1)),
    Example("tetragamma-negative", (((4,), "f32", "uniform:-1.9:-1.1"),), lambda x: polygamma(_lit_like(x, 2), x),
            _polygamma_reference(2)),
]


# --------------------------------------------------------------------------
# the exponentially scaled modified Bessel functions: bessel_i0e, bessel_i1e
# (special.py; jax.scipy.special.i0e/i1e, and i0/i1 = exp(|x|) * i0e/i1e)

bessel_i0e_p = primitive("bessel_i0e")
bessel_i1e_p = primitive("bessel_i1e")


def bessel_i0e(x):
    """exp(-|x|) I0(x) (jax.scipy.special.i0e)."""
    return bind(bessel_i0e_p, x)


def bessel_i1e(x):
    """exp(-|x|) I1(x) (jax.scipy.special.i1e)."""
    return bind(bessel_i1e_p, x)


def _bessel_i0e_jvp(primals, tangents):
    """d i0e = (i1e(x) - sign(x) i0e(x)) dx. JAX (special.py), with the primal
    output y (defjvp2):
    ad.defjvp2(bessel_i0e_p, lambda g, y, x: g * (bessel_i1e(x) - sign(x) * y))"""
    from spec.prims_math import sign  # a cycle: prims_math builds on this module
    (x,), (g,) = primals, tangents
    y = bessel_i0e(x)
    return y, (None if g is None else mul(g, sub(bessel_i1e(x), mul(sign(x), y))))


unary_rules(bessel_i0e_p, float_unary_shape(bessel_i0e_p), unary_eval("bessel_i0e"), _bessel_i0e_jvp)
jax_facts[bessel_i0e_p] = JaxFacts("bessel_i0e", "lambda x: lax.bessel_i0e(x)")


def _bessel_i1e_jvp(primals, tangents):
    """d i1e = (i0e(x) - i1e(x) (sign(x) + 1/x)) dx, 1/2 at |x| <= eps (the
    limit at 0). JAX (special.py), with the primal output y (defjvp2):
    def _bessel_i1e_jvp(g, y, x):
      eps = dtypes.finfo(_dtype(x)).eps
      x_is_not_tiny = abs(x) > eps
      safe_x = select(x_is_not_tiny, x, full_like(x, eps))
      dy_dx = bessel_i0e(safe_x) - y * (sign(safe_x) + reciprocal(safe_x))
      dy_dx = select(x_is_not_tiny, dy_dx, full_like(x, 0.5))
      return g * dy_dx
    ad.defjvp2(bessel_i1e_p, _bessel_i1e_jvp)"""
    from spec.prims_math import sign  # a cycle: prims_math builds on this module
    (x,), (g,) = primals, tangents
    y = bessel_i1e(x)
    if g is None:
        return y, None
    eps = float(ml_dtypes.finfo(x.dtype).eps)
    x_is_not_tiny = gt(lax_abs(x), _lit_like(x, eps))
    safe_x = select_n(x_is_not_tiny, _full_like(x, eps), x)           # select(pred, x, full)
    dy_dx = sub(bessel_i0e(safe_x), mul(y, add(sign(safe_x), integer_pow(safe_x, -1))))
    dy_dx = select_n(x_is_not_tiny, _full_like(x, 0.5), dy_dx)
    return y, mul(g, dy_dx)


unary_rules(bessel_i1e_p, float_unary_shape(bessel_i1e_p), unary_eval("bessel_i1e"), _bessel_i1e_jvp)
jax_facts[bessel_i1e_p] = JaxFacts("bessel_i1e", "lambda x: lax.bessel_i1e(x)")


def _bessel_ie_reference(nu: int):
    """exp(-|x|) I_nu(x) by mpmath (sympy's arbitrary-precision library: an
    independent source; numpy's i0 would do for nu = 0 only)."""
    def value(x):
        import mpmath  # only for these references (sympy's dependency)
        with mpmath.workdps(30):
            return float(mpmath.besseli(nu, x) * mpmath.exp(-abs(mpmath.mpf(float(x)))))
    return np.vectorize(value, otypes=[np.float64])


examples[bessel_i0e_p] = [
    Example("i0e", (((2, 3), "f32", "normal"),), bessel_i0e, lambda x: np.i0(x) * np.exp(-np.abs(x))),
    Example("i0e-large", (((4,), "f32", "uniform:8:40"),), bessel_i0e, _bessel_ie_reference(0)),
]
examples[bessel_i1e_p] = [
    Example("i1e", (((2, 3), "f32", "normal"),), bessel_i1e, _bessel_ie_reference(1)),
    Example("i1e-large-negative", (((4,), "f32", "uniform:-40:-8"),), bessel_i1e, _bessel_ie_reference(1)),
]


# --------------------------------------------------------------------------
# the regularized incomplete gamma functions: igamma, igammac, igamma_grad_a
# (special.py; jax.scipy.special.gammainc, gammaincc). lax.random_gamma_grad
# is no primitive in jax 0.10.2: it traces XLA's algorithm inline (while
# loops, selects), so it has no block here.

igamma_p = primitive("igamma")
igammac_p = primitive("igammac")
igamma_grad_a_p = primitive("igamma_grad_a")
IGAMMA_GRAD_A_JVP_ERROR = "Differentiation rule for 'igamma_grad_a' not implemented"


def igamma(a, x):
    """P(a, x) = gamma(a, x) / Gamma(a) (jax.scipy.special.gammainc)."""
    return bind(igamma_p, *_coerce(a, x))


def igammac(a, x):
    """Q(a, x) = 1 - P(a, x) (jax.scipy.special.gammaincc)."""
    return bind(igammac_p, *_coerce(a, x))


def igamma_grad_a(a, x):
    """dP(a, x)/da."""
    return bind(igamma_grad_a_p, *_coerce(a, x))


def _igamma_gradx(g, a, x):
    """igamma_gradx(g, a, x) = g * exp(-x + (a - _ones(a)) * log(x) - lgamma(a))"""
    return mul(g, exp(sub(add(neg(x), mul(sub(a, _full_like(a, 1)), log(x))), lgamma(a))))


def _igamma_jvp(primals, tangents):
    """ad.defjvp(igamma_p, igamma_grada, igamma_gradx):
    igamma_grada(g, a, x) = g * igamma_grad_a(a, x); igamma_gradx above."""
    (a, x), (ta, tx) = primals, tangents
    ans = igamma(a, x)
    return ans, add_tangents([None if isinstance(ta, Zero) else mul(ta, igamma_grad_a(a, x)),
                              None if isinstance(tx, Zero) else _igamma_gradx(tx, a, x)])


shape_rules[igamma_p] = _binary_shape(igamma_p, kinds=("float",))
eval_rules[igamma_p] = _binary_eval("igamma")
jvp_rules[igamma_p] = _igamma_jvp
batch_rules[igamma_p] = broadcast_batcher(igamma_p)
jax_facts[igamma_p] = JaxFacts("igamma", "lambda a, x: lax.igamma(a, x)", literal_operands_folded=True)


def _igammac_jvp(primals, tangents):
    """ad.defjvp(igammac_p, igammac_grada, igammac_gradx):
    igammac_grada(g, a, x) = -igamma_grada(g, a, x);
    igammac_gradx(g, a, x) = -igamma_gradx(g, a, x)"""
    (a, x), (ta, tx) = primals, tangents
    ans = igammac(a, x)
    return ans, add_tangents([None if isinstance(ta, Zero) else neg(mul(ta, igamma_grad_a(a, x))),
                              None if isinstance(tx, Zero) else neg(_igamma_gradx(tx, a, x))])


shape_rules[igammac_p] = _binary_shape(igammac_p, kinds=("float",))
eval_rules[igammac_p] = _binary_eval("igammac")
jvp_rules[igammac_p] = _igammac_jvp
batch_rules[igammac_p] = broadcast_batcher(igammac_p)
jax_facts[igammac_p] = JaxFacts("igammac", "lambda a, x: lax.igammac(a, x)", literal_operands_folded=True)


def _igamma_grad_a_jvp(primals, tangents):
    """JAX registers no JVP for igamma_grad_a_p (standard_naryop only): jvp,
    grad and linearize raise NotImplementedError with this message (a second
    derivative of igamma in a)."""
    raise NotImplementedError(IGAMMA_GRAD_A_JVP_ERROR)


shape_rules[igamma_grad_a_p] = _binary_shape(igamma_grad_a_p, kinds=("float",))
eval_rules[igamma_grad_a_p] = _binary_eval("igamma_grad_a")
jvp_rules[igamma_grad_a_p] = _igamma_grad_a_jvp
batch_rules[igamma_grad_a_p] = broadcast_batcher(igamma_grad_a_p)
jax_facts[igamma_grad_a_p] = JaxFacts("igamma_grad_a", "lambda a, x: lax.igamma_grad_a(a, x)")


def _igamma_reference(kind: str):
    """P, Q or dP/da by mpmath (30 digits; dP/da by mpmath's numerical
    differentiation at that precision): an independent source."""
    def value(a, x):
        import mpmath  # only for these references (sympy's dependency)
        with mpmath.workdps(30):
            a, x = mpmath.mpf(float(a)), mpmath.mpf(float(x))
            if kind == "igamma":
                return float(mpmath.gammainc(a, 0, x, regularized=True))
            if kind == "igammac":
                return float(mpmath.gammainc(a, x, mpmath.inf, regularized=True))
            return float(mpmath.diff(lambda s: mpmath.gammainc(s, 0, x, regularized=True), a))
    return np.vectorize(value, otypes=[np.float64])


# a in (0.5, 6), x in (0.1, 9): both the series (x < 1 or x <= a) and the continued fraction
_A, _X = ((2, 3), "f32", "uniform:0.5:6"), ((2, 3), "f32", "uniform:0.1:9")
examples[igamma_p] = [
    Example("gammainc", (_A, _X), igamma, _igamma_reference("igamma")),
    Example("gammainc-scalar-a", (((4,), "f32", "uniform:0.1:4"),), lambda x: igamma(_lit_like(x, 1.5), x),
            lambda x: _igamma_reference("igamma")(1.5, x)),
]
examples[igammac_p] = [
    Example("gammaincc", (_A, _X), igammac, _igamma_reference("igammac")),
]
# no derivative in JAX: the operands pass stop_gradient first
examples[igamma_grad_a_p] = [
    Example("gammainc-grad-a", (_A, _X), lambda a, x: igamma_grad_a(stop_gradient(a), stop_gradient(x)),
            _igamma_reference("igamma_grad_a"), tangent="zero"),
]


# --------------------------------------------------------------------------
# regularized_incomplete_beta (special.py; jax.scipy.special.betainc)

regularized_incomplete_beta_p = primitive("regularized_incomplete_beta")
BETAINC_GRAD_AB_ERROR = "Betainc gradient with respect to a and b not supported."


def betainc(a, b, x):
    """I_x(a, b) = B(x; a, b) / B(a, b) (lax.betainc)."""
    a, x = _coerce(a, x)
    b, x = _coerce(b, x)
    a, b = _coerce(a, b)
    return bind(regularized_incomplete_beta_p, a, b, x)


def _betainc_shape(a: ArrayType, b: ArrayType, x: ArrayType):
    if not a.dtype == b.dtype == x.dtype:
        raise PrimitiveError(regularized_incomplete_beta_p, f"operands must have one dtype, got {a}, {b} and {x}")
    if not is_float(a.dtype):
        raise PrimitiveError(regularized_incomplete_beta_p, f"operands must be floating point, got {a}")
    ab = ArrayType(broadcast_shapes(regularized_incomplete_beta_p, a, b), a.dtype)
    return [ArrayType(broadcast_shapes(regularized_incomplete_beta_p, ab, x), a.dtype)]


def _betainc_eval(a, b, x):
    xp = namespace(a, b, x)
    return xp.result(xp.regularized_incomplete_beta(xp.compute(a), xp.compute(b), xp.compute(x)), a.dtype)


def _betainc_jvp(primals, tangents):
    """ad.defjvp(regularized_incomplete_beta_p, betainc_grad_not_implemented,
    betainc_grad_not_implemented, betainc_gradx): a tangent for a or b raises
    JAX's ValueError, word for word;
    betainc_gradx(g, a, b, x):
      lbeta = lgamma(a) + lgamma(b) - lgamma(a + b)
      partial_x = exp((b - 1) * log1p(-x) + (a - 1) * log(x) - lbeta)
      return partial_x * g"""
    (a, b, x), (ta, tb, tx) = primals, tangents
    if not (isinstance(ta, Zero) and isinstance(tb, Zero)):
        raise ValueError(BETAINC_GRAD_AB_ERROR)
    ans = betainc(a, b, x)
    if isinstance(tx, Zero):
        return ans, None
    lbeta = sub(add(lgamma(a), lgamma(b)), lgamma(add(a, b)))
    partial_x = exp(sub(add(mul(sub(b, _lit_like(b, 1)), log1p(neg(x))), mul(sub(a, _lit_like(a, 1)), log(x))), lbeta))
    return ans, mul(partial_x, tx)


shape_rules[regularized_incomplete_beta_p] = _betainc_shape
eval_rules[regularized_incomplete_beta_p] = _betainc_eval
jvp_rules[regularized_incomplete_beta_p] = _betainc_jvp
batch_rules[regularized_incomplete_beta_p] = broadcast_batcher(regularized_incomplete_beta_p)
jax_facts[regularized_incomplete_beta_p] = JaxFacts("regularized_incomplete_beta",
                                                    "lambda a, b, x: lax.betainc(a, b, x)",
                                                    literal_operands_folded=True)


def _betainc_reference(a: float, b: float):
    """I_x(a, b) by mpmath (30 digits): an independent source."""
    def value(x):
        import mpmath  # only for these references (sympy's dependency)
        with mpmath.workdps(30):
            return float(mpmath.betainc(a, b, 0, mpmath.mpf(float(x)), regularized=True))
    return np.vectorize(value, otypes=[np.float64])


# a and b are constants: JAX has no derivative in them (the fuzzer draws
# examples differentiated in every float operand); x on both sides of
# (a+1)/(a+b+2), where the algorithm switches to 1 - I_{1-x}(b, a)
examples[regularized_incomplete_beta_p] = [
    Example(f"betainc-a{a}-b{b}", (((2, 3), "f32", "uniform:0.05:0.95"),),
            (lambda a, b: lambda x: betainc(_lit_like(x, a), _lit_like(x, b), x))(a, b), _betainc_reference(a, b))
    for a, b in ((2.5, 1.5), (0.7, 3.0), (6.0, 9.0))
]
