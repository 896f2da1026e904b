"""Unit tests of the `scan` primitive (spec/prims_scan.py, JAX's lax.scan).

Expected values come from sources independent of the rules under test:

* a plain numpy loop (`np_scan`) running the *same* body written against
  numpy (every body here takes a namespace `m`: `NP` for numpy, `SP` for
  the spec's ops), in float64;
* float64 central finite differences of that numpy loop;
* the adjoint identity <ct, L t> = <L^T ct, t>, with L t from the numpy loop;
* for vmap, a Python loop of the unbatched program over the batch
  (test_batching's `loop_reference`);
* for residuals, the fates JAX records for scan (stacked / hoisted /
  forwarded / closed_call; tests/recordings/residuals_scan.json), asserted
  structurally here (the recorded test checks the exact lists).

No jax import.
"""
from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
import pytest

import spec
from spec import ops, policies as P
from spec.core import bind
from spec.ir import ArrayType
from spec.prims_scan import scan_p

from test_batching import B, LOOP_TOL_F64, assert_f64_close, loop_reference

L, D = 4, 3       # scan length and feature size used throughout

# ==========================================================================
# tolerances (justified once)

# Evaluation in float64 against the numpy float64 loop: the same operations
# on the same values, possibly another summation order in the 3-term dots,
# over <= 5 iterations of contracting bodies (|w| entries <= 0.3, so the
# row sums of |w| are < 1 and tanh/sin/cos have slope <= 1): ~1e-15
# relative. 1e-12 leaves margin; a wrong iteration order or wrong slice is
# off by O(1).
EVAL_TOL_F64 = 1e-12
# Evaluation in float32 against the float64 loop on the same (exactly
# representable) inputs: each iteration rounds ~10 times (eps32 = 6e-8)
# and, the bodies being contracting, earlier errors do not grow, so after
# <= 5 iterations the error is <= ~50 * 6e-8 = 3e-6 of the O(1) values.
EVAL_TOL_F32 = 1e-5
# Finite differences (float64, central, step 1e-6 on O(1) inputs):
# truncation h^2/6 |f'''| ~ 1e-12 |f'''|, rounding eps64 |f| / h ~ 2e-10
# |f|; for these smooth bodies of O(1) values over <= 5 iterations (|f|,
# |f'''| <= ~1e2) both are < 1e-7. 1e-6 (atol at the scale max(1,
# |derivative|)) has margin, while a wrong rule is off by O(1).
FD_STEP = 1e-6
FD_TOL = 1e-6
# Adjoint identity: each side is a sum of ~50 products of O(1) float64
# values computed through <= 5 iterations: ~1e-14 of sum|terms|; 1e-11
# relative to that scale leaves margin.
ADJOINT_TOL = 1e-11


# ==========================================================================
# helpers

NP = SimpleNamespace(
    sin=np.sin, cos=np.cos, tanh=np.tanh, exp=np.exp,
    name=lambda x, n: x,
    sum=lambda x: np.sum(x),
    to_float=lambda k, like: np.asarray(k, np.float64),
)
SP = SimpleNamespace(
    sin=ops.sin, cos=ops.cos, tanh=ops.tanh, exp=ops.exp,
    name=ops.checkpoint_name,
    sum=lambda x: ops.reduce_sum(x, tuple(range(len(x.shape)))),
    to_float=lambda k, like: ops.convert_element_type(k, like.dtype),
)


def flatten(v):
    """A scan's (carry, ys) (nested tuples/lists, None for nothing) as a flat list."""
    if v is None:
        return []
    if isinstance(v, (tuple, list)):
        return [a for x in v for a in flatten(x)]
    return [v]


def trace(fn, *types):
    """spec.trace of fn, its nested outputs flattened."""
    return spec.trace(lambda *a: flatten(fn(*a)), *types)


def np_scan(body, init, xs, consts=(), length=None, reverse=False):
    """lax.scan as a plain Python loop over numpy values (the reference).
    Returns (final carry, ys stacked like the body's y)."""
    xs_l = [] if xs is None else list(xs) if isinstance(xs, (tuple, list)) else [xs]
    if length is None:
        length = xs_l[0].shape[0]
    carry, ys = init, [None] * length
    for i in (reversed(range(length)) if reverse else range(length)):
        x = None if xs is None else tuple(a[i] for a in xs) if isinstance(xs, (tuple, list)) else xs[i]
        carry, ys[i] = body(carry, x, *consts)
    y0 = ys[0]
    if isinstance(y0, (tuple, list)):
        stacked = tuple(np.stack([y[k] for y in ys]) for k in range(len(y0)))
    else:
        stacked = None if y0 is None else np.stack(ys)
    return carry, stacked


def assert_close(got, want, tol):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.max(np.abs(want.astype(np.float64)), initial=0.0)))
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol * scale)


def fd_directional(f, xs, ts):
    """Central difference of every output of numpy f (flat list) along ts
    (None: that input is held fixed, e.g. an integer)."""
    def at(sign):
        return [np.asarray(o, np.float64) for o in
                f(*[x if t is None else x + sign * FD_STEP * t for x, t in zip(xs, ts)])]
    return [(u - d) / (2 * FD_STEP) for u, d in zip(at(+1), at(-1))]


def fd_gradient(f, xs, wrt):
    """Central-difference gradient of scalar numpy f w.r.t. the inputs in wrt."""
    out = []
    for i in wrt:
        g = np.zeros_like(xs[i], dtype=np.float64)
        for idx in np.ndindex(xs[i].shape):
            up, dn = [np.array(a, copy=True) for a in xs], [np.array(a, copy=True) for a in xs]
            up[i][idx] += FD_STEP
            dn[i][idx] -= FD_STEP
            g[idx] = (float(f(*up)) - float(f(*dn))) / (2 * FD_STEP)
        out.append(g)
    return out


def scan_eqns(prog):
    """The scan equations of prog (top level, then inside call/remat bodies)."""
    from spec.ir import subprograms
    found = []

    def walk(p):
        for e in p.eqns:
            if e.primitive is scan_p:
                found.append(e)
            for _, sub in subprograms(e.params):
                walk(sub)
    walk(prog)
    return found


def small_w(rng, *shape):
    """Contracting weights: |entries| <= 0.3, so a row sum of |w| < 1 for D = 3."""
    return rng.uniform(-0.3, 0.3, size=shape)


# --- bodies, written once against a namespace m (NP or SP)

def cell(m, c, x, w):
    h = m.sin(c @ w + x)
    return h, m.cos(h)


def named_cell(m, c, x, w):
    h = m.name(m.sin(c @ w + x), "h")
    return h, m.cos(h)


def invariant_cell(m, c, x, w):
    """sin(w) is loop-invariant: computed from the const alone."""
    h = m.sin(c @ m.sin(w) + x)
    return h, m.cos(h)


def multi_cell(m, c, x, w, b):
    """Three carries (two float, one int32 counter), two consts, two ys; the
    counter feeds a float y."""
    h, g, k = c
    h2 = m.tanh(h @ w + x * g)
    g2 = g * m.cos(h) + b
    return (h2, g2, k + 1), (h2 * g2, m.sin(x) * m.to_float(k, x))


def multi_fn(m, reverse=False):
    def f(h, g, k, xs, w, b):
        return m_scan(m, functools.partial(multi_cell, m), (h, g, k), xs, consts=(w, b), reverse=reverse)
    return f


def m_scan(m, body, init, xs, **kw):
    return (np_scan if m is NP else spec.scan)(body, init, xs, **kw)


def multi_types(dt):
    return (ArrayType((D,), dt), ArrayType((D,), dt), spec.i32[()], ArrayType((L, D), dt),
            ArrayType((D, D), dt), ArrayType((D,), dt))


def multi_args(rng, dt=np.float64):
    return [rng.normal(size=D).astype(dt), rng.normal(size=D).astype(dt) * 0.5, np.int32(3),
            rng.normal(size=(L, D)).astype(dt), small_w(rng, D, D).astype(dt),
            rng.normal(size=D).astype(dt) * 0.3]


def np_flat(f):
    return lambda *a: [np.asarray(v) for v in flatten(f(*a))]


# ==========================================================================
# 1. evaluation == the numpy loop

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reverse", [False, True])
def test_eval_multi_carry_int_carry_consts(reverse, dtype):
    prog = trace(multi_fn(SP, reverse), *multi_types(dtype))
    spec.check_program(prog)
    args = multi_args(np.random.default_rng(0), dtype)
    got = spec.evaluate(prog, *args)
    want = np_flat(multi_fn(NP, reverse))(*[np.asarray(a, np.float64) if a.dtype.kind == "f" else a
                                            for a in args])
    assert [np.asarray(g).dtype for g in got] == [dtype, dtype, np.int32, dtype, dtype]
    assert [np.shape(g) for g in got] == [(D,), (D,), (), (L, D), (L, D)]
    np.testing.assert_array_equal(got[2], 3 + L)       # the int counter, exact
    tol = EVAL_TOL_F32 if dtype == np.float32 else EVAL_TOL_F64
    for g, w in zip(got, want):
        assert_close(g, w, tol)


def test_eval_reverse_visits_xs_backwards():
    """With reverse=True the first iteration reads xs[-1] and ys[i] is
    written at the position of xs[i]: a running sum shows both."""
    prog = trace(lambda c, xs: spec.scan(lambda c, x: (c + x, c + x), c, xs, reverse=True),
                 spec.f64[()], spec.f64[5])
    xs = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    c, ys = spec.evaluate(prog, np.float64(0.0), xs)
    np.testing.assert_array_equal(ys, np.cumsum(xs[::-1])[::-1])
    assert c == 31.0
    prog_f = trace(lambda c, xs: spec.scan(lambda c, x: (c + x, c + x), c, xs), spec.f64[()], spec.f64[5])
    np.testing.assert_array_equal(spec.evaluate(prog_f, np.float64(0.0), xs)[1], np.cumsum(xs))


@pytest.mark.parametrize("reverse", [False, True])
def test_eval_no_xs_with_length_and_consts(reverse):
    def f(m):
        return lambda h, w: m_scan(m, lambda c, x, w: (m.sin(c @ w), m.cos(c) * 2.0), h, None,
                                   consts=(w,), length=5, reverse=reverse)
    prog = trace(f(SP), spec.f64[D], spec.f64[D, D])
    rng = np.random.default_rng(1)
    h, w = rng.normal(size=D), small_w(rng, D, D)
    got = spec.evaluate(prog, h, w)
    assert [g.shape for g in got] == [(D,), (5, D)]
    for g, want in zip(got, np_flat(f(NP))(h, w)):
        assert_close(g, want, EVAL_TOL_F64)


def test_eval_several_xs_and_ys_and_no_ys():
    def f(m):
        return lambda c, xs, zs: m_scan(m, lambda c, x: (c * x[0] + x[1], (m.exp(x[1]), c)), c, (xs, zs))
    prog = trace(f(SP), spec.f64[D], spec.f64[L, D], spec.f64[L, D])
    rng = np.random.default_rng(2)
    args = [rng.normal(size=D), rng.uniform(-1, 1, (L, D)), rng.normal(size=(L, D))]
    for g, want in zip(spec.evaluate(prog, *args), np_flat(f(NP))(*args)):
        assert_close(g, want, EVAL_TOL_F64)
    # a body with no y (None): the scan returns only the carry
    prog = trace(lambda c, xs: spec.scan(lambda c, x: (c * 0.5 + x, None), c, xs), spec.f64[D], spec.f64[L, D])
    assert len(prog.outputs) == 1
    (c,) = spec.evaluate(prog, args[0], args[1])
    assert_close(c, np_scan(lambda c, x: (c * 0.5 + x, None), args[0], args[1])[0], EVAL_TOL_F64)


def test_eval_unroll_changes_nothing():
    rng = np.random.default_rng(3)
    args = [rng.normal(size=D), rng.normal(size=(L, D)), small_w(rng, D, D)]
    outs = []
    for unroll in (1, 2, L):
        prog = trace(lambda h, xs, w: spec.scan(functools.partial(cell, SP), h, xs, consts=(w,), unroll=unroll),
                     spec.f64[D], spec.f64[L, D], spec.f64[D, D])
        assert scan_eqns(prog)[0].params["unroll"] == unroll
        outs.append(spec.evaluate(prog, *args))
    for o in outs[1:]:
        for a, b in zip(o, outs[0]):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("reverse", [False, True])
def test_eval_length_zero_returns_init_and_empty_ys(reverse):
    body = lambda c, x: ((c[0] * x, c[1] + 1), ops.sin(c[0]))
    prog = trace(lambda c, k, xs: spec.scan(body, (c, k), xs, reverse=reverse),
                 spec.f32[D], spec.i32[()], spec.f32[0, D])
    spec.check_program(prog)
    assert prog.out_types == [spec.f32[D], spec.i32[()], spec.f32[0, D]]
    c0 = np.array([1.0, -2.0, 3.0], np.float32)
    c, k, ys = spec.evaluate(prog, c0, np.int32(7), np.zeros((0, D), np.float32))
    np.testing.assert_array_equal(c, c0)
    assert k == 7 and k.dtype == np.int32
    assert ys.shape == (0, D) and ys.dtype == np.float32
    # no xs, length=0
    prog = trace(lambda c: spec.scan(lambda c, x: (c * 2.0, ops.sin(c)), c, None, length=0), spec.f32[D])
    c, ys = spec.evaluate(prog, c0)
    np.testing.assert_array_equal(c, c0)
    assert ys.shape == (0, D) and ys.dtype == np.float32


@pytest.mark.parametrize("reverse", [False, True])
def test_eval_length_one(reverse):
    rng = np.random.default_rng(4)
    h, xs, w = rng.normal(size=D), rng.normal(size=(1, D)), small_w(rng, D, D)
    prog = trace(lambda h, xs, w: spec.scan(functools.partial(cell, SP), h, xs, consts=(w,), reverse=reverse),
                 spec.f64[D], spec.f64[1, D], spec.f64[D, D])
    c, ys = spec.evaluate(prog, h, xs, w)
    want = np.sin(h @ w + xs[0])
    assert_close(c, want, EVAL_TOL_F64)
    assert_close(ys, np.cos(want)[None], EVAL_TOL_F64)


def test_grad_of_length_zero_scan():
    """d/dc of sum(scan of length 0) is the identity on the carry (and the
    const gets a zero cotangent)."""
    prog = spec.trace(lambda c, w: SP.sum(flatten(spec.scan(lambda c, x, w: (ops.sin(c * w), c), c, None,
                                                            consts=(w,), length=0))[0]),
                      spec.f64[D], spec.f64[D])
    gc, gw = spec.evaluate(spec.grad(prog, argnums=(0, 1)), np.ones(D), np.ones(D))
    np.testing.assert_array_equal(gc, np.ones(D))
    np.testing.assert_array_equal(gw, np.zeros(D))


# ==========================================================================
# 2. JVP == finite differences

@pytest.mark.parametrize("reverse", [False, True])
def test_jvp_multi_carry_with_int_carry(reverse):
    prog = trace(multi_fn(SP, reverse), *multi_types(np.float64))
    jp = spec.jvp(prog)
    spec.check_program(jp)
    rng = np.random.default_rng(5)
    args = multi_args(rng)
    ts = [rng.normal(size=np.shape(a)) if np.asarray(a).dtype.kind == "f" else None for a in args]
    outs = spec.evaluate(jp, *args, *[t for t in ts if t is not None])
    ref = np_flat(multi_fn(NP, reverse))
    primal = ref(*args)
    # primal outputs (h, g, k, y1, y2), then tangents of the float ones
    assert len(outs) == 5 + 4
    for g, w in zip(outs[:5], primal):
        assert_close(g, w, EVAL_TOL_F64)
    float_idx = [0, 1, 3, 4]
    want_t = fd_directional(ref, args, ts)
    for g, i in zip(outs[5:], float_idx):
        assert_close(g, want_t[i], FD_TOL)


def chain_cell(m, c, x):
    """a -> b -> d: only a's init tangent is nonzero, b's tangent becomes
    nonzero after one iteration, d's after two (the carry fixpoint needs
    two rounds); e never depends on the inputs with a tangent."""
    a, b, d, e = c
    return (m.sin(a) + x, b * m.cos(a), d + m.tanh(b), e * 2.0), d


def chain_fn(m):
    return lambda a, b, d, e, xs: m_scan(m, functools.partial(chain_cell, m), (a, b, d, e), xs)


def test_jvp_carry_fixpoint_tangent_zero_at_init():
    prog = trace(chain_fn(SP), spec.f64[D], spec.f64[D], spec.f64[D], spec.f64[D], spec.f64[L, D])
    # only a's tangent is an input: b, d, e start with symbolic-zero tangents
    jp, out_nz = spec.jvp_program(prog, nonzeros=[True, False, False, False, False], instantiate_zeros=False)
    spec.check_program(jp)
    assert out_nz == [True, True, True, False, True]     # a, b, d carries; e stays zero; ys (= d)
    (eqn,) = scan_eqns(jp)
    assert eqn.params["num_carry"] == 4 + 3               # primal carries + tangents of a, b, d
    rng = np.random.default_rng(6)
    args = [rng.normal(size=D) for _ in range(4)] + [rng.normal(size=(L, D))]
    ta = rng.normal(size=D)
    outs = spec.evaluate(jp, *args, ta)
    want = fd_directional(np_flat(chain_fn(NP)), args, [ta, None, None, None, None])
    for g, i in zip(outs[5:], [0, 1, 2, 4]):
        assert_close(g, want[i], FD_TOL)
    assert np.max(np.abs(want[2])) > 1e-3     # d's tangent really became nonzero
    # with every tangent: the same values as the full JVP by finite differences
    jp_all = spec.jvp(prog)
    ts = [ta] + [rng.normal(size=D) for _ in range(3)] + [rng.normal(size=(L, D))]
    outs = spec.evaluate(jp_all, *args, *ts)
    want = fd_directional(np_flat(chain_fn(NP)), args, ts)
    for g, w in zip(outs[5:], want):
        assert_close(g, w, FD_TOL)


def test_jvp_only_const_tangent_makes_carry_tangent_nonzero():
    """Only the const w has a tangent: the carry's tangent (zero at init)
    is nonzero after one iteration."""
    f = lambda m: (lambda h, xs, w: m_scan(m, functools.partial(cell, m), h, xs, consts=(w,)))
    prog = trace(f(SP), spec.f64[D], spec.f64[L, D], spec.f64[D, D])
    jp, out_nz = spec.jvp_program(prog, nonzeros=[False, False, True], instantiate_zeros=False)
    assert out_nz == [True, True]
    rng = np.random.default_rng(7)
    args = [rng.normal(size=D), rng.normal(size=(L, D)), small_w(rng, D, D)]
    tw = rng.normal(size=(D, D))
    outs = spec.evaluate(jp, *args, tw)
    for g, w in zip(outs[2:], fd_directional(np_flat(f(NP)), args, [None, None, tw])):
        assert_close(g, w, FD_TOL)


# ==========================================================================
# 3. reverse mode (grad / vjp) == finite differences

def _body(kind, policy, ckpt_body):
    cellf = {"plain": cell, "named": named_cell, "invariant": invariant_cell}[kind]
    if not ckpt_body:
        return functools.partial(cellf, SP)
    return lambda c, x, w: ops.checkpoint(lambda c, x, w: cellf(SP, c, x, w), policy=policy)(c, x, w)


def loss_fn(m, kind, policy=None, where="none", reverse=False, sin_ys=True):
    """sum(final carry) + sum(sin(ys)) of scan(cell) over xs with const w
    (sum(ys) without sin_ys, as the recorded JAX programs do).
    where: "none", "body" (checkpoint the body), "around" (checkpoint the scan)."""
    if m is NP:
        cellf = {"plain": cell, "named": named_cell, "invariant": invariant_cell}[kind]

        def f(h, xs, w):
            c, ys = np_scan(functools.partial(cellf, NP), h, xs, consts=(w,), reverse=reverse)
            return np.sum(c) + np.sum(np.sin(ys) if sin_ys else ys)
        return f
    body = _body(kind, policy, where == "body")

    def run(h, xs, w):
        return tuple(spec.scan(body, h, xs, consts=(w,), reverse=reverse))

    def f(h, xs, w):
        if where == "around":
            c, ys = ops.checkpoint(run, policy=policy)(h, xs, w)
        else:
            c, ys = run(h, xs, w)
        return SP.sum(c) + SP.sum(ops.sin(ys) if sin_ys else ys)
    return f


GRAD_VARIANTS = {
    # id: (kind, policy, where, reverse)
    "plain": ("plain", None, "none", False),
    "plain-reverse": ("plain", None, "none", True),
    "invariant": ("invariant", None, "none", False),
    "body-none": ("plain", None, "body", False),
    "body-nothing_saveable": ("plain", P.nothing_saveable, "body", False),
    "body-everything_saveable": ("plain", P.everything_saveable, "body", False),
    "body-dots_saveable": ("plain", P.dots_saveable, "body", False),
    "body-save_only_h": ("named", P.save_only_these_names("h"), "body", False),
    "body-save_only_h-reverse": ("named", P.save_only_these_names("h"), "body", True),
    "body-dots_saveable-reverse": ("plain", P.dots_saveable, "body", True),
    "body-invariant-everything_saveable": ("invariant", P.everything_saveable, "body", False),
    "body-invariant-dots_saveable": ("invariant", P.dots_saveable, "body", False),
    "around-none": ("plain", None, "around", False),
    "around-dots_saveable": ("plain", P.dots_saveable, "around", False),
    "around-everything_saveable": ("plain", P.everything_saveable, "around", False),
    "around-save_only_h": ("named", P.save_only_these_names("h"), "around", False),
    "around-invariant-dots_saveable-reverse": ("invariant", P.dots_saveable, "around", True),
}


def grad_point(seed=8):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=D), rng.normal(size=(L, D)), small_w(rng, D, D) * 2]


@pytest.mark.parametrize("variant", GRAD_VARIANTS)
def test_grad_equals_finite_differences(variant):
    kind, policy, where, reverse = GRAD_VARIANTS[variant]
    prog = spec.trace(loss_fn(SP, kind, policy, where, reverse), spec.f64[D], spec.f64[L, D], spec.f64[D, D])
    spec.check_program(prog)
    g = spec.grad(prog, argnums=(0, 1, 2))
    spec.check_program(g)
    args = grad_point()
    ref = loss_fn(NP, kind, reverse=reverse)
    assert_close(spec.evaluate(prog, *args)[0], ref(*args), EVAL_TOL_F64)
    for got, want in zip(spec.evaluate(g, *args), fd_gradient(ref, args, (0, 1, 2))):
        assert_close(got, want, FD_TOL)


def const_init_fn(m):
    """chain_cell with b, d, e initialised from constants (no tangent, no
    dependence on the inputs): in the linearized scan b's tangent carry
    becomes unknown after one iteration, d's after two (the partial-eval
    carry fixpoint and the scan's dependence rule both need two rounds)."""
    def f(a, xs):
        if m is NP:
            ones = np.ones(D)
        else:
            ones = ops.broadcast_in_dim(np.float64(1.0), (D,), ())
        c, ys = m_scan(m, functools.partial(chain_cell, m), (a, ones * 0.5, ones * 0.25, ones), xs)
        return m.sum(c[2]) + m.sum(m.sin(ys)) + m.sum(c[3])
    return f


def const_init_variant(variant):
    if variant == "plain":
        return const_init_fn(SP)
    if variant == "around-none":
        return lambda a, xs: ops.checkpoint(const_init_fn(SP))(a, xs)

    def fn(a, xs):
        def body(c, x):
            outs = ops.checkpoint(lambda a, b, d, e, x: flatten(chain_cell(SP, (a, b, d, e), x)),
                                  policy=P.dots_saveable)(*c, x)
            return tuple(outs[:4]), outs[4]
        ones = ops.broadcast_in_dim(np.float64(1.0), (D,), ())
        c, ys = spec.scan(body, (a, ones * 0.5, ones * 0.25, ones), xs)
        return SP.sum(c[2]) + SP.sum(ops.sin(ys)) + SP.sum(c[3])
    return fn


CONST_INIT_VARIANTS = ["plain", "body-dots_saveable", "around-none"]


@pytest.mark.parametrize("variant", CONST_INIT_VARIANTS)
def test_linearize_through_carries_with_constant_init(variant):
    """spec.linearize (forward + linear programs, no transpose) against
    finite differences: the linear scan's carries that are known at init
    but unknown after one or two iterations."""
    prog = spec.trace(const_init_variant(variant), spec.f64[D], spec.f64[L, D])
    lin = spec.linearize(prog)
    spec.check_program(lin.forward)
    spec.check_program(lin.linear)
    rng = np.random.default_rng(18)
    args = [rng.normal(size=D), rng.normal(size=(L, D))]
    ts = [rng.normal(size=D), rng.normal(size=(L, D))]
    vals = spec.evaluate(lin.forward, *args)
    ref = const_init_fn(NP)
    assert_close(vals[0], ref(*args), EVAL_TOL_F64)
    (got,) = spec.evaluate(lin.linear, *vals[1:], *ts)
    (want,) = fd_directional(lambda *a: [ref(*a)], args, ts)
    assert abs(want) > 1e-3
    assert_close(got, want, FD_TOL)


@pytest.mark.parametrize("variant", CONST_INIT_VARIANTS)
def test_grad_through_carries_with_constant_init(variant):
    fn = const_init_variant(variant)
    prog = spec.trace(fn, spec.f64[D], spec.f64[L, D])
    g = spec.grad(prog, argnums=(0, 1))
    spec.check_program(g)
    rng = np.random.default_rng(18)
    args = [rng.normal(size=D), rng.normal(size=(L, D))]
    want = fd_gradient(const_init_fn(NP), args, (0, 1))
    assert np.max(np.abs(want[0])) > 1e-3
    for got, w in zip(spec.evaluate(g, *args), want):
        assert_close(got, w, FD_TOL)


def test_grad_of_rnn_with_zero_initial_state():
    """The common RNN pattern: h0 = zeros (a constant), gradient w.r.t. the
    weight and the inputs. (The minimal reproduction of the bug above.)"""
    def f(m):
        def loss(xs, w):
            h0 = np.zeros(D) if m is NP else ops.broadcast_in_dim(np.float64(0.0), (D,), ())
            c, _ = m_scan(m, functools.partial(cell, m), h0, xs, consts=(w,))
            return m.sum(c)
        return loss
    prog = spec.trace(f(SP), spec.f64[L, D], spec.f64[D, D])
    g = spec.grad(prog, argnums=(0, 1))
    args = grad_point()[1:]
    for got, want in zip(spec.evaluate(g, *args), fd_gradient(f(NP), args, (0, 1))):
        assert_close(got, want, FD_TOL)


VJP_VARIANTS = {"plain": (False, None), "reverse": (True, None),
                "body-dots_saveable-reverse": (True, P.dots_saveable),
                "body-everything_saveable": (False, P.everything_saveable)}


@pytest.mark.parametrize("variant", VJP_VARIANTS)
def test_vjp_multi_carry_equals_finite_differences(variant):
    """vjp with cotangents for every float output (carries and ys) of the
    three-carry scan; the int carry's input gets a float0 cotangent."""
    reverse, policy = VJP_VARIANTS[variant]
    if policy is None:
        fn = multi_fn(SP, reverse)
    else:
        def fn(h, g, k, xs, w, b):
            def body(c, x, w, b):
                def flat_cell(h, g, k, x, w, b):
                    return flatten(multi_cell(SP, (h, g, k), x, w, b))
                h, g, k, y1, y2 = ops.checkpoint(flat_cell, policy=policy)(*c, x, w, b)
                return (h, g, k), (y1, y2)
            return spec.scan(body, (h, g, k), xs, consts=(w, b), reverse=reverse)
    prog = trace(fn, *multi_types(np.float64))
    rng = np.random.default_rng(9)
    args = multi_args(rng)
    cts = [rng.normal(size=D), rng.normal(size=D), rng.normal(size=(L, D)), rng.normal(size=(L, D))]
    outs, vjp_fn, _ = spec.vjp(prog, *args)
    got = vjp_fn(*cts)
    ref = np_flat(multi_fn(NP, reverse))
    for o, w in zip(outs, ref(*args)):
        assert_close(o, w, EVAL_TOL_F64)
    assert got[2].dtype == spec.float0 and got[2].shape == ()
    scalar = lambda *a: sum(np.sum(c * o) for c, o in zip(cts, [v for i, v in enumerate(ref(*a)) if i != 2]))
    want = fd_gradient(scalar, args, (0, 1, 3, 4, 5))
    for i, w in zip((0, 1, 3, 4, 5), want):
        assert_close(got[i], w, FD_TOL)


def test_vjp_program_of_scan_equals_finite_differences():
    prog = trace(lambda h, xs, w: spec.scan(functools.partial(invariant_cell, SP), h, xs, consts=(w,),
                                            reverse=True), spec.f64[D], spec.f64[L, D], spec.f64[D, D])
    vp = spec.vjp_program(prog)
    spec.check_program(vp)
    rng = np.random.default_rng(10)
    args = grad_point(11)
    cts = [rng.normal(size=D), rng.normal(size=(L, D))]
    got = spec.evaluate(vp, *args, *cts)

    def scalar(h, xs, w):
        c, ys = np_scan(functools.partial(invariant_cell, NP), h, xs, consts=(w,), reverse=True)
        return np.sum(cts[0] * c) + np.sum(cts[1] * ys)
    for g, w in zip(got, fd_gradient(scalar, args, (0, 1, 2))):
        assert_close(g, w, FD_TOL)


# ==========================================================================
# 4. transpose of a linear scan: the adjoint identity

def linear_fn(m, reverse):
    """Linear in u (const), c0 (carry) and xl (xs); W (const) and s (xs) are
    non-linear: sin(W) is computed in the body (a non-linear, loop-invariant
    value), s scales the linear xs per iteration."""
    def body(c, x, W, u):
        xl, s = x
        return c @ m.sin(W) + xl * s + u, c * 2.0 - xl

    def f(W, u, c0, xs, s):
        return m_scan(m, body, c0, (xs, s), consts=(W, u), reverse=reverse)
    return f


@pytest.mark.parametrize("reverse", [False, True])
def test_transpose_of_linear_scan_satisfies_adjoint_identity(reverse):
    types = (spec.f64[D, D], spec.f64[D], spec.f64[D], spec.f64[L, D], spec.f64[L, D])
    prog = trace(linear_fn(SP, reverse), *types)
    linear = [False, True, True, True, False]
    tp = spec.transpose(prog, linear)
    spec.check_program(tp)
    (eqn,) = scan_eqns(tp)
    assert eqn.params["reverse"] is (not reverse)        # runs the other way
    rng = np.random.default_rng(12)
    W, s = rng.normal(size=(D, D)), rng.normal(size=(L, D))
    t = [rng.normal(size=D), rng.normal(size=D), rng.normal(size=(L, D))]       # u, c0, xs
    ct = [rng.normal(size=D), rng.normal(size=(L, D))]                          # carry, ys
    Lt = np_flat(linear_fn(NP, reverse))(W, t[0], t[1], t[2], s)               # reference forward
    LTct = spec.evaluate(tp, W, s, *ct)
    assert [np.shape(a) for a in LTct] == [(D,), (D,), (L, D)]
    lhs = sum(np.sum(c * y) for c, y in zip(ct, Lt))
    rhs = sum(np.sum(a * b) for a, b in zip(LTct, t))
    scale = sum(np.sum(np.abs(c * y)) for c, y in zip(ct, Lt)) + sum(np.sum(np.abs(a * b)) for a, b in zip(LTct, t))
    assert abs(lhs - rhs) <= ADJOINT_TOL * scale, (lhs, rhs)


def zero_init_fn(m, known):
    """Linear in u (const), the carries whose init `known` does not mark
    and xs; a carry marked `known` starts at a zero constant (as an
    instantiated zero tangent does in a linear program: 0.0 literals)."""
    def body(c, x, u, s):
        c0, c1, c2 = c
        return (c1 * s + u, c0 + c2 * 2.0, c2 - x), c0 + c1

    def f(u, inits, xs, s):
        it = iter(inits)
        c = tuple(np.zeros(D) if k else next(it) for k in known)
        return m_scan(m, body, c, xs, consts=(u, s))
    return f


@pytest.mark.parametrize("known", [(True, False, False), (False, True, False), (True, True, False),
                                   (True, False, True)])
def test_transpose_of_scan_with_constant_carry_inits(known):
    """The cotangent of each linear init is its own carry's: a constant init
    before it (whose cotangent is dropped) shifts nothing. The pattern of a
    scan in a linearized vjp program (vjp of vjp: an instantiated zero
    accumulator beside a linear carry)."""
    n_lin = known.count(False)
    types = (spec.f64[D],) + (spec.f64[D],) * n_lin + (spec.f64[L, D], spec.f64[D])
    f = zero_init_fn(SP, known)
    prog = trace(lambda u, *r: f(u, r[:n_lin], r[n_lin], r[n_lin + 1]), *types)
    tp = spec.transpose(prog, [True] * (1 + n_lin) + [True, False])
    spec.check_program(tp)
    rng = np.random.default_rng(14)
    s = rng.normal(size=D)
    t = [rng.normal(size=D) for _ in range(1 + n_lin)] + [rng.normal(size=(L, D))]    # u, inits, xs
    ct = [rng.normal(size=D) for _ in range(3)] + [rng.normal(size=(L, D))]          # carries, ys
    Lt = np_flat(zero_init_fn(NP, known))(t[0], t[1:-1], t[-1], s)
    LTct = spec.evaluate(tp, s, *ct)
    lhs = sum(np.sum(c * y) for c, y in zip(ct, Lt))
    rhs = sum(np.sum(a * b) for a, b in zip(LTct, t))
    scale = sum(np.sum(np.abs(c * y)) for c, y in zip(ct, Lt)) + sum(np.sum(np.abs(a * b)) for a, b in zip(LTct, t))
    assert abs(lhs - rhs) <= ADJOINT_TOL * scale, (lhs, rhs)


def test_second_order_vjp_through_scan_with_const_and_carry_alike():
    """vjp of the vjp program of f(a, b) = b * scan(c -> c * a, init a,
    length 1) = a^2 b: closed form. Its linearization holds a scan whose
    first carry init is an instantiated zero and whose second is linear."""
    prog = trace(lambda a, b: spec.scan(lambda c, x, k: (c * k, None), a, None, consts=(a,), length=1)[0] * b,
                 spec.f64[()], spec.f64[()])
    level1 = spec.vjp_program(prog)                 # (a, b, ct) -> (2ab ct, a^2 ct)
    a, b, ct, w0, w1 = 0.7, -1.3, 0.4, 1.1, -0.6
    got = spec.vjp(level1, a, b, ct)[1](w0, w1)
    want = [2 * b * ct * w0 + 2 * a * ct * w1, 2 * a * ct * w0, 2 * a * b * w0 + a * a * w1]
    for g, w in zip(got, want):
        assert_close(g, w, ADJOINT_TOL)


def test_transpose_matrix_matches_jacobian():
    """Each column of L^T (transpose applied to unit cotangents) equals the
    corresponding row of L, computed by the numpy loop (exact: L is linear)."""
    types = (spec.f64[D, D], spec.f64[D], spec.f64[D], spec.f64[L, D], spec.f64[L, D])
    tp = spec.transpose(trace(linear_fn(SP, False), *types), [False, True, True, True, False])
    rng = np.random.default_rng(13)
    W, s = rng.normal(size=(D, D)), rng.normal(size=(L, D))
    ref = np_flat(linear_fn(NP, False))
    n_in = [D, D, L * D]

    def L_of(vec):
        u, c0, xs = np.split(vec, np.cumsum(n_in)[:-1])
        return np.concatenate([o.ravel() for o in ref(W, u, c0, xs.reshape(L, D), s)])
    J = np.stack([L_of(e) for e in np.eye(sum(n_in))], axis=1)      # (outs, ins)
    JT = np.stack([np.concatenate([a.ravel() for a in spec.evaluate(
        tp, W, s, e[:D], e[D:].reshape(L, D))]) for e in np.eye(D + L * D)], axis=1)
    assert_close(JT, J.T, ADJOINT_TOL * 100)


def test_transpose_of_scan_nonlinear_in_a_linear_input_is_an_error():
    """c * x with both c and xs linear is not linear: transposing the scan
    must fail (a TypeError: today mul's PrimitiveError from the body)."""
    prog = trace(lambda c, xs: spec.scan(lambda c, x: (c * x, c), c, xs), spec.f64[D], spec.f64[L, D])
    with pytest.raises(TypeError):
        spec.transpose(prog, [True, True])


# ==========================================================================
# 5. vmap == a loop over the batch

def vmap_fn(h, xs, w, z):
    c, ys = spec.scan(functools.partial(cell, SP), h, xs, consts=(w,))
    return c, ys, z * 2.0


VMAP_TYPES = (spec.f64[D], spec.f64[L, D], spec.f64[D, D], spec.f64[2])
VMAP_CASES = {
    # id: (in_axes, whether the scan itself gets batched)
    "xs-only": ([None, 0, None, None], True),
    "xs-only-axis1": ([None, 1, None, None], True),
    "const-only": ([None, None, 0, None], True),
    "init-only": ([0, None, None, None], True),
    "all0": ([0, 0, 0, 0], True),
    "all-last": ([-1, -1, -1, -1], True),
    "mixed-last": ([-1, None, 0, None], True),
    "other-input-only": ([None, None, None, 0], False),
}


def stack_members(types, in_axes, seed):
    rng = np.random.default_rng(seed)
    members = [[rng.normal(size=t.shape) * (0.3 if i == 2 else 1.0) for i, t in enumerate(types)]
               for _ in range(B)]
    for m in members[1:]:
        for i, a in enumerate(in_axes):
            if a is None:
                m[i] = members[0][i]
    stacked = [members[0][i] if a is None else np.stack([m[i] for m in members], axis=a)
               for i, a in enumerate(in_axes)]
    return members, stacked


@pytest.mark.parametrize("case", VMAP_CASES)
def test_vmap_equals_loop(case):
    in_axes, batched = VMAP_CASES[case]
    prog = trace(vmap_fn, *VMAP_TYPES)
    vp = spec.vmap(prog, in_axes=in_axes, out_axes=0, axis_size=B)
    spec.check_program(vp)
    members, stacked = stack_members(VMAP_TYPES, in_axes, seed=14)
    got = spec.evaluate(vp, *stacked)
    for g, w in zip(got, loop_reference(prog, members)):
        assert_f64_close(g, w, LOOP_TOL_F64)
    # independent check of the unbatched program against the numpy loop
    for m in members:
        c, ys = np_scan(functools.partial(cell, NP), m[0], m[1], consts=(m[2],))
        for g, w in zip(spec.evaluate(prog, *m)[:2], [c, ys]):
            assert_close(g, w, EVAL_TOL_F64)
    (eqn,) = scan_eqns(vp)
    if batched:
        # the carry is batched (init, const or xs batched all make it so)
        # at axis 0, the ys at axis 1 (axis 0 is the scan's)
        assert [v.type.shape for v in eqn.outputs] == [(B, D), (L, B, D)]
    else:
        assert [v.type for v in eqn.outputs] == [spec.f64[D], spec.f64[L, D]]


def test_vmap_carry_fixpoint_keeps_int_counter_unbatched():
    """Only the const b is batched: g becomes batched in the first
    iteration, h (reading g) in the second; the int counter never does."""
    prog = trace(multi_fn(SP), *multi_types(np.float64))
    in_axes = [None, None, None, None, None, 0]
    vp = spec.vmap(prog, in_axes=in_axes, out_axes=0, axis_size=B)
    spec.check_program(vp)
    (eqn,) = scan_eqns(vp)
    assert [v.type for v in eqn.outputs[:3]] == [spec.f64[B, D], spec.f64[B, D], spec.i32[()]]
    rng = np.random.default_rng(15)
    base = multi_args(rng)
    members = [base[:5] + [rng.normal(size=D) * 0.3] for _ in range(B)]
    stacked = base[:5] + [np.stack([m[5] for m in members])]
    got = spec.evaluate(vp, *stacked)
    ref = np_flat(multi_fn(NP))
    want = [np.stack(o) for o in zip(*[ref(*m) for m in members])]
    for g, w in zip(got, want):
        if w.dtype.kind == "i":
            np.testing.assert_array_equal(g, w)
        else:
            assert_close(g, w, EVAL_TOL_F64)


def test_vmap_of_grad_of_checkpointed_scan_equals_loop():
    prog = spec.trace(loss_fn(SP, "named", P.save_only_these_names("h"), "body", True),
                      spec.f64[D], spec.f64[L, D], spec.f64[D, D])
    g = spec.grad(prog, argnums=(0, 1, 2))
    in_axes = [0, -1, None]
    vg = spec.vmap(g, in_axes=in_axes, out_axes=0, axis_size=B)
    spec.check_program(vg)
    members, stacked = stack_members(prog.in_types, in_axes, seed=16)
    for a, w in zip(spec.evaluate(vg, *stacked), loop_reference(g, members)):
        assert_f64_close(a, w, LOOP_TOL_F64)


# ==========================================================================
# 6. saved residuals: stacked, hoisted, forwarded, closed_call

LR = 5    # a scan length distinct from every other dimension


def residuals(kind, policy=None, where="none", reverse=False, length=LR):
    """saved_residuals of sum(c) + sum(ys) (nothing outside the scan saves)."""
    fn = loss_fn(SP, kind, policy, where, reverse, sin_ys=False)
    prog = spec.trace(fn, spec.f32[D], spec.f32[length, D], spec.f32[D, D])
    return spec.saved_residuals(prog)


def sources(res):
    return [(str(r.type), str(r.source)) for r in res]


@pytest.mark.parametrize("reverse", [False, True])
def test_residuals_of_plain_scan_are_stacked_or_forwarded(reverse):
    res = residuals("plain", reverse=reverse)
    kinds = {str(r.source) for r in res}
    assert kinds == {"from the argument w", "output of scan"}, sources(res)
    stacked = [r for r in res if str(r.source) == "output of scan"]
    assert stacked and all(r.type.shape[0] == LR for r in stacked), sources(res)
    assert all(r.type.shape == (LR, D) for r in stacked), sources(res)
    assert ("f32[3,3]", "from the argument w") in sources(res)       # forwarded, not stacked


def test_loop_invariant_residual_is_hoisted():
    res = residuals("invariant")
    hoisted = [r for r in res if str(r.source) == "output of sin"]
    assert [str(r.type) for r in hoisted] == ["f32[3,3]"], sources(res)     # the const's shape, once
    # nothing of the const's shape is stacked over the iterations
    assert not any(r.type.shape == (LR, D, D) for r in res), sources(res)
    # w itself is not needed: only sin(w) and cos(w) are (both hoisted)
    assert ("f32[3,3]", "output of cos") in sources(res)
    assert all(r.type.shape[0] == LR for r in res if str(r.source) == "output of scan")


def test_residuals_of_checkpointed_body_are_forwarded_inputs():
    """Checkpointing the body with nothing saveable: the scan's xs and w are
    forwarded, the carries stacked."""
    res = residuals("plain", None, "body")
    assert ("f32[5,3]", "from the argument xs") in sources(res)
    assert ("f32[3,3]", "from the argument w") in sources(res)
    assert {str(r.source) for r in res} == {"from the argument xs", "from the argument w", "output of scan"}


def test_scan_in_checkpoint_with_dots_saveable_saves_closed_call_outputs():
    res = residuals("plain", P.dots_saveable, "around")
    cc = [r for r in res if str(r.source) == "output of closed_call"]
    assert cc, sources(res)
    assert all(r.type.shape[0] == LR for r in cc), sources(res)   # the dots, stacked
    assert {str(r.source) for r in res} <= {"from the argument xs", "from the argument w", "from the argument h",
                                            "output of closed_call"}, sources(res)
    # with no policy only the checkpoint's inputs are saved
    res = residuals("plain", None, "around")
    assert all(r.source.kind == "argument" for r in res), sources(res)


# ==========================================================================
# 7. DCE

def dce_fn(a, b, d, xs, zs, w, v):
    """Carries a, b, d; xs, zs; consts w, v. a's update reads b (b feeds a
    used output through the loop); d and its const v and xs zs feed only
    the unused carry d and the unused y2."""
    def body(c, x, w, v):
        a, b, d = c
        x1, z = x
        a2 = a + ops.sin(b) * x1
        b2 = ops.cos(b @ w)
        d2 = d * v + z
        return (a2, b2, d2), (a2 * 2.0, ops.exp(d2))
    return spec.scan(body, (a, b, d), (xs, zs), consts=(w, v))


DCE_TYPES = (spec.f64[D], spec.f64[D], spec.f64[D], spec.f64[L, D], spec.f64[L, D], spec.f64[D, D], spec.f64[D])


def test_dce_prunes_unused_ys_and_carries_but_keeps_carries_feeding_used_outputs():
    prog = trace(dce_fn, *DCE_TYPES)       # outputs: a, b, d, y1, y2
    used = [True, False, False, True, False]
    pruned, used_inputs = spec.dce(prog, used)
    spec.check_program(pruned)
    (eqn,) = scan_eqns(pruned)
    p = eqn.params
    assert p["num_carry"] == 2                            # a, and b that feeds it; d is gone
    assert p["num_consts"] == 1                           # w (read by b's update); v is gone
    assert len(eqn.outputs) == 3                          # a, b, y1
    assert [v.type for v in eqn.outputs] == [spec.f64[D], spec.f64[D], spec.f64[L, D]]
    assert len(eqn.inputs) == 1 + 2 + 1                   # w, a0, b0, xs (zs pruned)
    assert len(p["jaxpr"].inputs) == 4 and len(p["jaxpr"].outputs) == 3
    assert used_inputs == [True, True, False, True, False, True, False]
    assert not any(e.primitive.name == "exp" for e in p["jaxpr"].eqns)
    rng = np.random.default_rng(17)
    args = [rng.normal(size=t.shape) for t in DCE_TYPES]
    full = spec.evaluate(prog, *args)
    got = spec.evaluate(pruned, *args)
    assert len(got) == 2
    np.testing.assert_array_equal(got[0], full[0])
    np.testing.assert_array_equal(got[1], full[3])


def test_dce_keeps_a_carry_used_only_through_the_loop():
    """b's final value is unused, yet a's output reads b inside the loop: b
    stays; and a carry used by nothing live (d) goes even though its
    output was requested nowhere."""
    prog = trace(dce_fn, *DCE_TYPES)
    pruned, _ = spec.dce(prog, [True, False, False, False, False])
    (eqn,) = scan_eqns(pruned)
    assert eqn.params["num_carry"] == 2 and len(eqn.outputs) == 2
    pruned, _ = spec.dce(prog, [False, True, False, False, False])   # b alone does not need a
    (eqn,) = scan_eqns(pruned)
    assert eqn.params["num_carry"] == 1 and eqn.params["num_consts"] == 1 and len(eqn.inputs) == 2
    pruned, _ = spec.dce(prog, [False, False, False, False, False])
    assert scan_eqns(pruned) == []


# ==========================================================================
# 8. shape-rule errors

def test_xs_with_wrong_leading_axis_is_an_error():
    with pytest.raises(TypeError, match="scan: every xs must have leading axis 4"):
        spec.trace(lambda c, xs, zs: spec.scan(lambda c, x: (c, None), c, (xs, zs)),
                   spec.f32[D], spec.f32[L, D], spec.f32[L + 1, D])
    with pytest.raises(TypeError, match="scan: every xs must have leading axis 3"):
        spec.trace(lambda c, xs: spec.scan(lambda c, x: (c, None), c, xs, length=3), spec.f32[D], spec.f32[L, D])
    with pytest.raises(TypeError, match="scan"):        # a scalar has no leading axis
        spec.trace(lambda c, x: spec.scan(lambda c, x: (c, None), c, x, length=1), spec.f32[D], spec.f32[()])


def test_no_xs_without_length_is_an_error():
    with pytest.raises(TypeError, match="scan: length is needed"):
        spec.trace(lambda c: spec.scan(lambda c, x: (c, None), c, None), spec.f32[D])


@pytest.mark.parametrize("bad", ["shape", "dtype"])
def test_body_returning_carry_of_another_type_is_an_error(bad):
    def body(c, x):
        if bad == "shape":
            return ops.reduce_sum(c, (0,)), x
        return ops.convert_element_type(c, np.float64), x
    with pytest.raises(spec.PrimitiveError, match=r"^scan: the body returns carry"):
        spec.trace(lambda c, xs: spec.scan(body, c, xs), spec.f32[D], spec.f32[L, D])


@pytest.mark.parametrize("bad", ["more", "fewer"])
def test_body_returning_another_number_of_carries_is_an_error(bad):
    if bad == "more":
        fn = lambda c, d, xs: spec.scan(lambda c, x: ((c, c * 2.0), x + 1.0), c, xs)
    else:
        fn = lambda c, d, xs: spec.scan(lambda c, x: (c[0], (x, c[1])), (c, d), xs)
    with pytest.raises(TypeError, match="scan"):
        trace(fn, spec.f32[D], spec.f32[D], spec.f32[L, D])


def _bound(types, **kw):
    body = spec.trace(lambda w, c, x: (c @ w + x, c), spec.f32[D, D], spec.f32[D], spec.f32[D])
    params = dict(jaxpr=body, length=L, reverse=False, num_consts=1, num_carry=1, unroll=1)
    return spec.trace(lambda *a: bind(scan_p, *a, **dict(params, **kw)), *types)


def test_bind_with_inconsistent_types_is_an_error():
    _bound((spec.f32[D, D], spec.f32[D], spec.f32[L, D]))      # the consistent call works
    with pytest.raises(spec.PrimitiveError, match=r"^scan: body takes"):
        _bound((spec.f32[D, D], spec.f32[D], spec.f32[L + 1, D]))
    with pytest.raises(spec.PrimitiveError, match=r"^scan: "):
        _bound((spec.f32[D, D], spec.f64[D], spec.f32[L, D]))
    with pytest.raises(spec.PrimitiveError, match=r"^scan: param length"):
        _bound((spec.f32[D, D], spec.f32[D], spec.f32[L, D]), length=-1)
    with pytest.raises(spec.PrimitiveError, match=r"^scan: param jaxpr"):
        _bound((spec.f32[D, D], spec.f32[D], spec.f32[L, D]), jaxpr="not a program")


def test_bind_with_const_of_wrong_type_is_an_error():
    with pytest.raises(spec.PrimitiveError, match=r"^scan: body takes"):
        _bound((spec.f32[D + 1, D + 1], spec.f32[D], spec.f32[L, D]))


SCAN_CONSTANT = np.array([0.5, 0.75, 1.0], np.float32)


def _checkpointed_scan_reading_a_constant(policy):
    """A checkpointed scan whose body reads a closed-over array (a const of
    the body's ClosedJaxpr, as oracle.to_jax binds it) in what the staged
    body recomputes."""
    def body(c, x):
        return ops.sin(c * SCAN_CONSTANT) + x, ops.cos(c * SCAN_CONSTANT)
    return lambda a, xs: ops.checkpoint(lambda a, xs: spec.scan(body, a, xs), policy=policy)(a, xs)


@pytest.mark.parametrize("policy", ["nothing_saveable", "everything_saveable"])
def test_a_scan_body_s_constant_is_no_residual_inside_a_checkpoint(policy):
    """Found with the cond case (campaign round k, 0953d98a80; a spec bug on
    every release): _scan_partial_eval_custom gives the known and the
    staged body the body's consts alike (`core.ClosedJaxpr(jaxpr_staged_,
    jaxpr.consts)`), and partial_eval_jaxpr_custom writes constvars known
    and instantiated, so the constant is no (hoisted) residual; the spec
    saved it twice. JAX's list, on the installed release, is the
    independent answer."""
    prog = spec.trace(_checkpointed_scan_reading_a_constant(getattr(P, policy)), spec.f32[3], spec.f32[4, 3])
    assert all(r.type.shape != (3,) or r.source.kind == "argument" for r in spec.saved_residuals(prog))
    pytest.importorskip("jax")
    import oracle
    args = (np.array([0.1, 0.2, 0.3], np.float32), np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, *args, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok"


def test_a_loop_invariant_value_of_a_nested_checkpoint_is_named_by_its_producer():
    """Found by the campaign (finding 98dc6810fb, jax 0.6.2; a spec bug, a
    false alarm on 0.10.2 too): a scan body's checkpoint nesting another,
    whose values depend on the scan's consts alone. _scan_partial_eval
    computes those loop-invariant residuals by evaluating the known body
    with its consts known, and a JaxprTrace evaluates a known checkpoint
    inline (remat_partial_eval: `core.eval_jaxpr(jaxpr_known, ...)`), so
    saved_residuals names the value by its producer, `output of cos`; the
    spec named it `output of remat2`, as JAX before 0.4.36 does (the
    normalisation saved-residuals-names-a-scan-s-invariant-checkpoint-value-
    remat2). JAX's list, on the installed release, is the independent
    answer."""
    pytest.importorskip("jax")
    import jax
    import jax.numpy as jnp
    from jax import lax

    import oracle
    dots = jax.checkpoint_policies.dots_saveable

    def f(a, b, c):
        inner = jax.checkpoint(lambda p, q: jnp.sin(lax.conv_general_dilated(p, q, (1, 1), "VALID")),
                               policy=dots, prevent_cse=False)
        outer = jax.checkpoint(lambda k, l, m: (inner(l, m), k * 2.0), policy=jax.checkpoint_policies.everything_saveable,
                               prevent_cse=False)
        return lax.scan(lambda h, _: (jnp.sin(h), outer(h, b, c)[0]), a, None, length=1)
    args = (np.float32(0.3), np.full((2, 3, 5, 5), 0.1, np.float32), np.full((4, 3, 3, 3), 0.1, np.float32))
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2",), properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", str(report)
