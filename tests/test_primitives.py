"""Per-primitive tests of the spec: evaluation, JVP, transposition, VJP, errors.

Every expected value comes from an independent source -- a numpy formula
written here, or float64 central finite differences of such a formula --
except the transpose (dot-product) identity, which by definition relates
two spec results. No jax import: the spec is checked against math, not JAX.
"""
from __future__ import annotations

from dataclasses import dataclass, field
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
# input generators: each returns float64 (cast by the test), int32 or bool

def normal(*shape):
    return lambda rng: rng.normal(size=shape)


def positive(*shape):           # domain of log, sqrt, rsqrt
    return lambda rng: rng.uniform(0.5, 2.0, size=shape)


def log1p_domain(*shape):
    return lambda rng: rng.uniform(-0.5, 2.0, size=shape)


def away_from_zero(*shape):     # divisors, abs, negative powers
    return lambda rng: rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)


def grid(*shape, offset=0.0):
    """Values k/2 + offset + noise(<0.05): grids with offsets 0 and 0.25 never
    come closer than 0.15, so max/min have no ties (even under FD steps)."""
    return lambda rng: (rng.integers(-4, 5, size=shape) * 0.5 + offset
                        + rng.uniform(-0.05, 0.05, size=shape))


def halves(*shape):             # exact in f32 and often equal: exercises eq/ge/le
    return lambda rng: rng.integers(-2, 3, size=shape) * 0.5


def distinct(*shape):           # for reduce_max: no ties, gaps of 0.25
    n = int(np.prod(shape))
    return lambda rng: (rng.permutation(n).reshape(shape) * 0.25 - 1.0
                        + rng.uniform(0, 0.05, size=shape))


def bools(*shape):
    return lambda rng: rng.random(size=shape) < 0.5


def ints(*shape, lo=0, hi=3):
    return lambda rng: rng.integers(lo, hi, size=shape).astype(np.int32)


# ==========================================================================
# the cases

@dataclass
class Case:
    id: str
    fn: Callable                 # builder: spec tracers -> tracer(s)
    ref: Callable                # independent numpy formula
    gens: list                   # one generator per input
    fixed: dict = field(default_factory=dict)   # input index -> dtype that tests keep
    linear: list = field(default_factory=list)  # masks for which the program is linear
    cond: float = 1.0            # number of summed terms (reductions, dots)
    abs_scale: bool = False      # scale = ref(|inputs|) (= sum|terms| for sums/dots)
    tangent: str = "fd"          # "fd", or "zero" (stop_gradient)

    def make(self, rng, dtype):
        vals = []
        for i, g in enumerate(self.gens):
            v = np.asarray(g(rng))
            if i in self.fixed:
                v = v.astype(self.fixed[i])
            elif v.dtype == np.float64:
                v = v.astype(dtype)
            vals.append(v)
        return vals

    def program(self, vals):
        return spec.trace(self.fn, *[ArrayType(v.shape, v.dtype) for v in vals])


def lit(x, value):
    """A scalar constant of x's dtype (for ops that do not coerce Python scalars)."""
    return np.asarray(value, dtype=x.dtype)


def ref_pad(x, v, config):
    """Independent lax.pad: interior-dilate, then pad/crop each edge."""
    x = np.asarray(x)
    for axis, (lo, hi, interior) in enumerate(config):
        n = x.shape[axis]
        idx = np.arange(n) * (interior + 1)
        size = (n - 1) * (interior + 1) + 1 if n else 0
        shape = list(x.shape)
        shape[axis] = size
        out = np.full(shape, v, dtype=x.dtype)
        np.put_along_axis(out, idx.reshape([-1 if a == axis else 1 for a in range(x.ndim)]),
                          x, axis=axis)
        if lo >= 0:
            out = np.concatenate([np.full(shape[:axis] + [lo] + shape[axis + 1:], v, x.dtype), out], axis)
        else:
            out = np.take(out, np.arange(-lo, out.shape[axis]), axis=axis)
        shape = list(out.shape)
        if hi >= 0:
            out = np.concatenate([out, np.full(shape[:axis] + [hi] + shape[axis + 1:], v, x.dtype)], axis)
        else:
            out = np.take(out, np.arange(0, out.shape[axis] + hi), axis=axis)
        x = out
    return x


def sig(x):      # logistic, via a different formula than the spec's
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def tanh_ref(x):
    e = np.exp(2.0 * x)
    return (e - 1.0) / (e + 1.0)


def call_sin_mul(x, y):
    body = spec.trace(lambda a, b: ops.sin(a) * b, x.type, y.type)
    return ops.call(body, x, y, name="f")[0]


def call_two_outputs(x, y):
    body = spec.trace(lambda a, b: (ops.tanh(a) + b, ops.reduce_sum(a * b, (0,))), x.type, y.type)
    return tuple(ops.call(body, x, y, name="g"))


def call_linear(x, y):
    body = spec.trace(lambda a, b: (a * 2.0 - b, ops.reduce_sum(b, (1,))), x.type, y.type)
    return tuple(ops.call(body, x, y, name="lin"))


def call_linear_in_first(x, y):
    body = spec.trace(lambda a, b: a * b, x.type, y.type)
    return ops.call(body, x, y, name="scale")[0]


def dg(dn, pet=None):
    return lambda x, y: ops.dot_general(x, y, dn, preferred_element_type=pet)


CONTRACT_2 = (((1, 2), (1, 0)), ((), ()))           # lhs [3,4,2] . rhs [2,4,5] -> [3,5]
BATCH_0 = (((2,), (1,)), ((0,), (0,)))              # [2,3,4] . [2,4,5] -> [2,3,5]
BATCH_MID = (((2,), (0,)), ((1,), (1,)))            # [3,2,4] . [4,2,5] -> [2,3,5]
MATMUL = (((1,), (0,)), ((), ()))

PAD_CFG = ((1, 2, 0), (0, 1, 2))
PAD_CROP = ((-1, 1, 1), (2, -2, 0))
T, Fa = True, False

CASES = [
    # ---- unary ----
    Case("neg", ops.neg, lambda x: -x, [normal(3, 4)], linear=[(T,)]),
    Case("sin", ops.sin, np.sin, [normal(3, 4)]),
    Case("cos", ops.cos, np.cos, [normal(3, 4)]),
    Case("tanh", ops.tanh, tanh_ref, [normal(3, 4)]),
    Case("exp", ops.exp, np.exp, [normal(3, 4)]),
    Case("log", ops.log, np.log, [positive(3, 4)]),
    Case("log1p", ops.log1p, lambda x: np.log(1.0 + x), [log1p_domain(3, 4)]),
    Case("logistic", ops.logistic, sig, [normal(3, 4)]),
    Case("sqrt", ops.sqrt, lambda x: x ** 0.5, [positive(3, 4)]),
    Case("rsqrt", ops.rsqrt, lambda x: x ** -0.5, [positive(3, 4)]),
    Case("square", ops.square, lambda x: x * x, [normal(3, 4)]),
    Case("abs", ops.abs, lambda x: np.where(x < 0, -x, x), [away_from_zero(3, 4)]),
    Case("integer_pow-y0", lambda x: ops.integer_pow(x, 0), lambda x: np.ones_like(x), [normal(3, 4)]),
    Case("integer_pow-y1", lambda x: ops.integer_pow(x, 1), lambda x: x, [normal(3, 4)]),
    Case("integer_pow-y2", lambda x: ops.integer_pow(x, 2), lambda x: x * x, [normal(3, 4)]),
    Case("integer_pow-y3", lambda x: ops.integer_pow(x, 3), lambda x: x * x * x, [normal(3, 4)]),
    Case("integer_pow-y-2", lambda x: ops.integer_pow(x, -2), lambda x: 1.0 / (x * x),
         [away_from_zero(3, 4)]),
    Case("integer_pow-i32-y3", lambda x: ops.integer_pow(x, 3), lambda x: x * x * x,
         [ints(5, lo=-5, hi=6)]),
    # ---- binary ----
    Case("add", ops.add, lambda x, y: x + y, [normal(3, 4), normal(3, 4)],
         linear=[(T, T)]),
    Case("add-scalar", ops.add, lambda x, y: x + y, [normal(3, 4), normal()], linear=[(T, T)]),
    Case("add-size1-dims", ops.add, lambda x, y: x + y, [normal(3, 1), normal(1, 4)], linear=[(T, T)]),
    Case("sub", ops.sub, lambda x, y: x - y, [normal(3, 4), normal(3, 4)], linear=[(T, T)]),
    Case("sub-size1-dims", ops.sub, lambda x, y: x - y, [normal(1, 4), normal(3, 1)], linear=[(T, T)]),
    Case("sub-scalar", ops.sub, lambda x, y: x - y, [normal(), normal(2, 3)], linear=[(T, T)]),
    Case("mul", ops.mul, lambda x, y: x * y, [normal(3, 4), normal(3, 4)], linear=[(T, Fa), (Fa, T)]),
    Case("mul-size1-dims", ops.mul, lambda x, y: x * y, [normal(3, 1), normal(1, 4)],
         linear=[(T, Fa), (Fa, T)]),
    Case("mul-scalar", ops.mul, lambda x, y: x * y, [normal(), normal(2, 3)], linear=[(T, Fa), (Fa, T)]),
    Case("mul-python-literal", lambda x: x * 2.5, lambda x: 2.5 * x, [normal(3)], linear=[(T,)]),
    Case("div", ops.div, lambda x, y: x / y, [normal(3, 4), away_from_zero(3, 4)], linear=[(T, Fa)]),
    Case("div-size1-dims", ops.div, lambda x, y: x / y, [normal(3, 1), away_from_zero(1, 4)],
         linear=[(T, Fa)]),
    Case("div-scalar-divisor", ops.div, lambda x, y: x / y, [normal(2, 3), away_from_zero()],
         linear=[(T, Fa)]),
    Case("div-i32-truncates", ops.div, lambda x, y: (np.sign(x) * np.sign(y) * (np.abs(x) // np.abs(y))).astype(np.int32),
         [ints(6, lo=-9, hi=10), lambda rng: np.array([2, -3, 4, -2, 3, 5], np.int32)]),
    Case("max", ops.max, lambda x, y: np.where(x > y, x, y), [grid(3, 4), grid(3, 4, offset=0.25)]),
    Case("max-size1-dims", ops.max, lambda x, y: np.where(x > y, x, y), [grid(3, 1), grid(1, 4, offset=0.25)]),
    Case("min", ops.min, lambda x, y: np.where(x < y, x, y), [grid(3, 4), grid(3, 4, offset=0.25)]),
    Case("min-scalar", ops.min, lambda x, y: np.where(x < y, x, y), [grid(3, 4), grid(offset=0.25)]),
    # ---- comparisons (bool results, exact) ----
    Case("gt", ops.gt, lambda x, y: x > y, [halves(4, 5), halves(4, 5)]),
    Case("lt", ops.lt, lambda x, y: x < y, [halves(4, 5), halves(4, 5)]),
    Case("ge", ops.ge, lambda x, y: x >= y, [halves(4, 5), halves(4, 5)]),
    Case("le", ops.le, lambda x, y: x <= y, [halves(4, 5), halves(4, 5)]),
    Case("eq", ops.eq, lambda x, y: x == y, [halves(4, 5), halves(4, 5)]),
    Case("ne", ops.ne, lambda x, y: x != y, [halves(4, 5), halves(4, 5)]),
    Case("gt-scalar", ops.gt, lambda x, y: x > y, [halves(4, 5), halves()]),
    Case("eq-i32", ops.eq, lambda x, y: x == y, [ints(8), ints(8)]),
    # ---- select_n ----
    Case("select_n-bool", ops.select_n, lambda p, a, b: np.where(p, b, a),
         [bools(3, 4), normal(3, 4), normal(3, 4)], linear=[(Fa, T, T)]),
    Case("select_n-bool-scalar-pred", ops.select_n, lambda p, a, b: b if p else a,
         [lambda rng: np.array(True), normal(3, 4), normal(3, 4)], linear=[(Fa, T, T)]),
    Case("select_n-i32", ops.select_n,
         lambda w, a, b, c: np.where(w == 0, a, np.where(w == 1, b, c)),
         [ints(3, 4), normal(3, 4), normal(3, 4), normal(3, 4)], linear=[(Fa, T, T, T)]),
    # ---- dot_general ----
    Case("dot_general-matmul", dg(MATMUL), lambda x, y: x @ y, [normal(3, 4), normal(4, 5)],
         linear=[(T, Fa), (Fa, T)], cond=4, abs_scale=True),
    Case("dot_general-vector", dg((((0,), (0,)), ((), ()))), lambda x, y: np.sum(x * y),
         [normal(6), normal(6)], linear=[(T, Fa), (Fa, T)], cond=6, abs_scale=True),
    Case("dot_general-batch", dg(BATCH_0), lambda x, y: np.einsum("bij,bjk->bik", x, y),
         [normal(2, 3, 4), normal(2, 4, 5)], linear=[(T, Fa), (Fa, T)], cond=4, abs_scale=True),
    Case("dot_general-batch-middle", dg(BATCH_MID), lambda x, y: np.einsum("ibj,jbk->bik", x, y),
         [normal(3, 2, 4), normal(4, 2, 5)], linear=[(T, Fa), (Fa, T)], cond=4, abs_scale=True),
    Case("dot_general-contract-2-dims", dg(CONTRACT_2), lambda x, y: np.einsum("ijk,kjl->il", x, y),
         [normal(3, 4, 2), normal(2, 4, 5)], linear=[(T, Fa), (Fa, T)], cond=8, abs_scale=True),
    Case("dot_general-preferred-f64", dg(MATMUL, np.float64), lambda x, y: x @ y,
         [normal(3, 4), normal(4, 5)], fixed={0: np.float32, 1: np.float32},
         linear=[(T, Fa), (Fa, T)], cond=4, abs_scale=True),
    Case("dot_general-i32-preferred-f32", dg(MATMUL, np.float32), lambda x, y: (x @ y).astype(np.float64),
         [ints(3, 4, lo=-3, hi=4), ints(4, 2, lo=-3, hi=4)]),
    # mixed operand dtypes, as jnp.dot(bool_mask, w) and int_ids @ w bind them (lax._dot_general_dtype_rule)
    Case("dot_general-bool-by-float", dg(MATMUL, np.float32), lambda x, y: x.astype(np.float64) @ y,
         [bools(3, 4), normal(4, 5)], linear=[(Fa, T)], cond=4, abs_scale=True),
    Case("dot_general-float-by-i32", dg(BATCH_0), lambda x, y: np.einsum("bij,bjk->bik", x, y.astype(np.float64)),
         [normal(2, 3, 4), ints(2, 4, 5, lo=-3, hi=4)], linear=[(T, Fa)], cond=4, abs_scale=True),
    # ---- reductions ----
    Case("reduce_sum-axis0", lambda x: ops.reduce_sum(x, (0,)), lambda x: x.sum(0),
         [normal(3, 4)], linear=[(T,)], cond=3, abs_scale=True),
    Case("reduce_sum-axes02", lambda x: ops.reduce_sum(x, (0, 2)), lambda x: x.sum((0, 2)),
         [normal(2, 3, 4)], linear=[(T,)], cond=8, abs_scale=True),
    Case("reduce_sum-all", lambda x: ops.reduce_sum(x, (0, 1)), lambda x: x.sum(),
         [normal(3, 4)], linear=[(T,)], cond=12, abs_scale=True),
    Case("reduce_max-axis1", lambda x: ops.reduce_max(x, (1,)), lambda x: x.max(1), [distinct(3, 4)]),
    Case("reduce_max-all", lambda x: ops.reduce_max(x, (0, 1)), lambda x: x.max(), [distinct(3, 4)]),
    # ---- structural ----
    Case("broadcast_in_dim-new-leading", lambda x: ops.broadcast_in_dim(x, (2, 3), (1,)),
         lambda x: np.stack([x, x]), [normal(3)], linear=[(T,)]),
    Case("broadcast_in_dim-new-trailing", lambda x: ops.broadcast_in_dim(x, (3, 2, 4), (0,)),
         lambda x: np.repeat(np.repeat(x[:, None, None], 2, 1), 4, 2), [normal(3)], linear=[(T,)]),
    Case("broadcast_in_dim-size1", lambda x: ops.broadcast_in_dim(x, (3, 4), (0, 1)),
         lambda x: np.repeat(x, 4, axis=1), [normal(3, 1)], linear=[(T,)]),
    Case("broadcast_in_dim-scalar", lambda x: ops.broadcast_in_dim(x, (2, 3), ()),
         lambda x: np.full((2, 3), x), [normal()], linear=[(T,)]),
    Case("reshape", lambda x: ops.reshape(x, (6, 4)), lambda x: x.reshape(6, 4),
         [normal(2, 3, 4)], linear=[(T,)]),
    Case("reshape-to-scalar", lambda x: ops.reshape(x, ()), lambda x: x.reshape(()),
         [normal(1, 1)], linear=[(T,)]),
    Case("transpose", lambda x: ops.transpose(x, (2, 0, 1)),
         lambda x: np.einsum("abc->cab", x), [normal(2, 3, 4)], linear=[(T,)]),
    Case("transpose-2d", lambda x: ops.transpose(x, (1, 0)), lambda x: x.T, [normal(3, 5)], linear=[(T,)]),
    Case("squeeze", lambda x: ops.squeeze(x, (1, 2)), lambda x: x[:, 0, 0], [normal(3, 1, 1)], linear=[(T,)]),
    Case("squeeze-leading", lambda x: ops.squeeze(x, (0,)), lambda x: x[0], [normal(1, 4)], linear=[(T,)]),
    Case("concatenate-dim0", lambda x, y: ops.concatenate([x, y], 0), lambda x, y: np.vstack([x, y]),
         [normal(2, 3), normal(4, 3)], linear=[(T, T)]),
    Case("concatenate-dim1-three", lambda x, y, z: ops.concatenate([x, y, z], 1),
         lambda x, y, z: np.hstack([x, y, z]), [normal(2, 1), normal(2, 3), normal(2, 2)],
         linear=[(T, T, T)]),
    Case("slice", lambda x: ops.slice(x, (1, 0), (4, 6)), lambda x: x[1:4, 0:6],
         [normal(5, 6)], linear=[(T,)]),
    Case("slice-strided", lambda x: ops.slice(x, (0, 1), (5, 6), (2, 3)), lambda x: x[0:5:2, 1:6:3],
         [normal(5, 6)], linear=[(T,)]),
    Case("slice-strided-unaligned", lambda x: ops.slice(x, (1, 2), (6, 7), (2, 2)),
         lambda x: x[1:6:2, 2:7:2], [normal(7, 8)], linear=[(T,)]),
    Case("pad", lambda x, v: ops.pad(x, v, PAD_CFG), lambda x, v: ref_pad(x, v, PAD_CFG),
         [normal(3, 4), normal()], linear=[(T, T)]),
    Case("pad-crop-interior", lambda x, v: ops.pad(x, v, PAD_CROP), lambda x, v: ref_pad(x, v, PAD_CROP),
         [normal(3, 4), normal()], linear=[(T, T)]),
    Case("pad-zero-literal", lambda x: ops.pad(x, lit(x, 0), PAD_CFG), lambda x: ref_pad(x, 0.0, PAD_CFG),
         [normal(3, 4)], linear=[(T,)]),
    # ---- conversion, stop_gradient ----
    Case("convert-f64", lambda x: ops.convert_element_type(x, np.float64), lambda x: x.astype(np.float64),
         [normal(3, 4)], linear=[(T,)]),
    Case("convert-from-f32-to-f64", lambda x: ops.convert_element_type(x, np.float64),
         lambda x: x.astype(np.float64), [normal(3, 4)], fixed={0: np.float32}, linear=[(T,)]),
    Case("convert-to-f32", lambda x: ops.convert_element_type(x, np.float32),
         lambda x: x.astype(np.float64), [normal(3, 4)]),
    Case("convert-to-i32", lambda x: ops.convert_element_type(x, np.int32),
         lambda x: np.trunc(x).astype(np.int32), [lambda rng: rng.uniform(-5, 5, size=(3, 4))]),
    Case("convert-i32-to-f64", lambda x: ops.convert_element_type(x, np.float64),
         lambda x: x.astype(np.float64), [ints(3, 4, lo=-100, hi=100)]),
    Case("convert-to-bool", lambda x: ops.convert_element_type(x, np.bool_), lambda x: x != 0,
         [halves(3, 4)]),
    Case("stop_gradient", ops.stop_gradient, lambda x: x, [normal(3, 4)], tangent="zero"),
    # ---- call ----
    Case("call", call_sin_mul, lambda x, y: np.sin(x) * y, [normal(3), normal(3)]),
    Case("call-two-outputs", call_two_outputs,
         lambda x, y: (tanh_ref(x) + y, np.sum(x * y, axis=0)), [normal(3, 2), normal(3, 2)], cond=3),
    Case("call-linear", call_linear, lambda x, y: (2.0 * x - y, y.sum(1)),
         [normal(2, 3), normal(2, 3)], linear=[(T, T)], cond=3),
    Case("call-linear-in-first", call_linear_in_first, lambda x, y: x * y,
         [normal(4), normal(4)], linear=[(T, Fa)]),
]

assert len({c.id for c in CASES}) == len(CASES)


def ids(cases):
    return [c.id for c in cases]


# ==========================================================================
# (a) evaluation in float32 against numpy

@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_eval_f32_matches_numpy(case):
    rng = np.random.default_rng(0)
    vals = case.make(rng, np.float32)
    prog = case.program(vals)
    spec.check_program(prog)
    got = spec.evaluate(prog, *vals)
    # the reference sees the same values, exactly, in float64
    exact = [v.astype(np.float64) if is_float(v.dtype) else v for v in vals]
    want = as_list(case.ref(*exact))
    scales = ([float(np.max(np.abs(s))) for s in as_list(case.ref(*[np.abs(v) for v in exact]))]
              if case.abs_scale else [None] * len(want))
    assert len(got) == len(want)
    for g, w, t, s in zip(got, want, prog.out_types, scales):
        assert g.dtype == t.dtype and g.shape == t.shape
        assert_eval_close(g, np.asarray(w).astype(g.dtype) if not is_float(g.dtype) else w,
                          g.dtype, cond=case.cond, scale=s)


# ==========================================================================
# (b) JVP against float64 central finite differences

@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_jvp_matches_finite_differences(case):
    rng = np.random.default_rng(1)
    vals = case.make(rng, np.float64)
    prog = case.program(vals)
    jp = spec.jvp(prog)
    spec.check_program(jp)
    float_idx = [i for i, v in enumerate(vals) if is_float(v.dtype)]
    ts = [rng.normal(size=vals[i].shape).astype(vals[i].dtype) for i in float_idx]
    assert jp.in_types == prog.in_types + [prog.in_types[i] for i in float_idx]
    outs = spec.evaluate(jp, *vals, *ts)
    n = len(prog.outputs)
    primals, tangents = outs[:n], outs[n:]
    float_outs = [t for t in prog.out_types if is_float(t.dtype)]
    assert [ArrayType(t.shape, t.dtype) for t in tangents] == float_outs

    exact = [v.astype(np.float64) if is_float(v.dtype) else v for v in vals]
    for p, w in zip(primals, as_list(case.ref(*exact))):
        assert_fd_close(p, w) if is_float(p.dtype) else np.testing.assert_array_equal(p, w)

    if case.tangent == "zero":
        want = [np.zeros(t.shape) for t in float_outs]
    elif not float_idx:       # no float input: tangents are (instantiated) zeros
        want = [np.zeros(t.shape) for t in float_outs]
    else:
        fd = fd_jvp(case.ref, exact, [t.astype(np.float64) for t in ts], float_idx)
        want = [d for d, t in zip(fd, prog.out_types) if is_float(t.dtype)]
    for g, w in zip(tangents, want):
        assert_fd_close(g, w)


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
# (c) transpose: the dot-product identity <ybar, J t> == <J^T ybar, t>

TRANSPOSE_CASES = [(c, mask) for c in CASES for mask in c.linear]
TRANSPOSE_IDS = [f"{c.id}-{''.join('L' if m else 'n' for m in mask)}" for c, mask in TRANSPOSE_CASES]


@pytest.mark.parametrize("case,mask", TRANSPOSE_CASES, ids=TRANSPOSE_IDS)
def test_transpose_dot_product_identity(case, mask):
    rng = np.random.default_rng(2)
    vals = case.make(rng, np.float64)
    prog = case.program(vals)
    # linear inputs get random directions t (the nonlinear ones keep their values)
    for i, lin in enumerate(mask):
        if lin:
            vals[i] = rng.normal(size=vals[i].shape).astype(vals[i].dtype)
    tp = spec.transpose(prog, mask)
    spec.check_program(tp)
    jt = spec.evaluate(prog, *vals)
    ybar = [rng.normal(size=t.shape).astype(t.dtype) for t in prog.out_types]
    nonlin = [v for v, lin in zip(vals, mask) if not lin]
    tbar = spec.evaluate(tp, *nonlin, *ybar)
    lin_vals = [v for v, lin in zip(vals, mask) if lin]
    assert [ArrayType(b.shape, b.dtype) for b in tbar] == [ArrayType(v.shape, v.dtype) for v in lin_vals]

    def inner(a, b):
        prods = [np.asarray(x, np.float64) * np.asarray(y, np.float64) for x, y in zip(a, b)]
        return sum(float(p.sum()) for p in prods), sum(float(np.abs(p).sum()) for p in prods)
    lhs, lhs_abs = inner(ybar, jt)
    rhs, rhs_abs = inner(tbar, lin_vals)
    dtypes = [v.dtype for v in vals + jt if is_float(v.dtype)]
    eps = max(float(np.finfo(d).eps) for d in dtypes)
    assert abs(lhs - rhs) <= TRANSPOSE_EPS_FACTOR * eps * (lhs_abs + rhs_abs), (lhs, rhs)


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
# (d) VJP == transposed JVP == finite-difference gradient, on composites

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
# (e) bad input: PrimitiveError naming the primitive

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
