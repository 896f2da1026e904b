"""Complex numbers (jax/_src/lax/lax.py): complex, real, imag, conj.

One block per primitive, as in spec/prims_math.py. All four are linear
(`ad.deflinear2`, conj's `ad.linear_jvp`), so a backward pass saves nothing
of them:

    >>> import spec
    >>> prog = spec.trace(lambda x, y: real(complex(x, y)), spec.f32[3], spec.f32[3])
    >>> spec.saved_residuals(prog)
    []

JAX's transposes pair a complex cotangent `ct` with a complex value `v` by
Re(sum(ct * v)), without conjugating (jax issue 6223): complex(x, y)'s
transpose gives (real(ct), -imag(ct)), real's complex(ct, 0), imag's
complex(0, -ct). A real value's cotangent is real.
"""
from __future__ import annotations

import numpy as np

from spec.batching import broadcast_batcher, vectorized_batcher
from spec.core import (Example, JaxFacts, PrimitiveError, Zero, batch_rules, bind, complex_rules, eval_rules,
                       examples, is_undefined, jax_facts, jvp_rules, linear_jvp, primitive, shape_rules,
                       transpose_rules)
from spec.ir import ArrayType, canonical_dtype, complex_dtype, is_complex, real_dtype
from spec.prims_elementwise import broadcast_shapes, mul, neg, unbroadcast

# lax._complex_elem_types: the real dtypes with a complex counterpart
COMPLEX_PART_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _numeric(x, prim):
    """x as a numpy array; symbolic (sympy) values are not modelled here."""
    x = np.asarray(x)
    if x.dtype == object:
        raise TypeError(f"{prim.name}: no symbolic evaluation of complex values")
    return x


# ==========================================================================
# complex

complex_p = primitive("complex")


def complex(x, y):  # noqa: A001  (lax's name)
    """x + i*y: a complex value from its real and imaginary parts."""
    return bind(complex_p, x, y)


def _complex_shape(x: ArrayType, y: ArrayType):
    """naryop(_complex_dtype, [_complex_elem_types, _complex_elem_types]):
    two float32 or two float64 operands -> complex64 or complex128."""
    if x.dtype != y.dtype or x.dtype not in COMPLEX_PART_DTYPES:
        raise PrimitiveError(complex_p, f"operands must both be float32 or both float64, got {x} and {y}")
    return [ArrayType(broadcast_shapes(complex_p, x, y), complex_dtype(x.dtype))]


def _complex_eval(x, y):
    """x + i*y, each part exactly (no rounding of a sum)."""
    x, y = np.broadcast_arrays(_numeric(x, complex_p), _numeric(y, complex_p))
    out = np.empty(x.shape, complex_dtype(x.dtype))
    out.real, out.imag = x, y
    return out


def _complex_transpose(ct, x, y):
    # def _complex_transpose_rule(t, x, y):
    #   ... if ad.is_undefined_primal(x) and ad.is_undefined_primal(y):
    #     return [_unbroadcast(x.aval, real(t)), _unbroadcast(y.aval, imag(neg(t)))]
    #   elif ad.is_undefined_primal(x): return [_unbroadcast(x.aval, real(t)), None]
    #   else: return [None, _unbroadcast(y.aval, imag(neg(t)))]
    # (a Zero cotangent gives Zero cotangents)
    if isinstance(ct, Zero):
        return [Zero(x.type) if is_undefined(x) else None, Zero(y.type) if is_undefined(y) else None]
    return [unbroadcast(x.type, real(ct)) if is_undefined(x) else None,
            unbroadcast(y.type, imag(neg(ct))) if is_undefined(y) else None]


shape_rules[complex_p] = _complex_shape
eval_rules[complex_p] = _complex_eval
jvp_rules[complex_p] = linear_jvp(complex)              # ad.deflinear2(complex_p, _complex_transpose_rule)
transpose_rules[complex_p] = _complex_transpose
batch_rules[complex_p] = broadcast_batcher(complex_p)    # naryop: broadcast_batcher
complex_rules.add(complex_p)
jax_facts[complex_p] = JaxFacts("complex", "lambda x, y: lax.complex(x, y)")


# ==========================================================================
# real, imag

real_p = primitive("real")
imag_p = primitive("imag")


def real(x):
    """The real part of a complex x."""
    return bind(real_p, x)


def imag(x):
    """The imaginary part of a complex x."""
    return bind(imag_p, x)


def _part_shape(prim):
    """unop(_complex_basetype, _complex, name): complex in, its part's dtype out."""
    def rule(x: ArrayType):
        if not is_complex(x.dtype):
            raise PrimitiveError(prim, f"operand must be complex, got {x}")
        return [ArrayType(x.shape, real_dtype(x.dtype))]
    return rule


def _real_eval(x):
    x = _numeric(x, real_p)
    return np.real(x).astype(real_dtype(x.dtype))


def _imag_eval(x):
    x = _numeric(x, imag_p)
    return np.imag(x).astype(real_dtype(x.dtype))


def _real_transpose(ct, x):
    # ad.deflinear2(real_p, lambda t, _: [complex(t, np.zeros((), _dtype(t)))])
    if isinstance(ct, Zero):
        return [Zero(x.type)]
    return [complex(ct, np.zeros((), ct.dtype))]


def _imag_transpose(ct, x):
    # ad.deflinear2(imag_p, lambda t, _: [complex(np.zeros((), _dtype(t)), neg(t))])
    if isinstance(ct, Zero):
        return [Zero(x.type)]
    return [complex(np.zeros((), ct.dtype), neg(ct))]


shape_rules[real_p] = _part_shape(real_p)
eval_rules[real_p] = _real_eval
jvp_rules[real_p] = linear_jvp(real)
transpose_rules[real_p] = _real_transpose
batch_rules[real_p] = vectorized_batcher(real_p)
complex_rules.add(real_p)
jax_facts[real_p] = JaxFacts("real", "lambda x: lax.real(x)")

shape_rules[imag_p] = _part_shape(imag_p)
eval_rules[imag_p] = _imag_eval
jvp_rules[imag_p] = linear_jvp(imag)
transpose_rules[imag_p] = _imag_transpose
batch_rules[imag_p] = vectorized_batcher(imag_p)
complex_rules.add(imag_p)
jax_facts[imag_p] = JaxFacts("imag", "lambda x: lax.imag(x)")


# ==========================================================================
# conj

conj_p = primitive("conj", ["input_dtype"])


def conj(x):
    """The complex conjugate x* = real(x) - i*imag(x); a real x gives x + 0i."""
    return bind(conj_p, x, input_dtype=np.dtype(x.dtype))


def _conj_shape(x: ArrayType, *, input_dtype):
    """unop(_complex_dtype, _complex_elem_types | _complex, 'conj'): float32,
    float64 or complex in, complex out; input_dtype is the operand's dtype."""
    if not (is_complex(x.dtype) or x.dtype in COMPLEX_PART_DTYPES):
        raise PrimitiveError(conj_p, f"operand must be float32, float64 or complex, got {x}")
    if canonical_dtype(input_dtype) != x.dtype:
        raise PrimitiveError(conj_p, f"input_dtype={input_dtype} is not the operand's dtype {x.dtype}")
    return [ArrayType(x.shape, complex_dtype(x.dtype))]


def _conj_eval(x, *, input_dtype):
    x = _numeric(x, conj_p)
    return np.conj(x).astype(complex_dtype(x.dtype))


def _conj_jvp(primals, tangents, *, input_dtype):
    # ad.primitive_jvps[conj_p] = partial(ad.linear_jvp, conj_p)
    return linear_jvp(lambda x, input_dtype: bind(conj_p, x, input_dtype=input_dtype))(
        primals, tangents, input_dtype=input_dtype)


def _conj_transpose(ct, x, *, input_dtype):
    # def _conj_transpose_rule(t, x, *, input_dtype):
    #   if type(t) is ad_util.Zero: return [ad_util.Zero(x.aval)]
    #   elif dtypes.issubdtype(input_dtype, np.complexfloating): return [conj(t)]
    #   else: return [real(t)]
    if isinstance(ct, Zero):
        return [Zero(x.type)]
    return [conj(ct) if is_complex(input_dtype) else real(ct)]


shape_rules[conj_p] = _conj_shape
eval_rules[conj_p] = _conj_eval
jvp_rules[conj_p] = _conj_jvp
transpose_rules[conj_p] = _conj_transpose
batch_rules[conj_p] = vectorized_batcher(conj_p)
complex_rules.add(conj_p)
jax_facts[conj_p] = JaxFacts("conj", "lambda x, input_dtype: lax.conj(x)",
                             from_jax=lambda p: {"input_dtype": np.dtype(p["input_dtype"])})


# ==========================================================================
# examples (checked by tests/test_primitive_examples.py): real operands and
# results, complex values in between; the references are numpy on real
# numbers (x + iy written out), independent of the rules above

_X, _Y = ((3, 4), "f32", "normal"), ((3, 4), "f32", "normal")
_BOTH = ((True, True),)


def _parts(fn):
    """A complex-valued spec function's real and imaginary parts."""
    return lambda *args: (real(fn(*args)), imag(fn(*args)))


examples[complex_p] = [
    Example("parts", (_X, _Y), _parts(complex), lambda x, y: (x, y), linear=_BOTH),
    Example("scalar-imag", (_X, ((), "f32", "normal")), _parts(complex),
            lambda x, y: (x, np.broadcast_to(y, x.shape)), linear=_BOTH),
    Example("square", (_X, _Y), _parts(lambda x, y: mul(complex(x, y), complex(x, y))),
            lambda x, y: (x * x - y * y, 2 * x * y)),
]
examples[real_p] = [
    Example("real", (_X, _Y), lambda x, y: real(complex(x, y)), lambda x, y: x, linear=_BOTH),
    Example("real-of-product", (_X, _Y, _X, _Y), lambda a, b, c, d: real(mul(complex(a, b), complex(c, d))),
            lambda a, b, c, d: a * c - b * d),
]
examples[imag_p] = [
    Example("imag", (_X, _Y), lambda x, y: imag(complex(x, y)), lambda x, y: y, linear=_BOTH),
    Example("imag-of-product", (_X, _Y, _X, _Y), lambda a, b, c, d: imag(mul(complex(a, b), complex(c, d))),
            lambda a, b, c, d: a * d + b * c),
]
examples[conj_p] = [
    Example("conj", (_X, _Y), _parts(lambda x, y: conj(complex(x, y))), lambda x, y: (x, -y), linear=_BOTH),
    Example("conj-of-real", (_X,), _parts(conj), lambda x: (x, np.zeros_like(x)), linear=((True,),)),
]
