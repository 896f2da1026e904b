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

from spec.arrays import namespace
from spec.batching import vectorized_batcher
from spec.core import (Example, JaxFacts, PrimitiveError, batch_rules, bind, eval_rules, examples,
                       jax_facts, jvp_rules, primitive, shape_rules)
from spec.ir import ArrayType, is_float
from spec.prims_elementwise import _float_unary_shape, _lit_like, _unary_eval, exp, mul, neg, square


# the elementwise family's rule makers, shared (spec/prims_elementwise.py)
float_unary_shape = _float_unary_shape
unary_eval = _unary_eval


# --------------------------------------------------------------------------
# erf

erf_p = primitive("erf")


def erf(x):
    """The error function, 2/sqrt(pi) * integral_0^x exp(-t^2) dt."""
    return bind(erf_p, x)


shape_rules[erf_p] = float_unary_shape(erf_p)
eval_rules[erf_p] = unary_eval("erf")


def _erf_jvp(primals, tangents):
    """d erf(x) = 2/sqrt(pi) * exp(-x^2) dx. JAX (special.py):
    ad.defjvp(erf_p, lambda g, x: mul(_const(x, 2. / np.sqrt(np.pi)),
                                      mul(g, exp(neg(square(x))))))"""
    (x,), (g,) = primals, tangents
    out = erf(x)
    if g is None:
        return out, None
    return out, mul(_lit_like(x, 2.0 / np.sqrt(np.pi)), mul(g, exp(neg(square(x)))))


jvp_rules[erf_p] = _erf_jvp
batch_rules[erf_p] = vectorized_batcher(erf_p)
jax_facts[erf_p] = JaxFacts("erf", "lambda x: lax.erf(x)")
examples[erf_p] = [Example("erf", (((2, 3), "f32", "normal"),), erf,
                           np.vectorize(math.erf, otypes=[np.float64]))]


# --------------------------------------------------------------------------
# erfc

erfc_p = primitive("erfc")


def erfc(x):
    """The complementary error function, 1 - erf(x)."""
    return bind(erfc_p, x)


shape_rules[erfc_p] = float_unary_shape(erfc_p)
eval_rules[erfc_p] = unary_eval("erfc")


def _erfc_jvp(primals, tangents):
    """d erfc(x) = -2/sqrt(pi) * exp(-x^2) dx. JAX (special.py):
    ad.defjvp(erfc_p, lambda g, x: mul(_const(x, -2. / np.sqrt(np.pi)),
                                       mul(g, exp(neg(square(x))))))"""
    (x,), (g,) = primals, tangents
    out = erfc(x)
    if g is None:
        return out, None
    return out, mul(_lit_like(x, -2.0 / np.sqrt(np.pi)), mul(g, exp(neg(square(x)))))


jvp_rules[erfc_p] = _erfc_jvp
batch_rules[erfc_p] = vectorized_batcher(erfc_p)
jax_facts[erfc_p] = JaxFacts("erfc", "lambda x: lax.erfc(x)")
examples[erfc_p] = [Example("erfc", (((4,), "f32", "normal"),), erfc,
                            np.vectorize(math.erfc, otypes=[np.float64]))]
