"""Special functions: erf, erfc, lgamma, digamma, polygamma
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

import numpy as np

from spec.batching import broadcast_batcher
from spec.core import (Example, JaxFacts, Zero, batch_rules, bind, eval_rules, examples, jax_facts, jvp_rules,
                       primitive, shape_rules)
from spec.prims_elementwise import (_binary_eval, _binary_shape, _coerce, _float_unary_shape, _lit_like, _unary_eval,
                                    add, exp, mul, neg, square, unary_rules)


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
