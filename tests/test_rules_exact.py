"""Exact proofs of the spec's derivative rules, in the symbolic domain.

The spec's evaluation rules run on numpy object arrays of sympy expressions
(spec/arrays.py), so a program -- and its JVP, transpose or gradient
program -- evaluates to exact expressions. Every expected value here is
computed by sympy from the *evaluation* rules alone, independently of the
derivative rules under test:

(a) JVP rules: for every primitive (the coverage test iterates
    `spec.primitives`), the tangent the spec's JVP program computes equals
    sum_j d(out)/d(in_j) . t_j by `sympy.diff` of the symbolically evaluated
    primal, exactly (the difference simplifies to 0). Non-smooth primitives
    are decided at `assume` points on both sides of their kink; JAX's
    conventions at the kink (ties, abs at 0) are stated separately.
(b) Transpose rules: for every primitive with a transpose rule, the adjoint
    identity <ybar, L t> == <L^T ybar, t> holds exactly, with symbolic t,
    ybar and symbolic non-linear operands.
(c) Whole programs: the spec's gradient (spec.grad, i.e. linearize, partial
    evaluation under each remat policy, transpose) equals sympy's gradient
    of the evaluated expression, exactly.

Float64 finite-difference tests of the same rules are in
tests/test_primitive_examples.py (each primitive's registered examples);
this file needs no tolerance.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import sympy

import spec
from spec import ops, policies as P
from spec.ir import is_float
from spec.symbolic import array, gradient, is_zero, sympy_gradient
from test_prims_linear_solve import diag_solve, upper_solve

f64, f32, bool_, i32 = spec.f64, spec.f32, spec.bool_, spec.i32
device_put_p = spec.primitives["device_put"]


# ==========================================================================
# helpers

def _clearly_nonzero(e) -> bool:
    """e evaluated at a fixed point with positive coordinates (inside every
    domain used here) to 50 digits is far from 0: then e is not identically
    zero, and sympy.simplify (slow on a wrong answer) need not run. Only a
    shortcut to failure: a zero here still goes to the exact proof."""
    syms = sorted(e.free_symbols, key=str)
    at = {s: sympy.Rational(7 + 3 * (i % 11), 13 + (i % 5)) for i, s in enumerate(syms)}
    try:
        v = complex(e.subs(at).evalf(50))
    except (TypeError, ValueError, ZeroDivisionError):
        return False
    return np.isfinite(v) and abs(v) > 1e-20


def exactly_zero(e) -> bool:
    """Whether an expression is exactly 0: cheap expansion first, then
    spec.symbolic.is_zero (sympy.simplify, also after rewriting in exp)."""
    e = sympy.sympify(e)
    if e == 0:
        return True
    e = sympy.expand(e)
    if e == 0:
        return True
    if _clearly_nonzero(e):
        return False
    return is_zero(e)


def symbols_for(types, prefix, fixed=None):
    """Symbolic arguments x0, x1, ... (or the fixed concrete value)."""
    fixed = fixed or {}
    return [np.asarray(fixed[i]) if i in fixed else array(f"{prefix}{i}", t.shape)
            for i, t in enumerate(types)]


def point(args, values) -> dict:
    """{symbol: exact number}: each symbolic array in args at the given values
    (None for a concrete argument)."""
    out = {}
    for a, v in zip(args, values):
        if v is None or a.dtype != object:
            continue
        v = np.broadcast_to(np.asarray(v, dtype=np.float64), a.shape)
        for s, x in zip(a.ravel(), v.ravel()):
            out[s] = sympy.Rational(float(x))
    return out


def inner(a, b):
    """Exact sum of elementwise products of two lists of arrays."""
    total = sympy.Integer(0)
    for x, y in zip(a, b):
        for p, q in zip(np.asarray(x, dtype=object).ravel(), np.asarray(y, dtype=object).ravel()):
            total += sympy.sympify(p) * sympy.sympify(q)
    return total


def directional_derivative(expr, args, tangents, which):
    """sum over inputs j in `which`, elements k: d expr / d args[j][k] * tangents[j][k]."""
    expr = sympy.sympify(expr)
    total = sympy.Integer(0)
    for j in which:
        for s, t in zip(args[j].ravel(), tangents[j].ravel()):
            total += sympy.diff(expr, s) * t
    return total


# ==========================================================================
# (a) JVP rules == sympy.diff of the evaluation rules

@dataclass
class JvpCase:
    id: str
    prim: str                       # the primitive this case proves
    fn: Callable                    # spec ops -> output(s)
    types: list                     # input types
    fixed: dict = field(default_factory=dict)   # input index -> concrete (non-float) value
    at: tuple | None = None         # the `assume` point: one value (or None) per input
    expect: str = "diff"            # "diff": sympy.diff; "zero": zero tangent; "none": no tangent output

    def program(self):
        return spec.trace(self.fn, *self.types)


def remat_opt_sin_mul(x, y):
    """A custom_vjp(optimize_remat=True) forward rule of sin(x) * y, bound
    as its remat_opt equation: (residual cos(x), output sin(x) * y)."""
    from spec.core import eval_program_traced
    from spec.prims_remat_opt import optimized_fwd
    fwd = spec.trace(lambda a, b: [ops.sin(a) * b, ops.cos(a)], x.type, y.type)
    body = spec.trace(lambda a, b: ops.sin(a) * b, x.type, y.type)
    return eval_program_traced(optimized_fwd(fwd, 1, body), x, y)


def dg(dn, pet=None):
    return lambda x, y: ops.dot_general(x, y, dn, preferred_element_type=pet)


def custom_sin_mul(x, y):
    """sin(x) * y as a custom_jvp whose rule is the true derivative."""
    def f(a, b):
        return ops.sin(a) * b

    def f_jvp(primals, tangents):
        (a, b), (ta, tb) = primals, tangents
        return g(a, b), ops.cos(a) * b * ta + ops.sin(a) * tb
    g = spec.custom_jvp(f, f_jvp)
    return g(x, y)


def call_sin_mul(x, y):
    body = spec.trace(lambda a, b: ops.sin(a) * b, x.type, y.type)
    return ops.call(body, x, y, name="f")[0]


def call_two_outputs(x, y):
    body = spec.trace(lambda a, b: (ops.tanh(a) + b, ops.reduce_sum(a * b, (0,))), x.type, y.type)
    return tuple(ops.call(body, x, y, name="g"))


def call_nested(x, y):
    inner_ = spec.trace(lambda a: ops.exp(a) * a, x.type)
    body = spec.trace(lambda a, b: ops.call(inner_, a * b, name="inner")[0] + ops.cos(b), x.type, y.type)
    return ops.call(body, x, y, name="outer")[0]


def remat_body(a, b):
    h = ops.checkpoint_name(ops.sin(a) * b, "h")
    return ops.tanh(h) * ops.log1p(ops.square(b)), ops.reduce_sum(h * a, (0,))


def remat_with(policy):
    return lambda x, y: tuple(ops.checkpoint(remat_body, policy=policy)(x, y))


def remat_nested(x, y):
    inner_ = ops.checkpoint(lambda a: ops.checkpoint_name(ops.exp(a) * a, "h"), policy=P.everything_saveable)
    return ops.checkpoint(lambda a, b: ops.sin(inner_(a)) * b, policy=P.save_only_these_names("h"))(x, y)


MATMUL = (((1,), (0,)), ((), ()))
BATCH_0 = (((2,), (1,)), ((0,), (0,)))            # [2,2,3] . [2,3,2] -> [2,2,2]
BATCH_MID = (((2,), (0,)), ((1,), (1,)))          # [2,2,3] . [3,2,2] -> [2,2,2]
CONTRACT_2 = (((1, 2), (1, 0)), ((), ()))         # [2,3,2] . [2,3,2] -> [2,2]
PAD_CFG = ((1, 2, 0), (0, 1, 2))
PAD_CROP = ((-1, 1, 1), (2, -2, 0))
OFFLOAD = P.save_and_offload_only_these_names(names_which_can_be_saved=[], names_which_can_be_offloaded=["h"],
                                              offload_src="device", offload_dst="pinned_host")

S = f64[()]
_unary = ["neg", "sin", "cos", "tanh", "exp", "log", "log1p", "logistic", "sqrt", "rsqrt", "square"]

JVP_CASES = [
    # ---- unary, on a scalar (smooth everywhere on their domain) ----
    *[JvpCase(n, n, getattr(ops, n), [S]) for n in _unary],
    *[JvpCase(f"integer_pow-y{y}", "integer_pow", (lambda y: lambda x: ops.integer_pow(x, y))(y), [S])
      for y in (0, 1, 2, 3, -2)],
    JvpCase("integer_pow-y3-array", "integer_pow", lambda x: ops.integer_pow(x, 3), [f64[2]]),
    # abs: decided on each side of 0 (abs at 0 below: JAX's convention)
    JvpCase("abs-negative", "abs", ops.abs, [S], at=(-1.5,)),
    JvpCase("abs-positive", "abs", ops.abs, [S], at=(0.5,)),
    JvpCase("abs-array-both-sides", "abs", ops.abs, [f64[2]], at=([-2.0, 3.0],)),
    # ---- binary, on scalars and with lax broadcasting ----
    *[JvpCase(n, n, getattr(ops, n), [S, S]) for n in ("add", "sub", "mul", "div", "add_any")],
    JvpCase("add-scalar-array", "add", ops.add, [S, f64[2]]),
    JvpCase("add-size1-dims", "add", ops.add, [f64[2, 1], f64[1, 2]]),
    JvpCase("sub-array-scalar", "sub", ops.sub, [f64[2], S]),
    JvpCase("sub-size1-dims", "sub", ops.sub, [f64[1, 2], f64[2, 1]]),
    JvpCase("mul-scalar-array", "mul", ops.mul, [S, f64[2]]),
    JvpCase("mul-size1-dims", "mul", ops.mul, [f64[2, 1], f64[1, 2]]),
    JvpCase("mul-literal", "mul", lambda x: x * 2.5, [S]),
    JvpCase("div-scalar-divisor", "div", ops.div, [f64[2], S]),
    JvpCase("div-size1-dims", "div", ops.div, [f64[1, 2], f64[2, 1]]),
    JvpCase("add_any-array", "add_any", ops.add_any, [f64[2], f64[2]]),
    # max/min: decided on both sides of the kink x == y (ties below)
    JvpCase("max-x-gt-y", "max", ops.max, [S, S], at=(2.0, 1.0)),
    JvpCase("max-x-lt-y", "max", ops.max, [S, S], at=(-1.0, 0.5)),
    JvpCase("min-x-gt-y", "min", ops.min, [S, S], at=(2.0, 1.0)),
    JvpCase("min-x-lt-y", "min", ops.min, [S, S], at=(-1.0, 0.5)),
    JvpCase("max-array-mixed", "max", ops.max, [f64[2], f64[2]], at=([1.0, -1.0], [0.0, 2.0])),
    JvpCase("min-size1-dims", "min", ops.min, [f64[2, 1], f64[1, 2]], at=([[1.0], [-1.0]], [[0.0, 2.0]])),
    JvpCase("max-scalar-array", "max", ops.max, [S, f64[2]], at=(0.5, [0.0, 2.0])),
    # ---- comparisons: piecewise constant, no tangent output (ad.defjvp_zero) ----
    *[JvpCase(f"{n}-{side}", n, getattr(ops, n), [S, S], at=at, expect="none")
      for n in ("gt", "lt", "ge", "le", "eq", "ne")
      for side, at in (("below", (1.0, 2.0)), ("above", (2.0, 1.0)), ("tie", (1.5, 1.5)))],
    # ---- select_n: a concrete or a decided predicate ----
    JvpCase("select_n-bool", "select_n", ops.select_n, [bool_[2], f64[2], f64[2]],
            fixed={0: np.array([True, False])}),
    JvpCase("select_n-bool-scalar-pred", "select_n", ops.select_n, [bool_[()], f64[2], f64[2]],
            fixed={0: np.array(False)}),
    JvpCase("select_n-i32", "select_n", ops.select_n, [i32[3], f64[3], f64[3], f64[3]],
            fixed={0: np.array([2, 0, 1], np.int32)}),
    JvpCase("select_n-gt-true", "select_n", lambda x, y: ops.select_n(ops.gt(x, y), ops.sin(x), y * y),
            [S, S], at=(1.0, 0.5)),
    JvpCase("select_n-gt-false", "select_n", lambda x, y: ops.select_n(ops.gt(x, y), ops.sin(x), y * y),
            [S, S], at=(0.5, 1.0)),
    # ---- conversion, stop_gradient ----
    JvpCase("convert-f64-to-f64", "convert_element_type", lambda x: ops.convert_element_type(x, np.float64),
            [f64[2]]),
    JvpCase("convert-f32-to-f64", "convert_element_type", lambda x: ops.convert_element_type(x, np.float64),
            [f32[2]]),
    JvpCase("convert-f64-to-f32", "convert_element_type", lambda x: ops.convert_element_type(x, np.float32),
            [f64[2]]),
    JvpCase("convert-i32-to-f64-times-x", "convert_element_type",
            lambda n, x: ops.convert_element_type(n, np.float64) * x, [i32[2], f64[2]],
            fixed={0: np.array([3, -2], np.int32)}),
    JvpCase("stop_gradient", "stop_gradient", ops.stop_gradient, [f64[2]], expect="zero"),
    # ---- dot_general ----
    JvpCase("dot_general-matmul", "dot_general", dg(MATMUL), [f64[2, 3], f64[3, 2]]),
    JvpCase("dot_general-vector", "dot_general", dg((((0,), (0,)), ((), ()))), [f64[3], f64[3]]),
    JvpCase("dot_general-batch", "dot_general", dg(BATCH_0), [f64[2, 2, 3], f64[2, 3, 2]]),
    JvpCase("dot_general-batch-middle", "dot_general", dg(BATCH_MID), [f64[2, 2, 3], f64[3, 2, 2]]),
    JvpCase("dot_general-contract-2-dims", "dot_general", dg(CONTRACT_2), [f64[2, 3, 2], f64[2, 3, 2]]),
    JvpCase("dot_general-f32-preferred-f64", "dot_general", dg(MATMUL, np.float64), [f32[2, 2], f32[2, 2]]),
    JvpCase("dot_general-bool-by-f64", "dot_general", dg(MATMUL, np.float64), [bool_[2, 3], f64[3, 2]],
            fixed={0: np.array([[True, False, True], [False, True, True]])}),
    JvpCase("dot_general-f64-by-i32", "dot_general", dg(MATMUL), [f64[2, 3], i32[3, 2]],
            fixed={1: np.array([[3, -2], [0, 1], [2, 5]], np.int32)}),
    # ---- reductions ----
    JvpCase("reduce_sum-axis0", "reduce_sum", lambda x: ops.reduce_sum(x, (0,)), [f64[2, 3]]),
    JvpCase("reduce_sum-axes02", "reduce_sum", lambda x: ops.reduce_sum(x, (0, 2)), [f64[2, 2, 2]]),
    JvpCase("reduce_sum-all", "reduce_sum", lambda x: ops.reduce_sum(x, (0, 1)), [f64[2, 3]]),
    # reduce_max: decided at points with distinct values, maxima in different places
    JvpCase("reduce_max-axis1", "reduce_max", lambda x: ops.reduce_max(x, (1,)), [f64[2, 3]],
            at=([[0.0, 2.0, 1.0], [3.0, -1.0, 0.5]],)),
    JvpCase("reduce_max-axis1-other-order", "reduce_max", lambda x: ops.reduce_max(x, (1,)), [f64[2, 3]],
            at=([[2.0, 0.0, 1.0], [-1.0, 0.5, 3.0]],)),
    JvpCase("reduce_max-all", "reduce_max", lambda x: ops.reduce_max(x, (0, 1)), [f64[2, 2]],
            at=([[0.0, 1.0], [2.5, -1.0]],)),
    # ---- structural ----
    JvpCase("broadcast_in_dim-new-leading", "broadcast_in_dim",
            lambda x: ops.broadcast_in_dim(x, (2, 3), (1,)), [f64[3]]),
    JvpCase("broadcast_in_dim-size1", "broadcast_in_dim",
            lambda x: ops.broadcast_in_dim(x, (2, 3), (0, 1)), [f64[2, 1]]),
    JvpCase("broadcast_in_dim-scalar", "broadcast_in_dim", lambda x: ops.broadcast_in_dim(x, (2, 2), ()), [S]),
    JvpCase("reshape", "reshape", lambda x: ops.reshape(x, (3, 2)), [f64[2, 3]]),
    JvpCase("reshape-to-scalar", "reshape", lambda x: ops.reshape(x, ()), [f64[1, 1]]),
    JvpCase("transpose", "transpose", lambda x: ops.transpose(x, (2, 0, 1)), [f64[2, 1, 3]]),
    JvpCase("transpose-2d", "transpose", lambda x: ops.transpose(x, (1, 0)), [f64[2, 3]]),
    JvpCase("squeeze", "squeeze", lambda x: ops.squeeze(x, (1, 2)), [f64[2, 1, 1]]),
    JvpCase("concatenate-dim0", "concatenate", lambda x, y: ops.concatenate([x, y], 0), [f64[1, 2], f64[2, 2]]),
    JvpCase("concatenate-dim1-three", "concatenate", lambda x, y, z: ops.concatenate([x, y, z], 1),
            [f64[2, 1], f64[2, 2], f64[2, 1]]),
    JvpCase("slice", "slice", lambda x: ops.slice(x, (1, 0), (3, 2)), [f64[3, 3]]),
    JvpCase("slice-strided", "slice", lambda x: ops.slice(x, (0, 1), (3, 4), (2, 2)), [f64[3, 4]]),
    JvpCase("pad", "pad", lambda x, v: ops.pad(x, v, PAD_CFG), [f64[2, 2], S]),
    JvpCase("pad-crop-interior", "pad", lambda x, v: ops.pad(x, v, PAD_CROP), [f64[3, 3], S]),
    JvpCase("pad-zero-literal", "pad", lambda x: ops.pad(x, np.float64(0.0), PAD_CFG), [f64[2, 2]]),
    # ---- name, device_put, call, remat ----
    JvpCase("name", "name", lambda x: ops.checkpoint_name(x, "n"), [f64[2]]),
    JvpCase("device_put-pinned_host", "device_put",
            lambda x: spec.core.bind(device_put_p, x, memory_space="pinned_host")[0], [f64[2]]),
    JvpCase("device_put-two-operands", "device_put",
            lambda x, y: spec.core.bind(device_put_p, x, y, memory_space="pinned_host"), [f64[2], f64[3]]),
    JvpCase("call", "call", call_sin_mul, [f64[2], f64[2]]),
    JvpCase("custom_jvp_call", "custom_jvp_call", custom_sin_mul, [f64[2], f64[2]]),
    JvpCase("remat_opt", "remat_opt", remat_opt_sin_mul, [f64[2], f64[2]]),
    # tangents of matvec's consts through its JVP (implicit differentiation), and of b
    JvpCase("custom_linear_solve", "custom_linear_solve", lambda a, b: ops.sin(diag_solve(a, b)), [f64[2], f64[2]]),
    JvpCase("call-two-outputs", "call", call_two_outputs, [f64[2], f64[2]]),
    JvpCase("call-nested", "call", call_nested, [S, S]),
    JvpCase("remat-none", "remat", remat_with(None), [f64[2], f64[2]]),
    JvpCase("remat-save_only_h", "remat", remat_with(P.save_only_these_names("h")), [f64[2], f64[2]]),
    JvpCase("remat-everything", "remat", remat_with(P.everything_saveable), [f64[2], f64[2]]),
    JvpCase("remat-offload_h", "remat", remat_with(OFFLOAD), [f64[2], f64[2]]),
    JvpCase("remat-nested", "remat", remat_nested, [S, S]),
    # ---- cond (each branch taken), while (a fixed number of iterations) ----
    *[JvpCase(f"cond-index{i}", "cond", lambda i, x, y: spec.switch(
        i, [lambda a, b: ops.sin(a) * b, lambda a, b: ops.exp(a) + ops.square(b)], x, y),
        [spec.i32[()], f64[2], f64[2]], fixed={0: np.int32(i)}) for i in (0, 1)],
    JvpCase("while-three-steps", "while", lambda n, x, w: spec.while_loop(
        lambda n, c: c[0] < n, lambda w, c: (c[0] + 1, ops.sin(c[1]) * w), (0, x),
        cond_consts=(n,), body_consts=(w,))[1], [spec.i32[()], S, S], fixed={0: np.int32(3)}),
    # ---- scan: a carry, xs and a const, forward and reverse ----
    *[JvpCase(f"scan-reverse{r}", "scan", lambda c, xs, w, r=r: spec.scan(
        lambda c, x, w: (ops.sin(c * w) + x, ops.tanh(c) * x), c, xs, consts=(w,), reverse=r),
        [S, f64[3], S]) for r in (False, True)],
]
assert len({c.id for c in JVP_CASES}) == len(JVP_CASES)

# How a primitive's JVP is proved when it is not "equals sympy.diff of the
# evaluation rule". Each is a convention of JAX's, checked exactly above.
JVP_CONVENTIONS = {
    **{n: "a comparison is piecewise constant: JAX's JVP (ad.defjvp_zero) gives a bool output no "
          "tangent; proved at points below, above and on the tie" for n in ("gt", "lt", "ge", "le", "eq", "ne")},
    "stop_gradient": "by definition its tangent is zero (ad.defjvp_zero), not d/dx x = 1; proved exactly zero",
}

# Primitives whose JVP cannot be proved symbolically: name -> reason, naming
# the float64 finite-difference test that covers it instead. (None today.)
JVP_EXCEPTIONS: dict[str, str] = {}

# Parameterisations not proved here (the primitive itself is): example id
# ("<primitive>-<example name>", spec.core.examples) -> reason. Finite
# differences cover them in tests/test_primitive_examples.py's
# test_jvp_matches_finite_differences[<id>].
NOT_SYMBOLIC_PARAMS = {
    "convert_element_type-to-i32": "rounding to an integer has no symbolic meaning (SymbolicError); "
                                   "the JVP has no tangent",
    "convert_element_type-to-bool": "a cast to bool has no symbolic meaning (SymbolicError); the JVP has no tangent",
    "integer_pow-i32-y3": "integer operands carry no tangent",
    "div-i32-truncates": "integer division rounds; integer operands carry no tangent",
    "dot_general-i32-preferred-f32": "integer operands carry no tangent",
}

FD_TESTS = Path(__file__).with_name("test_primitive_examples.py")
EXAMPLE_IDS = {f"{p.name}-{ex.name}" for p, exs in spec.core.examples.items() for ex in exs}

# Primitives with no forward-mode derivative at all, as in JAX: the JVP of a
# custom_vjp function is `custom_lin` (the forward rule's residuals and bwd),
# and evaluating, batching or differentiating custom_lin raises JAX's
# TypeError ("can't apply forward-mode autodiff (jvp) to a custom_vjp
# function."). test_no_forward_mode_raises_jaxs_error checks exactly that;
# their reverse mode (bwd, by definition not a derivative) is checked in
# tests/test_custom_rules.py::test_grad_of_custom_vjp_is_bwd.
NO_FORWARD_MODE = {
    "custom_vjp_call": "jax.custom_vjp functions only support reverse mode",
    "custom_lin": "the linear part of a custom_vjp: only transposable (into bwd)",
}


def _jvp_check(case: JvpCase, nonzeros):
    prog = case.program()
    assert case.prim in {e.primitive.name for e in prog.eqns}, f"{case.id} does not bind {case.prim}"
    xs = symbols_for(case.types, "x", case.fixed)
    ts = symbols_for(case.types, "t")
    assume = point(xs, case.at) if case.at is not None else None
    jp, out_nz = spec.jvp_program(prog, nonzeros)
    nz = [bool(m) and is_float(t.dtype) for m, t in zip(nonzeros, prog.in_types)]
    which = [i for i, m in enumerate(nz) if m]
    outs = spec.evaluate(jp, *xs, *[ts[i] for i in which], assume=assume)
    primal = spec.evaluate(prog, *xs, assume=assume)
    n = len(prog.outputs)
    float_outs = [i for i, t in enumerate(prog.out_types) if is_float(t.dtype)]
    assert len(outs) == n + len(float_outs)
    for got, want in zip(outs[:n], primal):     # the JVP's primal outputs are the primal
        assert got.shape == want.shape
        for g, w in zip(np.asarray(got).ravel(), np.asarray(want).ravel()):
            assert g == w or exactly_zero(sympy.sympify(g) - sympy.sympify(w))
    if case.expect == "none":
        assert not float_outs, "a comparison has no float output"
        if case.at is not None:      # the decided primal matches the numbers at the point
            num = spec.evaluate(prog, *[np.asarray(v, t.dtype) for v, t in zip(case.at, prog.in_types)])
            np.testing.assert_array_equal(primal[0], num[0])
        return
    for i, tan in zip(float_outs, outs[n:]):
        assert tan.shape == prog.out_types[i].shape
        for idx in np.ndindex(*tan.shape):
            if case.expect == "zero":
                want = sympy.Integer(0)
            else:
                want = directional_derivative(np.asarray(primal[i])[idx], xs, ts, which)
            got = np.asarray(tan)[idx]
            assert exactly_zero(sympy.sympify(got) - want), (
                f"{case.id} (tangents of inputs {which}): output {i}{list(idx)}\n"
                f"  JVP rule: {got}\n  sympy:    {want}")


def _nonzero_masks(case: JvpCase):
    """Every non-empty subset of the float inputs carrying a tangent (the
    others are symbolic zeros: rules have separate Zero branches)."""
    fl = [i for i, t in enumerate(case.types) if is_float(t.dtype)]
    for r in range(len(fl), 0, -1):
        for sub in itertools.combinations(fl, r):
            yield tuple(i in sub for i in range(len(case.types)))


JVP_PARAMS = [(c, m) for c in JVP_CASES for m in _nonzero_masks(c)]
JVP_IDS = [f"{c.id}-{''.join('t' if b else '0' for b in m)}" for c, m in JVP_PARAMS]


@pytest.mark.parametrize("case,nonzeros", JVP_PARAMS, ids=JVP_IDS)
def test_jvp_rule_is_exact_derivative(case, nonzeros):
    _jvp_check(case, list(nonzeros))


def test_every_primitive_is_proved_or_excepted():
    """A primitive added to the spec must get a case above (or an exception
    with a reason and a finite-difference test)."""
    covered = {c.prim for c in JVP_CASES}
    # primitives with registered Examples: exact (sympy) where they evaluate symbolically,
    # else float64 finite differences, in tests/test_primitive_examples.py
    covered |= {p.name for p in spec.core.examples}
    from test_prims_collective import NAMED_PROOFS     # (it imports this module's helpers)
    covered |= set(NAMED_PROOFS)        # under a named vmap, in tests/test_prims_collective.py
    missing = sorted(set(spec.primitives) - covered - set(JVP_EXCEPTIONS) - set(NO_FORWARD_MODE))
    assert not missing, f"primitives with no exact JVP proof and no listed exception: {missing}"
    assert not set(JVP_EXCEPTIONS) & covered, "an excepted primitive is also proved: drop the exception"
    assert set(JVP_EXCEPTIONS) <= set(spec.primitives), "stale exception"
    assert set(JVP_CONVENTIONS) <= covered
    no_rule = sorted(n for n, p in spec.primitives.items() if p not in spec.jvp_rules)
    assert set(no_rule) <= set(JVP_EXCEPTIONS), f"primitives with no JVP rule must be excepted: {no_rule}"
    for c in JVP_CASES:
        if c.expect != "diff":
            assert c.prim in JVP_CONVENTIONS, f"{c.id}: a non-diff expectation needs a stated convention"


def _custom_vjp_sin():
    def f(x):
        return ops.sin(x)

    def fwd(x):
        return ops.sin(x), ops.cos(x)

    def bwd(c, ct):
        return (ct * c * 3.0,)          # deliberately 3x the derivative: bwd is a definition
    return spec.custom_vjp(f, fwd, bwd)


def test_no_forward_mode_raises_jaxs_error():
    from spec.prims_custom import FWD_ERROR
    h = _custom_vjp_sin()
    prog = spec.trace(lambda x: h(x), f64[2])
    jp = spec.jvp(prog)
    assert {e.primitive.name for e in prog.eqns} | {e.primitive.name for e in jp.eqns} >= set(NO_FORWARD_MODE)
    with pytest.raises(TypeError, match="forward-mode autodiff"):
        spec.evaluate(jp, np.ones(2), np.ones(2))
    assert FWD_ERROR == "can't apply forward-mode autodiff (jvp) to a custom_vjp function."
    assert not set(NO_FORWARD_MODE) & {c.prim for c in JVP_CASES}


def test_exceptions_name_their_finite_difference_tests():
    src = FD_TESTS.read_text()
    assert "def test_jvp_matches_finite_differences(" in src
    for name, reason in JVP_EXCEPTIONS.items():
        assert reason.strip(), name
        refs = re.findall(r"test_\w+\[([\w-]+)\]", reason)
        assert refs, f"{name}: the reason must name a finite-difference test, test_...[case-id]"
        for r in refs:
            assert r in EXAMPLE_IDS, f"{name}: no example {r!r} (checked by {FD_TESTS.name})"
    for example_id, reason in NOT_SYMBOLIC_PARAMS.items():
        assert reason.strip() and example_id in EXAMPLE_IDS, example_id


# -- JAX's conventions at kinks (not derivatives: stated and checked) ------

X0, X1 = sympy.Symbol("x0", real=True), sympy.Symbol("x1", real=True)


@pytest.mark.parametrize("op", ["max", "min"])
def test_minmax_tie_splits_tangent_evenly(op):
    """_balanced_eq: at x == y, d max(x, y) = (dx + dy) / 2 (so max(x, x) has
    derivative 1). Numerically at ties, and exactly at a symbolic tie point."""
    jp = spec.jvp(spec.trace(getattr(ops, op), f64[3], f64[3]))
    x = np.array([-1.5, 0.0, 0.25])
    tx, ty = np.array([1.0, 2.0, -4.0]), np.array([8.0, -2.0, 0.5])
    out, dout = spec.evaluate(jp, x, x.copy(), tx, ty)
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(dout, 0.5 * tx + 0.5 * ty)
    jp = spec.jvp(spec.trace(getattr(ops, op), S, S))
    t0, t1 = sympy.symbols("t0 t1", real=True)
    _, d = spec.evaluate(jp, np.array(X0, dtype=object), np.array(X1, dtype=object),
                         np.array(t0, dtype=object), np.array(t1, dtype=object), assume={X0: 1, X1: 1})
    assert exactly_zero(d.item() - (t0 + t1) / 2)


def test_max_of_one_value_has_unit_derivative():
    jp = spec.jvp(spec.trace(lambda x: ops.max(x, x), S))
    t0 = sympy.Symbol("t0", real=True)
    _, d = spec.evaluate(jp, np.array(X0, dtype=object), np.array(t0, dtype=object))
    assert exactly_zero(d.item() - t0)


def test_reduce_max_tie_averages_tangents():
    """_reduce_chooser_jvp_rule: the tangent is averaged over the maxima."""
    jp = spec.jvp(spec.trace(lambda x: ops.reduce_max(x, (0,)), f64[4]))
    out, dout = spec.evaluate(jp, np.array([1.0, 3.0, 3.0, 0.0]), np.array([1.0, 2.0, 4.0, 8.0]))
    assert out == 3.0 and dout == 3.0
    jp = spec.jvp(spec.trace(lambda x: ops.reduce_max(x, (0,)), f64[3]))
    xs, ts = array("x", (3,)), array("t", (3,))
    _, d = spec.evaluate(jp, xs, ts, assume=point([xs], [[2.0, 2.0, 1.0]]))
    assert exactly_zero(d.item() - (ts[0] + ts[1]) / 2)


def test_abs_derivative_at_zero_is_plus_one():
    """_abs_jvp_rule: select(x >= 0, t, -t), so +t at 0."""
    jp = spec.jvp(spec.trace(ops.abs, f64[2]))
    _, dout = spec.evaluate(jp, np.array([0.0, -0.0]), np.array([5.0, 5.0]))
    np.testing.assert_array_equal(dout, [5.0, 5.0])
    t0 = sympy.Symbol("t0", real=True)
    _, d = spec.evaluate(spec.jvp(spec.trace(ops.abs, S)), np.array(X0, dtype=object),
                         np.array(t0, dtype=object), assume={X0: 0})
    assert exactly_zero(d.item() - t0)


# ==========================================================================
# (b) transpose rules: <ybar, L t> == <L^T ybar, t>, exactly

@dataclass
class TransposeCase:
    id: str
    prim: str
    fn: Callable
    types: list
    linear: tuple
    fixed: dict = field(default_factory=dict)


def custom_linear(x, y):
    """A linear custom_jvp function: transposition transposes its primal."""
    def f(a, b):
        return a * 2.0 - b

    def f_jvp(primals, tangents):
        return g(*primals), tangents[0] * 2.0 - tangents[1]
    g = spec.custom_jvp(f, f_jvp)
    return g(x, y)


def linear_call(x, y):
    body = spec.trace(lambda a, b: (a * 2.0 - b, ops.reduce_sum(b, (1,))), x.type, y.type)
    return tuple(ops.call(body, x, y, name="lin"))


def call_scale(x, y):
    body = spec.trace(lambda a, b: ops.sin(b) * a, x.type, y.type)
    return ops.call(body, x, y, name="scale")[0]


def linear_remat(policy):
    def body(a, b):
        h = ops.checkpoint_name(a * 3.0 + ops.transpose(b, (1, 0)), "h")
        return ops.reduce_sum(h, (0,)), ops.neg(h)
    return lambda x, y: tuple(ops.checkpoint(body, policy=policy)(x, y))


def remat_scale(x, y):
    body = lambda a, b: ops.checkpoint_name(ops.exp(b), "h") * a
    return ops.checkpoint(body, policy=P.save_only_these_names("h"))(x, y)


L, N = True, False
TRANSPOSE_CASES = [
    TransposeCase("neg", "neg", ops.neg, [f64[2]], (L,)),
    TransposeCase("add", "add", ops.add, [f64[2], f64[2]], (L, L)),
    TransposeCase("add-scalar-array", "add", ops.add, [S, f64[2, 2]], (L, L)),
    TransposeCase("add-size1-dims", "add", ops.add, [f64[2, 1], f64[1, 2]], (L, L)),
    TransposeCase("sub", "sub", ops.sub, [f64[2], f64[2]], (L, L)),
    TransposeCase("sub-size1-dims", "sub", ops.sub, [f64[1, 2], f64[2, 1]], (L, L)),
    TransposeCase("sub-scalar-array", "sub", ops.sub, [S, f64[2]], (L, L)),
    TransposeCase("mul-lhs", "mul", ops.mul, [f64[2], f64[2]], (L, N)),
    TransposeCase("mul-rhs", "mul", ops.mul, [f64[2], f64[2]], (N, L)),
    TransposeCase("mul-scalar-linear", "mul", ops.mul, [S, f64[2]], (L, N)),
    TransposeCase("mul-size1-dims", "mul", ops.mul, [f64[2, 1], f64[1, 2]], (N, L)),
    TransposeCase("div", "div", ops.div, [f64[2], f64[2]], (L, N)),
    TransposeCase("div-scalar-divisor", "div", ops.div, [f64[2], S], (L, N)),
    TransposeCase("div-size1-dims", "div", ops.div, [f64[2, 1], f64[1, 2]], (L, N)),
    TransposeCase("add_any", "add_any", ops.add_any, [f64[2], f64[2]], (L, L)),
    TransposeCase("select_n-bool", "select_n", ops.select_n, [bool_[2], f64[2], f64[2]], (N, L, L),
                  fixed={0: np.array([True, False])}),
    # a non-linear case would make the program affine: the other case is a zero constant (as in a JVP)
    TransposeCase("select_n-bool-one-linear", "select_n",
                  lambda p, t: ops.select_n(p, ops.broadcast_in_dim(np.float64(0.0), (2,), ()), t),
                  [bool_[2], f64[2]], (N, L), fixed={0: np.array([False, True])}),
    TransposeCase("select_n-i32", "select_n", ops.select_n, [i32[3], f64[3], f64[3], f64[3]], (N, L, L, L),
                  fixed={0: np.array([2, 0, 1], np.int32)}),
    TransposeCase("convert-f64-to-f64", "convert_element_type",
                  lambda x: ops.convert_element_type(x, np.float64), [f64[2]], (L,)),
    TransposeCase("convert-f32-to-f64", "convert_element_type",
                  lambda x: ops.convert_element_type(x, np.float64), [f32[2]], (L,)),
    TransposeCase("convert-f64-to-f32", "convert_element_type",
                  lambda x: ops.convert_element_type(x, np.float32), [f64[2]], (L,)),
    TransposeCase("dot_general-matmul-lhs", "dot_general", dg(MATMUL), [f64[2, 3], f64[3, 2]], (L, N)),
    TransposeCase("dot_general-matmul-rhs", "dot_general", dg(MATMUL), [f64[2, 3], f64[3, 2]], (N, L)),
    TransposeCase("dot_general-batch-lhs", "dot_general", dg(BATCH_0), [f64[2, 2, 3], f64[2, 3, 2]], (L, N)),
    TransposeCase("dot_general-batch-middle-rhs", "dot_general", dg(BATCH_MID),
                  [f64[2, 2, 3], f64[3, 2, 2]], (N, L)),
    TransposeCase("dot_general-contract-2-dims-lhs", "dot_general", dg(CONTRACT_2),
                  [f64[2, 3, 2], f64[2, 3, 2]], (L, N)),
    TransposeCase("dot_general-contract-2-dims-rhs", "dot_general", dg(CONTRACT_2),
                  [f64[2, 3, 2], f64[2, 3, 2]], (N, L)),
    TransposeCase("dot_general-f32-preferred-f64", "dot_general", dg(MATMUL, np.float64),
                  [f32[2, 2], f32[2, 2]], (L, N)),
    TransposeCase("dot_general-bool-by-f64-rhs", "dot_general", dg(MATMUL, np.float64),
                  [bool_[2, 3], f64[3, 2]], (N, L), fixed={0: np.array([[True, False, True], [False, True, True]])}),
    TransposeCase("dot_general-f64-by-i32-lhs", "dot_general", dg(BATCH_0), [f64[2, 2, 3], i32[2, 3, 2]], (L, N),
                  fixed={1: np.arange(12, dtype=np.int32).reshape(2, 3, 2) - 5}),
    TransposeCase("reduce_sum-axis0", "reduce_sum", lambda x: ops.reduce_sum(x, (0,)), [f64[2, 3]], (L,)),
    TransposeCase("reduce_sum-axes02", "reduce_sum", lambda x: ops.reduce_sum(x, (0, 2)), [f64[2, 2, 2]], (L,)),
    TransposeCase("reduce_sum-all", "reduce_sum", lambda x: ops.reduce_sum(x, (0, 1)), [f64[2, 2]], (L,)),
    TransposeCase("broadcast_in_dim-new-leading", "broadcast_in_dim",
                  lambda x: ops.broadcast_in_dim(x, (2, 3), (1,)), [f64[3]], (L,)),
    TransposeCase("broadcast_in_dim-new-trailing", "broadcast_in_dim",
                  lambda x: ops.broadcast_in_dim(x, (2, 2, 2), (0,)), [f64[2]], (L,)),
    TransposeCase("broadcast_in_dim-size1", "broadcast_in_dim",
                  lambda x: ops.broadcast_in_dim(x, (2, 3, 2), (0, 1)), [f64[2, 1]], (L,)),
    TransposeCase("broadcast_in_dim-scalar", "broadcast_in_dim",
                  lambda x: ops.broadcast_in_dim(x, (2, 2), ()), [S], (L,)),
    TransposeCase("reshape", "reshape", lambda x: ops.reshape(x, (3, 2)), [f64[2, 3]], (L,)),
    TransposeCase("reshape-to-scalar", "reshape", lambda x: ops.reshape(x, ()), [f64[1, 1]], (L,)),
    TransposeCase("transpose", "transpose", lambda x: ops.transpose(x, (2, 0, 1)), [f64[2, 1, 3]], (L,)),
    TransposeCase("transpose-2d", "transpose", lambda x: ops.transpose(x, (1, 0)), [f64[2, 3]], (L,)),
    TransposeCase("squeeze", "squeeze", lambda x: ops.squeeze(x, (1, 2)), [f64[2, 1, 1]], (L,)),
    TransposeCase("squeeze-leading", "squeeze", lambda x: ops.squeeze(x, (0,)), [f64[1, 3]], (L,)),
    TransposeCase("concatenate-dim0", "concatenate", lambda x, y: ops.concatenate([x, y], 0),
                  [f64[1, 2], f64[2, 2]], (L, L)),
    TransposeCase("concatenate-dim1-three", "concatenate", lambda x, y, z: ops.concatenate([x, y, z], 1),
                  [f64[2, 1], f64[2, 2], f64[2, 1]], (L, L, L)),
    TransposeCase("slice", "slice", lambda x: ops.slice(x, (1, 0), (3, 2)), [f64[3, 3]], (L,)),
    TransposeCase("slice-strided", "slice", lambda x: ops.slice(x, (0, 1), (3, 4), (2, 2)), [f64[3, 4]], (L,)),
    TransposeCase("slice-strided-unaligned", "slice", lambda x: ops.slice(x, (1, 0), (5, 3), (2, 2)),
                  [f64[5, 3]], (L,)),
    TransposeCase("pad", "pad", lambda x, v: ops.pad(x, v, PAD_CFG), [f64[2, 2], S], (L, L)),
    TransposeCase("pad-crop-interior", "pad", lambda x, v: ops.pad(x, v, PAD_CROP), [f64[3, 3], S], (L, L)),
    TransposeCase("pad-zero-literal", "pad", lambda x: ops.pad(x, np.float64(0.0), PAD_CFG), [f64[2, 2]], (L,)),
    TransposeCase("name", "name", lambda x: ops.checkpoint_name(x, "n"), [f64[2]], (L,)),
    TransposeCase("device_put-pinned_host", "device_put",
                  lambda x: spec.core.bind(device_put_p, x, memory_space="pinned_host")[0], [f64[2]], (L,)),
    TransposeCase("device_put-two-operands", "device_put",
                  lambda x, y: spec.core.bind(device_put_p, x, y, memory_space="pinned_host"), [f64[2], f64[3]],
                  (L, L)),
    TransposeCase("call-linear", "call", linear_call, [f64[2, 2], f64[2, 2]], (L, L)),
    TransposeCase("custom_jvp_call-linear", "custom_jvp_call", custom_linear, [f64[2], f64[2]], (L, L)),
    TransposeCase("call-linear-in-first", "call", call_scale, [f64[2], f64[2]], (L, N)),
    TransposeCase("remat-none", "remat", linear_remat(None), [f64[2, 2], f64[2, 2]], (L, L)),
    TransposeCase("remat-save_only_h", "remat", linear_remat(P.save_only_these_names("h")),
                  [f64[2, 2], f64[2, 2]], (L, L)),
    TransposeCase("remat-linear-in-first", "remat", remat_scale, [f64[2], f64[2]], (L, N)),
    *[TransposeCase(f"cond-index{i}", "cond", lambda i, x, y: spec.switch(
        i, [lambda a, b: a * 2.0 - b, lambda a, b: b * 3.0], x, y),
        [spec.i32[()], f64[2], f64[2]], (N, L, L), fixed={0: np.int32(i)}) for i in (0, 1)],
    TransposeCase("cond-linear-in-second", "cond", lambda i, x, y: spec.switch(
        i, [lambda a, b: ops.sin(a) * b, lambda a, b: b * a], x, y),
        [spec.i32[()], f64[2], f64[2]], (N, N, L), fixed={0: np.int32(0)}),
    # linear in b (two leaves), the consts of a non-symmetric A = [[p, q], [0, r]] non-linear
    TransposeCase("custom_linear_solve", "custom_linear_solve", upper_solve, [f64[2]] * 5, (N, N, N, L, L)),
    # scan linear in its carry, one xs and one const; a non-linear const and xs as residuals
    TransposeCase("scan-linear", "scan", lambda c, xs, w, ys, v: spec.scan(
        lambda c, xy, w, v: (c * ops.sin(w) + xy[0] * xy[1] + v, c * xy[1] - xy[0]), c, (xs, ys),
        consts=(w, v)),
        [f64[2], f64[3, 2], f64[2], f64[3, 2], f64[2]], (L, L, N, N, L)),
]
assert len({c.id for c in TRANSPOSE_CASES}) == len(TRANSPOSE_CASES)


@pytest.mark.parametrize("case", TRANSPOSE_CASES, ids=[c.id for c in TRANSPOSE_CASES])
def test_transpose_rule_is_exact_adjoint(case):
    prog = spec.trace(case.fn, *case.types)
    assert case.prim in {e.primitive.name for e in prog.eqns}, f"{case.id} does not bind {case.prim}"
    args = symbols_for(case.types, "x", case.fixed)       # linear inputs: the direction t
    ybar = [array(f"ybar{i}_", t.shape) for i, t in enumerate(prog.out_types)]
    lt = spec.evaluate(prog, *args)
    tp = spec.transpose(prog, list(case.linear))
    nonlin = [a for a, lin in zip(args, case.linear) if not lin]
    tbar = spec.evaluate(tp, *nonlin, *ybar)
    lin_args = [a for a, lin in zip(args, case.linear) if lin]
    assert [b.shape for b in tbar] == [a.shape for a in lin_args]
    diff = inner(ybar, lt) - inner(tbar, lin_args)
    assert exactly_zero(diff), f"{case.id}: <ybar, L t> - <L^T ybar, t> = {sympy.expand(diff)}"


# Transpose rules that raise JAX's error instead of transposing: name ->
# (reason, a program binding it, the message). Each is checked to raise it.
TRANSPOSE_ERRORS = {
    "while": ("JAX registers _while_transpose_error for while_p: reverse mode of a while loop is "
              "an error (tests/test_control.py checks spec.grad against jax.grad's message)",
              (lambda x: spec.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))[1],
               [f64[2]]),
              "Reverse-mode differentiation does not work for lax.while_loop"),
    "remat_opt": ("JAX registers _remat_opt_transpose, which raises NotImplementedError: a "
                  "custom_vjp(optimize_remat=True) forward rule has no reverse mode of its own",
                  (remat_opt_sin_mul, [f64[2], f64[2]]),
                  "remat optimization for custom_vjp does not support higher-order AD", NotImplementedError),
}


@pytest.mark.parametrize("name", sorted(TRANSPOSE_ERRORS))
def test_error_transpose_rule_raises_jax_error(name):
    _, (fn, types), message, *error = TRANSPOSE_ERRORS[name]
    prog = spec.trace(fn, *types)
    assert name in {e.primitive.name for e in prog.eqns}
    with pytest.raises(error[0] if error else ValueError, match=re.escape(message)):
        spec.transpose(prog, [True] * len(types))


# Transpose rules that are a definition rather than an adjoint: custom_lin
# (the linear part of a custom_vjp, which cannot be evaluated) transposes
# into the user's bwd. test_custom_lin_transposes_into_bwd checks that exactly.
TRANSPOSE_BY_DEFINITION = {"custom_lin": "custom_vjp's bwd, by definition"}


def test_custom_lin_transposes_into_bwd():
    h = _custom_vjp_sin()
    prog = spec.trace(lambda x: ops.reduce_sum(h(x), (0,)), f64[2])
    x = array("x", (2,))
    (g,) = spec.evaluate(spec.grad(prog), x)
    for gi, xi in zip(g, x):
        assert exactly_zero(sympy.sympify(gi) - 3 * sympy.cos(xi))


def test_every_transpose_rule_is_proved():
    proved = {c.prim for c in TRANSPOSE_CASES} | set(TRANSPOSE_ERRORS) | set(TRANSPOSE_BY_DEFINITION)
    assert not {c.prim for c in TRANSPOSE_CASES} & set(TRANSPOSE_ERRORS), "an error rule is also proved"
    # primitives with Examples that declare linear masks: the adjoint identity is checked
    # for each mask in tests/test_primitive_examples.py
    proved |= {p.name for p, exs in spec.core.examples.items() if any(ex.linear for ex in exs)}
    from test_prims_collective import NAMED_PROOFS
    proved |= set(NAMED_PROOFS)         # exact adjoints under a named vmap: tests/test_prims_collective.py
    # (the oracle's model primitives, spec.core.extension_primitives, are not the spec's)
    with_rule = {p.name for p in spec.transpose_rules if p not in spec.core.extension_primitives}
    assert with_rule <= proved, f"transpose rules with no exact adjoint proof: {sorted(with_rule - proved)}"


# ==========================================================================
# (c) whole programs: spec gradient == sympy gradient, exactly

def mlp_layer(x, W, b):
    h = ops.checkpoint_name(x @ W, "h")
    z = h + ops.broadcast_in_dim(b, (x.shape[0], W.shape[1]), (1,))
    return ops.reduce_sum(ops.checkpoint_name(ops.tanh(z), "a"), (0, 1))


def softmax_weighted(x, w):
    e = ops.checkpoint_name(ops.exp(x), "h")
    s = ops.reduce_sum(e, (0,))
    p = e / ops.broadcast_in_dim(s, e.shape, ())
    return ops.reduce_sum(ops.checkpoint_name(p * w, "a"), (0,))


def logsumexp_stable(x):
    m = ops.stop_gradient(ops.reduce_max(x, (0,)))
    e = ops.checkpoint_name(ops.exp(x - ops.broadcast_in_dim(m, x.shape, ())), "h")
    return m + ops.log(ops.checkpoint_name(ops.reduce_sum(e, (0,)), "a"))


def kinks(x, y):
    h = ops.checkpoint_name(ops.abs(x - y) + ops.max(x, y * y), "h")
    a = ops.checkpoint_name(ops.min(ops.sin(h), y), "a")
    return ops.reduce_max(a * h, (0,)) + ops.reduce_sum(a, (0,))


def structural(x, y):
    c = ops.concatenate([x, ops.pad(y, np.float64(0.5), ((1, 0, 1),))], 0)     # [2] ++ [4] -> [6]
    h = ops.checkpoint_name(ops.slice(c, (1,), (6,), (2,)), "h")                # [3]
    a = ops.checkpoint_name(ops.reshape(ops.sin(h), (3, 1)), "a")
    return ops.reduce_sum(ops.integer_pow(ops.squeeze(a, (1,)), 3) * ops.rsqrt(1.0 + ops.square(h)), (0,))


def nested_jit_checkpoint(policy):
    def f(x, y):
        inner_ = ops.checkpoint(lambda a: ops.tanh(ops.checkpoint_name(ops.sin(a) * a, "h")),
                                policy=P.save_only_these_names("h"))

        def outer(a, b):
            return ops.reduce_sum(ops.checkpoint_name(inner_(a * b), "a") * ops.cos(b), (0,))

        jit = spec.trace(lambda a, b: ops.checkpoint(outer, policy=policy)(a, b)
                         + ops.reduce_sum(ops.logistic(a), (0,)), x.type, y.type)
        return ops.call(jit, x, ops.exp(y), name="jit_f")[0]
    return f


POLICIES = {
    "no-remat": "no-remat",
    "none": None,
    "nothing_saveable": P.nothing_saveable,
    "everything_saveable": P.everything_saveable,
    "dots_saveable": P.dots_saveable,
    "save_only_h": P.save_only_these_names("h"),
    "save_any_names_but_a": P.save_any_names_but_these("a"),
    "save_anything_except_a": P.save_anything_except_these_names("a"),
    "both(dots,only_a)": P.save_from_both_policies(P.dots_saveable, P.save_only_these_names("a")),
    "offload_names": P.save_and_offload_only_these_names(
        names_which_can_be_saved=["h"], names_which_can_be_offloaded=["a"],
        offload_src="device", offload_dst="pinned_host"),
    "offload_dots": P.offload_dot_with_no_batch_dims("device", "pinned_host"),
}

# name -> (fn, types, assume point or None, policies to try)
WHOLE = {
    "mlp-layer": (mlp_layer, [f64[2, 3], f64[3, 2], f64[2]], None, list(POLICIES)),
    "softmax-weighted": (softmax_weighted, [f64[3], f64[3]], None,
                         ["no-remat", "none", "save_only_h", "everything_saveable", "offload_names"]),
    "logsumexp-stop-gradient": (logsumexp_stable, [f64[3]], ([0.5, 2.0, -1.0],),
                                ["no-remat", "none", "save_any_names_but_a", "save_only_h"]),
    "max-abs-min-kinks": (kinks, [f64[2], f64[2]], ([0.5, -1.0], [1.5, 0.25]),
                          ["no-remat", "none", "save_only_h", "save_anything_except_a", "offload_names"]),
    "structural": (structural, [f64[2], f64[2]], None, ["no-remat", "none", "save_only_h", "everything_saveable"]),
}
WHOLE_PARAMS = [(n, p) for n, (_, _, _, ps) in WHOLE.items() for p in ps]


def _wrap(fn, policy):
    if policy == "no-remat":
        return fn
    return lambda *args: ops.checkpoint(fn, policy=policy)(*args)


def _check_gradient(prog, assume_values):
    args = spec.symbolic.inputs(prog)
    assume = point(args, assume_values) if assume_values is not None else None
    got = gradient(prog, args, assume)
    want = sympy_gradient(prog, args, assume)
    assert len(got) == len(want) == len(args)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape
        for idx in np.ndindex(*g.shape):
            assert exactly_zero(sympy.sympify(g[idx]) - w[idx]), (
                f"d/d input {k}{list(idx)}:\n  spec:  {g[idx]}\n  sympy: {w[idx]}")


@pytest.mark.parametrize("name,policy", WHOLE_PARAMS, ids=[f"{n}-{p}" for n, p in WHOLE_PARAMS])
def test_gradient_is_exact(name, policy):
    fn, types, at, _ = WHOLE[name]
    prog = spec.trace(_wrap(fn, POLICIES[policy]), *types)
    _check_gradient(prog, at)


@pytest.mark.parametrize("policy", ["none", "nothing_saveable", "everything_saveable", "save_only_h",
                                    "dots_saveable", "offload_names"])
def test_gradient_through_nested_checkpoint_and_jit_is_exact(policy):
    prog = spec.trace(nested_jit_checkpoint(POLICIES[policy]), f64[2], f64[2])
    names = {e.primitive.name for e in prog.eqns}
    assert "call" in names
    _check_gradient(prog, None)
