"""The small array namespace the evaluation rules are written against.

Each evaluation rule is written once, as `xp.sin(x)`, `xp.maximum(x, y)`,
..., where `xp = namespace(*operands)` is

* NUMERIC for numpy arrays: numpy, computing f16/bf16 in f32 and rounding
  the result once to the declared dtype (as XLA:CPU does), or
* SYMBOLIC for numpy object arrays of sympy expressions: the same
  operations on expressions, exactly, with no rounding.

So `spec.evaluate(prog, *symbolic_args)` evaluates a program symbolically
with the very rules that evaluate it numerically. Operations with no
symbolic meaning (comparisons, max/min, abs, rounding to int) are decided
at a concrete point when the caller supplies one (`assume`, a dict from
symbols to numbers, see spec.evaluate), and otherwise raise SymbolicError
naming the operation.
"""
from __future__ import annotations

import contextvars
import functools

import numpy as np

from spec.ir import DTYPES


class SymbolicError(TypeError):
    """An operation that has no symbolic meaning met symbolic operands."""


def namespace(*xs):
    return SYMBOLIC if any(np.asarray(x).dtype == object for x in xs) else NUMERIC


class _Numeric:
    name = "numeric"

    @staticmethod
    def compute(x):
        """x in the dtype to compute with (f16/bf16 in f32)."""
        if x.dtype in (DTYPES["f16"], DTYPES["bf16"]):
            return x.astype(np.float32)
        return x

    @staticmethod
    def result(value, dtype):
        return np.asarray(value).astype(dtype)

    sin, cos, tanh, exp, log, log1p, sqrt = np.sin, np.cos, np.tanh, np.exp, np.log, np.log1p, np.sqrt
    square, negative, abs = np.square, np.negative, np.abs
    add, subtract, multiply, divide = np.add, np.subtract, np.multiply, np.divide
    maximum, minimum = np.maximum, np.minimum
    greater, less, greater_equal, less_equal = np.greater, np.less, np.greater_equal, np.less_equal
    equal, not_equal = np.equal, np.not_equal

    @staticmethod
    def logistic(x):
        with np.errstate(over="ignore"):
            return 1 / (1 + np.exp(-x))

    @staticmethod
    def rsqrt(x):
        return 1 / np.sqrt(x)

    @staticmethod
    def power(x, y: int):
        return np.power(x, y) if y > 0 else 1 / np.power(x, -y)

    @staticmethod
    def reduce_max(x, axes):
        return np.max(x, axis=axes)

    erf = staticmethod(np.vectorize(__import__("math").erf, otypes=[np.float64]))
    erfc = staticmethod(np.vectorize(__import__("math").erfc, otypes=[np.float64]))


# -- symbolic ----------------------------------------------------------------

_ASSUME = contextvars.ContextVar("assume", default=None)


def _sympy():
    import sympy
    return sympy


def _elementwise(fn):
    ufunc = np.frompyfunc(fn, 1, 1)
    return lambda x: np.asarray(ufunc(x), dtype=object)


def _decide(name, relation):
    """A comparison on expressions: decided by sympy, or at the caller's
    concrete point (`assume`), else an error naming it."""
    sympy = _sympy()

    def decide(a, b):
        r = relation(a, b)
        if r in (sympy.true, sympy.false, True, False):
            return bool(r)
        point = _ASSUME.get()
        if point:
            r = relation(sympy.sympify(a).subs(point), sympy.sympify(b).subs(point))
            if r in (sympy.true, sympy.false, True, False):
                return bool(r)
        raise SymbolicError(f"{name}: cannot decide {relation.__name__}({a}, {b}) symbolically; "
                            "pass assume={symbol: value} to evaluate to take the branch at that point")
    ufunc = np.frompyfunc(decide, 2, 1)
    return lambda a, b: np.asarray(ufunc(a, b), dtype=bool)


class _Symbolic:
    name = "sympy"

    @staticmethod
    def compute(x):
        """Numbers (literals, integer inputs) become exact sympy numbers: a
        float literal is the rational it denotes (0.5 -> 1/2)."""
        x = np.asarray(x)
        if x.dtype == object:
            return x
        sympy = _sympy()
        exact = np.frompyfunc(lambda v: sympy.Rational(v) if isinstance(v, float) else sympy.Integer(int(v)), 1, 1)
        return np.asarray(exact(x.astype(np.float64) if x.dtype.kind == "f" else x), dtype=object)

    @staticmethod
    def result(value, dtype):
        return np.asarray(value, dtype=object)

    def __getattr__(self, name):
        return _symbolic_op(name)


@functools.lru_cache(maxsize=None)
def _symbolic_op(name):
    sympy = _sympy()
    unary = {"sin": sympy.sin, "cos": sympy.cos, "tanh": sympy.tanh, "exp": sympy.exp,
             "log": sympy.log, "sqrt": sympy.sqrt, "log1p": lambda x: sympy.log(1 + x),
             "square": lambda x: x ** 2, "negative": lambda x: -x,
             "logistic": lambda x: 1 / (1 + sympy.exp(-x)), "rsqrt": lambda x: 1 / sympy.sqrt(x),
             "erf": sympy.erf, "erfc": sympy.erfc}
    if name in unary:
        return _elementwise(unary[name])
    binary = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
              "divide": lambda a, b: np.asarray(np.frompyfunc(lambda p, q: p / q, 2, 1)(a, b), dtype=object)}
    if name in binary:
        f = binary[name]
        return lambda a, b: np.asarray(f(SYMBOLIC.compute(a), SYMBOLIC.compute(b)), dtype=object)
    rel = {"greater": sympy.Gt, "less": sympy.Lt, "greater_equal": sympy.Ge, "less_equal": sympy.Le,
           "equal": lambda a, b: sympy.true if sympy.simplify(a - b) == 0 else (
               sympy.false if (a - b).is_nonzero else sympy.Eq(a, b)),
           "not_equal": lambda a, b: sympy.false if sympy.simplify(a - b) == 0 else (
               sympy.true if (a - b).is_nonzero else sympy.Ne(a, b))}
    if name in rel:
        r = rel[name]
        r.__name__ = getattr(r, "__name__", name) if name not in ("equal", "not_equal") else name
        return _decide(name, r)
    if name in ("maximum", "minimum"):
        pick = _decide(name, sympy.Ge if name == "maximum" else sympy.Le)
        return lambda a, b: np.where(pick(a, b), np.asarray(a, dtype=object), np.asarray(b, dtype=object))
    if name == "abs":
        nonneg = _decide("abs", sympy.Ge)
        return lambda x: np.where(nonneg(x, 0), np.asarray(x, dtype=object), -np.asarray(x, dtype=object))
    if name == "power":
        return lambda x, y: np.asarray(np.frompyfunc(lambda v: v ** y, 1, 1)(x), dtype=object)
    if name == "reduce_max":
        def reduce_max(x, axes):
            x = np.asarray(x, dtype=object)
            keep = [i for i in range(x.ndim) if i not in axes]
            moved = np.transpose(x, keep + list(axes)).reshape([x.shape[i] for i in keep] + [-1])
            ge = _decide("reduce_max", sympy.Ge)
            out = np.empty(moved.shape[:-1], dtype=object)
            for idx in np.ndindex(*moved.shape[:-1]):
                best = moved[idx + (0,)]
                for v in moved[idx][1:]:
                    if not ge(best, v):
                        best = v
                out[idx] = best
            return out
        return reduce_max
    raise AttributeError(f"the symbolic namespace has no operation {name!r}")


NUMERIC = _Numeric()
SYMBOLIC = _Symbolic()
