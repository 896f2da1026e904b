"""Special functions: erf, erfc (jax/_src/lax/special.py and lax.py).

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

from spec.core import Example, JaxFacts, bind, examples, jax_facts, primitive
from spec.prims_elementwise import _float_unary_shape, _lit_like, _unary_eval, exp, mul, neg, square, unary_rules


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
