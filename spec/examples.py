"""The operand domains of primitive examples (`spec.core.Example`), and
how an example becomes a program and its inputs.

    >>> import numpy as np
    >>> vals = draw(("normal", "positive"), [((2,), "f64"), ((2,), "f64")], np.random.default_rng(0))
    >>> bool(np.all(vals[1] > 0))
    True
"""
from __future__ import annotations

import numpy as np

from spec.core import Example, trace
from spec.ir import ArrayType, DTYPES


def _normal(rng, shape):
    return rng.normal(size=shape)


def _positive(rng, shape):           # log, sqrt, rsqrt
    return rng.uniform(0.5, 2.0, size=shape)


def _away_from_zero(rng, shape):     # divisors, abs, negative powers, sign
    return rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)


def _unit(rng, shape):               # inside (-1, 1): asin, atanh, erf_inv
    return rng.uniform(-0.9, 0.9, size=shape)


def _distinct(rng, shape):           # no ties (max, sort, argmax), gaps of 0.25
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.25 - n * 0.125).reshape(shape)


def _halves(rng, shape):             # exact and often equal: eq, ge, rounding ties
    return rng.integers(-4, 5, size=shape) * 0.5


def _bools(rng, shape):
    return rng.integers(0, 2, size=shape).astype(bool)


def _ints(rng, shape):
    return rng.integers(-3, 4, size=shape)


DOMAINS = {"normal": _normal, "positive": _positive, "away_from_zero": _away_from_zero,
           "unit": _unit, "distinct": _distinct, "halves": _halves, "bools": _bools, "ints": _ints}


def draw_operand(domain: str, shape, dtype: str, rng) -> np.ndarray:
    """One operand: a domain of DOMAINS, or "indices:N" (ints in [0, N)),
    or "bits" (uniform uint32)."""
    if domain.startswith("indices:"):
        value = rng.integers(0, int(domain.split(":")[1]), size=shape)
    elif domain == "bits":
        value = rng.integers(0, 2 ** 32, size=shape, dtype=np.uint64)
    else:
        value = DOMAINS[domain](rng, shape)
    return np.asarray(value).astype(DTYPES[dtype])


def draw(domains, types, rng) -> list[np.ndarray]:
    return [draw_operand(d, shape, dtype, rng) for d, (shape, dtype) in zip(domains, types)]


def inputs(example: Example, rng, float_dtype: str | None = None) -> list[np.ndarray]:
    """The example's operands; float ones in `float_dtype` if given."""
    out = []
    for shape, dtype, domain in example.operands:
        if float_dtype is not None and dtype in ("f16", "bf16", "f32", "f64"):
            dtype = float_dtype
        out.append(draw_operand(domain, shape, dtype, rng))
    return out


def program(example: Example, values):
    """The example traced at the types of `values`."""
    return trace(example.fn, *[ArrayType(np.shape(v), np.asarray(v).dtype) for v in values])
