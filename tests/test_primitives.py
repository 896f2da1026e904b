"""Per-primitive tests of the spec beyond its registered examples: JAX's
conventions at kinks, VJP on composites, errors; and the tolerances the
example checks use.

Each primitive's uses (evaluation, JVP, transposition, vmap against numpy
references) are Examples in its block (`spec.core.examples`), checked by
tests/test_primitive_examples.py and tests/test_batching.py with the
tolerances written down here once.

Every expected value comes from an independent source -- a numpy formula
written here, or float64 central finite differences of such a formula --
except the transpose (dot-product) identity, which by definition relates
two spec results. No jax import: the spec is checked against math, not JAX.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import spec
from spec import ops
from spec.ir import ArrayType, is_float

# ==========================================================================
# tolerances (written once, justified here)

# Evaluation: a spec primitive computes in the operand dtype and rounds its
# result once or a few times (rsqrt = 1/sqrt, logistic = 1/(1+exp(-x)),
# negative integer powers 1/x**n), and numpy's float32 transcendental kernels
# are within ~2-3 ulp. The reference is computed in float64 on the very same
# (exactly representable) inputs, so it is exact to float32 precision and
# input rounding plays no part. 8 ulps covers every elementwise primitive with
# margin, yet an actual mistake (wrong formula, wrong axis) is off by O(1).
EVAL_ULPS = 8


def eval_rtol(dtype, cond: float = 1.0) -> float:
    """rtol for a spec result of `dtype` against an exact reference.

    `cond` is the condition of the computation: a sum of n terms (reduce_sum,
    dot_general) accumulates up to ~n roundings of the running sum, so those
    cases pass cond=n and measure the error against sum|terms| (see
    assert_eval_close's `scale`)."""
    return EVAL_ULPS * float(np.finfo(dtype).eps) * cond


def assert_eval_close(got, want, dtype, cond=1.0, scale=None):
    """Compare one output. Non-float outputs must be exact. For floats the
    absolute error is measured at the scale of the values (inputs here are
    O(1), so at least 1): a result near 0 obtained from O(1) intermediates
    carries the rounding of those intermediates, not of itself."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    if not is_float(got.dtype):
        np.testing.assert_array_equal(got, want)
        return
    rtol = eval_rtol(got.dtype, cond)
    if scale is None:
        scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=rtol, atol=rtol * scale)


# Finite differences: central differences with step h = 1e-6 on O(1) inputs
# (|x| <= ~3, so the step is ~1e-6 relative). Truncation error is
# h**2/6 * |f'''| ~ 1e-12 * |f'''| and the rounding error is
# eps64 * |f| / h ~ 2e-10 * |f|; for the functions below (|f'''| <= ~1e3 on
# the chosen domains) both are below 1e-8. An rtol/atol of 1e-6 (atol at
# the scale max(1, |derivative|)) therefore has >= 100x margin, while any
# wrong derivative rule is off by O(1). A float32 tangent output (conversion
# to f32) adds half an f32 ulp, 6e-8, also well inside.
FD_STEP = 1e-6
FD_TOL = 1e-6


def assert_fd_close(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=FD_TOL, atol=FD_TOL * scale)


# Transpose identity <ybar, J t> == <J^T ybar, t>: each side is an inner
# product of at most ~100 products, and J t, J^T ybar themselves sum at most
# ~10 terms per entry, so each side is within ~200 eps * sum|terms| of the
# exact value. 1000 eps of the least precise dtype involved leaves margin;
# a wrong transpose rule is off by O(sum|terms|).
TRANSPOSE_EPS_FACTOR = 1000


def as_list(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def fd_jvp(f, xs, ts, float_idx):
    """Central difference of numpy `f` at xs (float inputs in float64) in the
    direction ts (one tangent per index in float_idx)."""
    def at(sign):
        args = list(xs)
        for i, t in zip(float_idx, ts):
            args[i] = xs[i] + sign * FD_STEP * t
        return [np.asarray(o, np.float64) for o in as_list(f(*args))]
    plus, minus = at(+1), at(-1)
    return [(p - m) / (2 * FD_STEP) for p, m in zip(plus, minus)]


# ==========================================================================
# input generators for the composites below: each returns float64 or int32

def normal(*shape):
    return lambda rng: rng.normal(size=shape)


def positive(*shape):           # domain of log, sqrt, rsqrt
    return lambda rng: rng.uniform(0.5, 2.0, size=shape)


def ints(*shape, lo=0, hi=3):
    return lambda rng: rng.integers(lo, hi, size=shape).astype(np.int32)


def tanh_ref(x):
    e = np.exp(2.0 * x)
    return (e - 1.0) / (e + 1.0)


def dg(dn, pet=None):
    return lambda x, y: ops.dot_general(x, y, dn, preferred_element_type=pet)


MATMUL = (((1,), (0,)), ((), ()))


# ==========================================================================
# (a) JAX's conventions at kinks (each primitive's examples, in its block,
# are checked by tests/test_primitive_examples.py)

@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("side", [0, 1], ids=["d-lhs", "d-rhs"])
def test_minmax_tie_splits_derivative_evenly(op, side):
    """JAX's balanced rule: at x == y, d max(x, y) = 0.5 dx + 0.5 dy."""
    prog = spec.trace(getattr(ops, op), spec.f64[4], spec.f64[4])
    jp = spec.jvp(prog)
    x = np.array([-1.5, 0.0, 0.25, 3.0])
    t = np.array([1.0, 2.0, -4.0, 8.0])
    ts = [t, np.zeros(4)] if side == 0 else [np.zeros(4), t]
    out, dout = spec.evaluate(jp, x, x.copy(), *ts)
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(dout, 0.5 * t)


def test_max_of_same_value_has_unit_derivative():
    """max(x, x) = x: the two halves add up to 1."""
    jp = spec.jvp(spec.trace(lambda x: ops.max(x, x), spec.f64[3]))
    x, t = np.array([1.0, -2.0, 0.5]), np.array([3.0, 5.0, -7.0])
    _, dout = spec.evaluate(jp, x, t)
    np.testing.assert_array_equal(dout, t)


def test_reduce_max_tie_averages_tangent():
    """JAX's reduce chooser rule: ties share the derivative equally."""
    jp = spec.jvp(spec.trace(lambda x: ops.reduce_max(x, (0,)), spec.f64[4]))
    out, dout = spec.evaluate(jp, np.array([1.0, 3.0, 3.0, 0.0]), np.array([1.0, 2.0, 4.0, 8.0]))
    assert out == 3.0 and dout == 3.0


def test_abs_derivative_at_zero_is_one():
    """JAX's abs JVP is select(x >= 0, t, -t): +t at 0."""
    jp = spec.jvp(spec.trace(ops.abs, spec.f64[3]))
    _, dout = spec.evaluate(jp, np.array([0.0, -1.0, 2.0]), np.array([5.0, 5.0, 5.0]))
    np.testing.assert_array_equal(dout, [5.0, -5.0, 5.0])


# ==========================================================================
# (b) transposition (the dot-product identity of each example's linear
# masks: tests/test_primitive_examples.py)

@pytest.mark.parametrize("scalar", [np.float64(0.5), np.asarray(0.5), 0.5], ids=["np.float64", "0-d-array", "python-float"])
def test_float64_scalar_constant_operand(scalar):
    """A numpy/Python constant of the operand's dtype is a literal operand
    (pad takes its padding value as an operand, with no weak-type coercion
    of Python floats, which become f32 literals)."""
    dtype = np.float32 if type(scalar) is float else np.float64
    x = np.arange(3.0, dtype=dtype)
    prog = spec.trace(lambda x: ops.pad(x, scalar, ((1, 1, 0),)), ArrayType((3,), dtype))
    spec.check_program(prog)
    np.testing.assert_array_equal(spec.evaluate(prog, x)[0], [0.5, 0.0, 1.0, 2.0, 0.5])


def test_transpose_of_non_linear_argument_is_rejected():
    prog = spec.trace(ops.div, spec.f64[3], spec.f64[3])
    with pytest.raises(spec.PrimitiveError, match="^div"):
        spec.transpose(prog, [False, True])
    prog = spec.trace(ops.mul, spec.f64[3], spec.f64[3])
    with pytest.raises(spec.PrimitiveError, match="^mul"):
        spec.transpose(prog, [True, True])


# ==========================================================================
# (c) VJP == transposed JVP == finite-difference gradient, on composites

@dataclass
class Composite:
    id: str
    fn: Callable
    ref: Callable
    gens: list

    def make(self, rng):
        return [np.asarray(g(rng)) for g in self.gens]


def _mlp(x, W, b):
    h = ops.dot_general(x, W, MATMUL) + ops.broadcast_in_dim(b, (x.shape[0], W.shape[1]), (1,))
    return ops.tanh(h), ops.reduce_sum(x * x, (0, 1))


COMPOSITES = [
    Composite("sin-chain", lambda x: ops.sin(ops.sin(ops.sin(x))),
              lambda x: np.sin(np.sin(np.sin(x))), [normal(4)]),
    Composite("tanh-mlp-layer", _mlp, lambda x, W, b: (tanh_ref(x @ W + b), np.sum(x * x)),
              [normal(2, 3), normal(3, 4), normal(4)]),
    Composite("reduce_max", lambda x, y: ops.reduce_max(ops.sin(x) * y, (1,)),
              lambda x, y: np.max(np.sin(x) * y, axis=1), [normal(3, 4), positive(3, 4)]),
    Composite("broadcast-scalar-size1",
              lambda x, y, s: (x * y + s) / s - ops.square(y),
              lambda x, y, s: (x * y + s) / s - y * y,
              [normal(3, 1), normal(1, 4), lambda rng: np.asarray(rng.uniform(1.0, 2.0))]),
    Composite("int-input",
              lambda x, n: ops.exp(x) * ops.convert_element_type(n, np.float64),
              lambda x, n: np.exp(x) * n, [normal(3), ints(3, lo=-3, hi=4)]),
]


def spec_jacobian(prog, vals):
    """The Jacobian (float outputs x float inputs, flattened), column by column
    from the spec's JVP program."""
    jp = spec.jvp(prog)
    float_idx = [i for i, v in enumerate(vals) if is_float(v.dtype)]
    n = len(prog.outputs)
    cols = []
    for i in float_idx:
        for k in range(vals[i].size):
            ts = [np.zeros_like(vals[j]) for j in float_idx]
            ts[float_idx.index(i)].reshape(-1)[k] = 1.0
            tans = spec.evaluate(jp, *vals, *ts)[n:]
            cols.append(np.concatenate([t.reshape(-1) for t in tans]))
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("comp", COMPOSITES, ids=[c.id for c in COMPOSITES])
def test_vjp_equals_transposed_jvp_and_finite_differences(comp):
    rng = np.random.default_rng(3)
    vals = comp.make(rng)
    prog = spec.trace(comp.fn, *[ArrayType(v.shape, v.dtype) for v in vals])
    outs, vjp_fn, _ = spec.vjp(prog, *vals)
    for o, w in zip(outs, as_list(comp.ref(*vals))):
        assert_fd_close(o, w)
    float_out = [t for t in prog.out_types if is_float(t.dtype)]
    cts = [rng.normal(size=t.shape) for t in float_out]
    grads = vjp_fn(*cts)
    assert len(grads) == len(vals)
    float_idx = [i for i, v in enumerate(vals) if is_float(v.dtype)]
    for i, (g, v) in enumerate(zip(grads, vals)):
        assert g.shape == v.shape
        if i not in float_idx:   # integer inputs get float0 cotangents
            assert g.dtype == spec.float0
    got = np.concatenate([grads[i].reshape(-1) for i in float_idx])

    # J^T ct with J from the spec's JVP: a check of transposition
    ct_flat = np.concatenate([c.reshape(-1) for c in cts])
    J = spec_jacobian(prog, vals)
    np.testing.assert_allclose(got, J.T @ ct_flat, rtol=1e-12,
                               atol=1e-12 * float(np.max(np.abs(J.T) @ np.abs(ct_flat))))

    # d <ct, f(x)> / dx by central differences of the numpy formula
    def scalar(*xs):
        return sum(float(np.sum(c * np.asarray(o, np.float64)))
                   for c, o in zip(cts, as_list(comp.ref(*xs))))
    fd = []
    for i in float_idx:
        for k in range(vals[i].size):
            e = np.zeros(vals[i].size)
            e[k] = 1.0
            fd.append(fd_jvp(lambda *xs: np.asarray(scalar(*xs)), vals, [e.reshape(vals[i].shape)], [i])[0])
    assert_fd_close(got, np.array(fd))


# ==========================================================================
# (d) bad input: PrimitiveError naming the primitive

def _trace(fn, *types):
    return lambda: spec.trace(fn, *types)


f32, i32, u32 = spec.f32, spec.i32, spec.ir.u32
ipow = spec.prims_elementwise.integer_pow_p

ERRORS = [
    ("add-shape-mismatch", "add", _trace(ops.add, f32[3], f32[4])),
    ("mul-shape-mismatch-2d", "mul", _trace(ops.mul, f32[3, 2], f32[2, 3])),
    ("sin-of-i32", "sin", _trace(ops.sin, i32[3])),
    ("exp-of-bool", "exp", _trace(ops.exp, spec.bool_[3])),
    ("add-f32-i32", "add", _trace(ops.add, f32[3], i32[3])),
    ("max-f32-f64", "max", _trace(ops.max, f32[3], spec.f64[3])),
    ("integer_pow-unknown-param", "integer_pow",
     _trace(lambda x: spec.core.bind(ipow, x, y=2, z=1), f32[3])),
    ("integer_pow-missing-param", "integer_pow", _trace(lambda x: spec.core.bind(ipow, x), f32[3])),
    ("sin-unknown-param", "sin",
     _trace(lambda x: spec.core.bind(spec.prims_elementwise.sin_p, x, accuracy=None, y=1), f32[3])),
    ("integer_pow-non-int-y", "integer_pow", _trace(lambda x: ops.integer_pow(x, 2.0), f32[3])),
    ("integer_pow-negative-of-int", "integer_pow", _trace(lambda x: ops.integer_pow(x, -1), i32[3])),
    ("select_n-f32-predicate", "select_n", _trace(ops.select_n, f32[3], f32[3], f32[3])),
    ("select_n-case-mismatch", "select_n", _trace(ops.select_n, spec.bool_[3], f32[3], f32[4])),
    ("select_n-bool-three-cases", "select_n",
     _trace(ops.select_n, spec.bool_[3], f32[3], f32[3], f32[3])),
    ("dot_general-contract-mismatch", "dot_general", _trace(dg(MATMUL), f32[3, 4], f32[5, 2])),
    ("dot_general-preferred-narrower", "dot_general", _trace(dg(MATMUL, np.bool_), i32[3, 4], i32[4, 2])),
    ("dot_general-preferred-narrower-mixed", "dot_general",
     _trace(dg(MATMUL, np.bool_), spec.bool_[3, 4], u32[4, 2])),
    ("reduce_sum-bad-axis", "reduce_sum", _trace(lambda x: ops.reduce_sum(x, (2,)), f32[3, 4])),
    ("reduce_max-duplicate-axes", "reduce_max", _trace(lambda x: ops.reduce_max(x, (0, 0)), f32[3, 4])),
    ("broadcast_in_dim-bad-size", "broadcast_in_dim",
     _trace(lambda x: ops.broadcast_in_dim(x, (2, 4), (1,)), f32[3])),
    ("reshape-bad-size", "reshape", _trace(lambda x: ops.reshape(x, (5,)), f32[2, 3])),
    ("transpose-bad-permutation", "transpose", _trace(lambda x: ops.transpose(x, (0, 0)), f32[2, 3])),
    ("squeeze-non-unit-dim", "squeeze", _trace(lambda x: ops.squeeze(x, (0,)), f32[2, 3])),
    ("concatenate-mismatch", "concatenate",
     _trace(lambda x, y: ops.concatenate([x, y], 0), f32[2, 3], f32[2, 4])),
    ("slice-out-of-bounds", "slice", _trace(lambda x: ops.slice(x, (0,), (5,)), f32[4])),
    ("pad-value-dtype", "pad", _trace(lambda x, v: ops.pad(x, v, ((1, 1, 0),)), f32[3], spec.f64[()])),
    ("call-wrong-types", "call",
     _trace(lambda x: ops.call(spec.trace(ops.sin, f32[3]), x), f32[4])),
]


@pytest.mark.parametrize("name,build", [(n, b) for _, n, b in ERRORS], ids=[e[0] for e in ERRORS])
def test_bad_input_raises_primitive_error(name, build):
    with pytest.raises(spec.PrimitiveError) as info:
        build()
    assert isinstance(info.value, TypeError)
    assert str(info.value).startswith(f"{name}:"), str(info.value)


def test_select_n_jvp_shares_one_zero_among_constant_cases():
    """lax._select_jvp makes one zero for every case whose tangent is zero;
    jax 0.10.2's linearization of select_n(i, x, c, c) (c a constant) reads
    `h = broadcast_in_dim 0.0` twice: `select_n g b h h` (make_jaxpr of
    jax.linearize, recorded by hand; the fuzzer's finding: the spec saved
    two zeros)."""
    c = np.array([0.5, 0.75, 1.0], np.float32)

    def f(x):
        which = ops.convert_element_type(ops.gt(x, c), np.int32)
        return ops.select_n(which, x, c, c)
    jp, _ = spec.jvp_program(spec.trace(f, spec.f32[3]))
    tangent_select = jp.eqns[-1]
    assert tangent_select.primitive.name == "select_n"
    zeros = tangent_select.inputs[2:]
    assert zeros[0] is zeros[1]
    assert [r.source.primitive for r in spec.saved_residuals(spec.trace(f, spec.f32[3]))].count(
        "broadcast_in_dim") == 1
