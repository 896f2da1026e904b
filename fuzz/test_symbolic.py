"""The spec's gradient is exact on drawn programs (symbolic domain, no JAX).

A drawn float64 program with a scalar output is evaluated on sympy symbols:
the spec's gradient program (linearize, partial evaluation under the drawn
remat policies, transpose) must equal sympy's gradient of the evaluated
expression exactly. Comparisons (max/min/abs/select_n/reduce_max) are
decided at the drawn input point (`assume`), so both sides take the same
branch. The strategy never ties max/min operands by construction, and ties
of symbolically identical values (duplicates from broadcast/concatenate)
are decided by sympy itself, consistently with the spec's tie rules.

Programs are kept small (scalars and (2,) inputs, at most 4 steps) because
sympy's simplification is the cost; the ci profile runs a sixth of its
examples here.
"""
import numpy as np
import sympy
from hypothesis import given, settings

import spec
from fuzz.strategies import inputs, programs
from spec.symbolic import gradient, is_zero, sympy_gradient

SMALL = programs(dtype=np.float64, max_steps=4, max_inputs=2, scalar_output=True, int_inputs=False,
                 stop_gradient=False,          # its zero derivative is a convention, not d/dx
                 shapes=[(), (2,)])


def _clearly_nonzero(e) -> bool:
    """Far from 0 at a fixed positive point (50 digits): then not identically
    zero, and the slow simplification is skipped. A shortcut to failure only."""
    syms = sorted(e.free_symbols, key=str)
    at = {s: sympy.Rational(7 + 3 * (i % 11), 13 + (i % 5)) for i, s in enumerate(syms)}
    try:
        v = complex(e.subs(at).evalf(50))
    except (TypeError, ValueError, ZeroDivisionError):
        return False
    return bool(np.isfinite(v)) and abs(v) > 1e-20


def exactly_zero(e) -> bool:
    e = sympy.expand(sympy.sympify(e))
    if e == 0:
        return True
    return False if _clearly_nonzero(e) else is_zero(e)


@settings(max_examples=max(5, settings.default.max_examples // 6))
@given(SMALL)
def test_spec_gradient_equals_sympy_gradient(prog):
    args = spec.symbolic.inputs(prog)
    values = inputs(prog)
    assume = {s: sympy.Rational(float(v)) for a, x in zip(args, values)
              for s, v in zip(a.ravel(), np.asarray(x).ravel())}
    got = gradient(prog, args, assume)
    want = sympy_gradient(prog, args, assume)
    assert len(got) == len(want) == len(args)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape == args[k].shape
        for idx in np.ndindex(*g.shape):
            assert exactly_zero(sympy.sympify(g[idx]) - w[idx]), (
                f"d/d {args[k][idx]}:\n  spec:  {g[idx]}\n  sympy: {w[idx]}\n{prog}")
    # the spec's gradient, evaluated numerically at the point, is the exact one there
    numeric = spec.evaluate(spec.grad(prog, tuple(range(len(args)))), *values)
    for g, n in zip(got, numeric):
        exact = np.vectorize(lambda e: float(sympy.sympify(e).subs(assume).evalf(30)), otypes=[float])(g)
        np.testing.assert_allclose(n, exact, rtol=1e-9, atol=1e-9)
