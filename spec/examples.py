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


def _divisors(rng, shape):           # integer divisors: +-2 .. +-5 (truncation differs from floor)
    return rng.integers(2, 6, size=shape) * rng.choice([-1, 1], size=shape)


def _matrices(rng, shape, one):      # one(rng, m, n) per matrix of a (..., m, n) shape
    flat = [one(rng, *shape[-2:]) for _ in range(int(np.prod(shape[:-2])))]
    return np.reshape(flat, shape)


def _spd(rng, shape):                # cholesky: symmetric, eigenvalues in [1, 2]
    def one(rng, m, n):
        q, _ = np.linalg.qr(rng.normal(size=(n, n)))
        return (q * rng.uniform(1.0, 2.0, size=n)) @ q.T
    return _matrices(rng, shape, one)


def _dominant_one(rng, m, n):        # diagonal +-[2, 3], the rest N(0, 0.3^2)
    k = min(m, n)
    out = rng.normal(scale=0.3, size=(m, n))
    out[range(k), range(k)] = rng.uniform(2.0, 3.0, k) * rng.choice([-1.0, 1.0], k)
    return out


def _dominant(rng, shape):           # triangular_solve: both triangles well conditioned
    return _matrices(rng, shape, _dominant_one)


def _pivoted(rng, shape):            # lu: rows of a dominant matrix permuted (clear pivots)
    return _matrices(rng, shape, lambda rng, m, n: _dominant_one(rng, m, n)[rng.permutation(m)])


def _spaced(rng, k):                 # k values 1 apart (+ up to 0.3), shuffled: gaps of at least 0.7
    return rng.permutation(np.arange(k) + rng.uniform(0.0, 0.3, size=k))


def _orthogonal(rng, n):
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return q


def _separated(rng, shape):          # eigh: symmetric, eigenvalues in -n/2 .. n/2 with gaps >= 0.7
    def one(rng, m, n):
        q = _orthogonal(rng, n)
        return (q * (_spaced(rng, n) - n / 2)) @ q.T
    return _matrices(rng, shape, one)


def _separated_sv(rng, shape):       # svd: singular values 1 .. min(m, n) with gaps >= 0.7
    def one(rng, m, n):
        k = min(m, n)
        return (_orthogonal(rng, m)[:, :k] * (_spaced(rng, k) + 1.0)) @ _orthogonal(rng, n)[:, :k].T
    return _matrices(rng, shape, one)


DOMAINS = {"normal": _normal, "positive": _positive, "away_from_zero": _away_from_zero,
           "unit": _unit, "distinct": _distinct, "halves": _halves, "bools": _bools, "ints": _ints,
           "divisors": _divisors, "spd": _spd, "dominant": _dominant, "pivoted": _pivoted,
           "separated": _separated, "separated_sv": _separated_sv}


def _indices(rng, shape, n):         # "indices:N": ints in [0, N)
    return rng.integers(0, int(n), size=shape)


def _int_range(rng, shape, lo, hi):  # "ints:LO:HI": ints in [LO, HI)
    return rng.integers(int(lo), int(hi), size=shape)


def _uniform(rng, shape, lo, hi):    # "uniform:LO:HI": floats in [LO, HI) (log1p's domain, casts)
    return rng.uniform(float(lo), float(hi), size=shape)


def _grid(rng, shape, offset):
    """"grid:OFFSET": k/2 + OFFSET + noise(< 0.05), k in -4..4. Operands on
    grids 0 and 0.25 never come closer than 0.15: max/min have no ties,
    even under finite-difference steps."""
    return rng.integers(-4, 5, size=shape) * 0.5 + float(offset) + rng.uniform(-0.05, 0.05, size=shape)


PARAMETRIC_DOMAINS = {"indices": _indices, "ints": _int_range, "uniform": _uniform, "grid": _grid}


def draw_operand(domain: str, shape, dtype: str, rng) -> np.ndarray:
    """One operand: a domain of DOMAINS, a parametric one of
    PARAMETRIC_DOMAINS ("indices:N", "ints:LO:HI", "uniform:LO:HI",
    "grid:OFFSET"), or "bits" (uniform uint32)."""
    name, *args = domain.split(":")
    if domain == "bits":
        value = rng.integers(0, 2 ** 32, size=shape, dtype=np.uint64)
    elif args:
        value = PARAMETRIC_DOMAINS[name](rng, shape, *args)
    else:
        value = DOMAINS[domain](rng, shape)
    return np.asarray(value).astype(DTYPES[dtype])


def draw(domains, types, rng) -> list[np.ndarray]:
    return [draw_operand(d, shape, dtype, rng) for d, (shape, dtype) in zip(domains, types)]


def inputs(example: Example, rng, float_dtype: str | None = None) -> list[np.ndarray]:
    """The example's operands; float ones in `float_dtype` if given
    (except those the example keeps at their own dtype)."""
    out = []
    for i, (shape, dtype, domain) in enumerate(example.operands):
        if float_dtype is not None and dtype in ("f16", "bf16", "f32", "f64") and i not in example.kept:
            dtype = float_dtype
        out.append(draw_operand(domain, shape, dtype, rng))
    return out


def program(example: Example, values):
    """The example traced at the types of `values`."""
    return trace(example.fn, *[ArrayType(np.shape(v), np.asarray(v).dtype) for v in values])
