"""The exact symbolic domain: programs evaluated on sympy expressions.

    >>> import spec
    >>> from spec import ops
    >>> prog = spec.trace(lambda x: ops.tanh(ops.sin(x)), spec.f64[()])
    >>> xs = spec.symbolic.inputs(prog)
    >>> spec.evaluate(prog, *xs)[0].item()
    tanh(sin(x))
    >>> g = spec.symbolic.gradient(prog, xs)[0].item()   # tanh's JVP rule, in JAX's shape
    >>> g
    ((1 - tanh(sin(x)))*tanh(sin(x)) - tanh(sin(x)) + 1)*cos(x)
    >>> spec.symbolic.is_zero(g - spec.symbolic.sympy_gradient(prog, xs)[0].item())
    True

The rules are the numeric ones (spec/arrays.py): nothing is written twice.
A JVP, VJP or any transformed program evaluates symbolically the same way,
which is how tests/test_rules_exact.py proves each rule exactly.
"""
from __future__ import annotations

import numpy as np

from spec.ir import Program
from spec.evaluate import evaluate
from spec.vjp import grad


def _sympy():
    import sympy  # only for symbolic values (slow to import)
    return sympy


def array(name: str, shape, real=True) -> np.ndarray:
    """An object array of sympy symbols name_i_j (or just `name` for a scalar)."""
    sympy = _sympy()
    out = np.empty(shape, dtype=object)
    for idx in np.ndindex(*shape):
        out[idx] = sympy.Symbol(name + "".join(f"_{i}" for i in idx), real=real)
    return out


def inputs(prog: Program, prefix: str | None = None) -> list[np.ndarray]:
    """Symbolic arguments for `prog`, named after its inputs (x, W, ... or
    x0, x1, ...). Integer and bool inputs stay symbolic integers too."""
    names = prog.input_names or tuple(f"x{i}" for i in range(len(prog.inputs)))
    out = []
    for n, t in zip(names, prog.in_types):
        n = "".join(c if c.isalnum() else "_" for c in str(n))
        out.append(array((prefix or "") + n, t.shape))
    return out


def to_matrix(values) -> "sympy.Matrix":
    sympy = _sympy()
    flat = [v for a in values for v in np.asarray(a, dtype=object).ravel()]
    return sympy.Matrix(flat)


def gradient(prog: Program, args, assume=None) -> list[np.ndarray]:
    """The spec's gradient of a scalar-output program, evaluated on
    symbolic `args` (spec.grad's program, evaluated exactly)."""
    g = grad(prog, argnums=tuple(range(len(prog.inputs))))
    return evaluate(g, *args, assume=assume)


def sympy_gradient(prog: Program, args, assume=None) -> list[np.ndarray]:
    """The gradient by sympy.diff of the evaluated expression (independent
    of the spec's derivative rules)."""
    (out,) = evaluate(prog, *args, assume=assume)
    expr = np.asarray(out, dtype=object).item()
    return [np.vectorize(lambda s: _sympy().diff(expr, s), otypes=[object])(a) for a in args]


def is_zero(expr) -> bool:
    """Whether an expression simplifies to exactly zero."""
    sympy = _sympy()
    e = sympy.sympify(expr)
    if e == 0:
        return True
    return sympy.simplify(e) == 0 or sympy.simplify(e.rewrite(sympy.exp)) == 0
