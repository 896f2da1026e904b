"""Batching (`spec.vmap`) and its composition with autodiff and remat.

Expected values come from sources independent of the transformation under
test: a Python loop that evaluates the *unbatched* program on numpy slices
of the batched inputs (and stacks the results), float64 central finite
differences, or the un-checkpointed, unnamed program. No jax import.

1. every primitive has its rules (a new primitive without rules fails here);
2. per primitive: vmap == loop, for leading, non-leading (negative) and
   mixed/unbatched in_axes;
3. vmap(grad) == loop of grad; grad of grad, jvp of grad and vjp of jvp ==
   finite differences, with and without checkpoints and names;
4. vmap keeps a checkpoint's saved residuals (same sources, batched types).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest

import spec
from spec.batching import AxesRefused
from spec import ops, policies as P
from spec.core import eval_program_traced
from spec.ir import ArrayType, is_float, subprograms

from spec.examples import draw_operand
from test_primitives import MATMUL, normal
from test_prims_linear_solve import upper_solve

BATCH_0 = (((2,), (1,)), ((0,), (0,)))              # [2,3,4] . [2,4,5] -> [2,3,5]
BATCH_MID = (((2,), (0,)), ((1,), (1,)))            # [3,2,4] . [4,2,5] -> [2,3,5]

B = 3   # batch size used throughout (small: the loop reference is O(B))

# ==========================================================================
# 1. registry completeness

# The primitives that are linear in (some of) their inputs, and so must be
# transposable. mul/div/dot_general/select_n are linear in some operands
# only; call/remat/name are linear when their bodies are. device_put is
# linear too: JAX registers `ad.linear_jvp` and `_device_put_transpose` for
# it (jax/_src/dispatch.py), and the spec emits it inside differentiated
# programs (offloading policies), which can be differentiated again.
LINEAR = ["neg", "add", "sub", "add_any", "mul", "div", "dot_general", "reduce_sum", "psum",
          "broadcast_in_dim", "reshape", "transpose", "squeeze", "concatenate", "slice",
          "pad", "convert_element_type", "select_n", "call", "remat", "name", "device_put"]

RULE_TABLES = {
    "shape": spec.core.shape_rules,
    "eval": spec.core.eval_rules,
    "batch": spec.core.batch_rules,
    "jvp": spec.core.jvp_rules,
}


@pytest.mark.parametrize("name", sorted(spec.primitives))
def test_every_primitive_has_shape_eval_batch_and_jvp_rules(name):
    p = spec.primitives[name]
    missing = [t for t, table in RULE_TABLES.items()
               if p not in table and not (t == "batch" and p in spec.core.axis_batch_rules)]
    assert not missing, f"primitive {name!r} has no {missing} rule(s)"


def test_registry_iteration_sees_every_registered_rule():
    """The rule tables hold nothing that is not a declared primitive (so
    iterating over spec.primitives covers every rule)."""
    declared = set(spec.primitives.values()) | spec.core.extension_primitives
    for tname, table in {**RULE_TABLES, "transpose": spec.core.transpose_rules,
                         "axis_batch": spec.core.axis_batch_rules}.items():
        assert set(table) <= declared, tname


@pytest.mark.parametrize("name", LINEAR)
def test_every_linear_primitive_has_a_transpose_rule(name):
    assert name in spec.primitives, f"{name!r} is listed as linear but is not a primitive"
    assert spec.primitives[name] in spec.core.transpose_rules, f"linear primitive {name!r} has no transpose rule"


# ==========================================================================
# 2. per primitive: vmap == a loop over the batch of the unbatched program

# Tolerance. The batched program applies the same primitives to the same
# float32 values as the loop, so elementwise results agree bit for bit; only
# reductions and dots may accumulate in another order (numpy's pairwise
# summation and BLAS blocking depend on the array layout). For the sums
# here (<= 8 terms of O(1) products) each side is within ~n*eps32*sum|terms|
# ~ 8 * 1.2e-7 * 6 ~ 6e-6 of the exact value, so the two differ by at most
# ~1e-5 at the scale of the output. rtol = 1e-5 with atol = 1e-5 * max(1,
# max|output|) covers that, while a wrong batching rule (wrong axis, wrong
# member, wrong broadcast) is off by O(1). Non-float results must be exact.
BATCH_RTOL = 1e-5


def assert_batched_close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if not is_float(got.dtype):
        np.testing.assert_array_equal(got, want)
        return
    scale = max(1.0, float(np.max(np.abs(want.astype(np.float64)), initial=0.0)))
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=BATCH_RTOL, atol=BATCH_RTOL * scale)


@dataclass
class VCase:
    """A program for the vmap tests: a builder and one generator per input."""
    id: str
    fn: Callable
    gens: list
    fixed: dict = field(default_factory=dict)   # input index -> dtype kept

    def make(self, rng, dtype=np.float32):
        vals = []
        for i, g in enumerate(self.gens):
            v = np.asarray(g(rng))
            if i in self.fixed:
                v = v.astype(self.fixed[i])
            elif v.dtype == np.float64:
                v = v.astype(dtype)
            vals.append(v)
        return vals


def example_case(prim, ex) -> VCase:
    """A registered primitive example (`spec.core.examples`): its operands
    drawn as tests/test_primitive_examples.py draws them, float ones in
    float32 (or their own dtype where the example keeps it)."""
    def gen(i, shape, dtype, domain):
        floats = dtype in ("f16", "bf16", "f32", "f64") and i not in ex.kept
        return lambda rng: draw_operand(domain, shape, "f32" if floats else dtype, rng)
    gens = [gen(i, *op) for i, op in enumerate(ex.operands)]
    return VCase(f"{prim.name}-{ex.name}", ex.fn, gens,
                 {i: np.dtype(spec.ir.DTYPES[d]) for i, (_, d, _) in enumerate(ex.operands) if i in ex.kept})


# ---- programs beyond the registered examples: primitives without any
# (add_any's batcher, device_put, sub-programs), and call/remat/name in the
# combinations batching must handle

device_put_p = spec.primitives["device_put"]


def custom_jvp_sin_mul(x, y):
    def f(a, b):
        return ops.sin(a) * ops.broadcast_in_dim(b, a.shape, (1,))

    def f_jvp(primals, tangents):
        (a, b), (ta, tb) = primals, tangents
        bb = ops.broadcast_in_dim(b, a.shape, (1,))
        return g(a, b), ops.cos(a) * bb * ta + ops.sin(a) * ops.broadcast_in_dim(tb, a.shape, (1,))
    g = spec.custom_jvp(f, f_jvp)
    return g(x, y)


def custom_vjp_sin_mul(x, y):
    def f(a, b):
        return ops.sin(a) * ops.broadcast_in_dim(b, a.shape, (1,))

    def fwd(a, b):
        return f(a, b), (ops.cos(a), ops.sin(a), b)

    def bwd(res, ct):
        c, s, b = res
        return (ct * c * ops.broadcast_in_dim(b, c.shape, (1,)), ops.reduce_sum(ct * s, (0,)))
    g = spec.custom_vjp(f, fwd, bwd)
    return g(x, y)


def remat_opt_sin_mul(x, y):
    """The forward rule of custom_vjp_sin_mul's function defined with
    optimize_remat=True: one remat_opt equation (residuals, then the output)."""
    from spec.prims_remat_opt import optimized_fwd
    from spec.core import eval_program_traced

    def fwd(a, b):
        return ops.sin(a) * ops.broadcast_in_dim(b, a.shape, (1,)), ops.cos(a)
    prog = spec.trace(lambda a, b: list(fwd(a, b)), x.type, y.type)
    body = spec.trace(lambda a, b: fwd(a, b)[0], x.type, y.type)
    return eval_program_traced(optimized_fwd(prog, 1, body), x, y)


def to_host_and_back(x):
    h = spec.core.bind(device_put_p, ops.sin(x), memory_space="pinned_host")[0]
    return h, spec.core.bind(device_put_p, h, memory_space="device")[0] * 2.0


def remat_body(x, W):
    h = ops.checkpoint_name(ops.sin(x @ W), "h")
    a = ops.checkpoint_name(ops.tanh(h), "a")
    return ops.reduce_sum(a * h, (1,))


REMAT_POLICIES = {
    "none": None,
    "nothing_saveable": P.nothing_saveable,
    "dots_saveable": P.dots_saveable,
    "everything_saveable": P.everything_saveable,
    "save_only_h": P.save_only_these_names("h"),
    "offload_a": P.save_and_offload_only_these_names(
        names_which_can_be_saved=["h"], names_which_can_be_offloaded=["a"],
        offload_src="device", offload_dst="pinned_host"),
}


def remat_case(pname):
    policy = REMAT_POLICIES[pname]
    return VCase(f"remat-{pname}", lambda x, W: ops.checkpoint(remat_body, policy=policy)(x, W),
                 [normal(2, 3), normal(3, 4)])


def remat_two_outputs(x, y):
    return tuple(ops.checkpoint(lambda a, b: (ops.exp(a) * b, ops.reduce_sum(ops.cos(a - b), (0,))),
                                policy=P.dots_saveable)(x, y))


def remat_output_of_one_input(x, y):
    """The second output reads y only: unbatched when y is."""
    return tuple(ops.checkpoint(lambda a, b: (ops.sin(a) * b, ops.cos(b) * 2.0),
                                policy=P.everything_saveable)(x, y))


def call_output_of_one_input(x, y):
    body = spec.trace(lambda a, b: (a - b, ops.exp(b)), x.type, y.type)
    return tuple(ops.call(body, x, y, name="two"))


def remat_nested(x, W):
    inner = ops.checkpoint(lambda a, w: ops.checkpoint_name(ops.sin(a @ w), "h"),
                           policy=P.save_only_these_names("h"))

    def outer(a, w):
        return ops.tanh(inner(a, w)) * 2.0
    return ops.checkpoint(outer, policy=P.dots_saveable)(x, W)


def remat_with_call(x, y):
    body = spec.trace(lambda a, b: ops.dot_general(a, b, BATCH_0) * 0.5, x.type, y.type)

    def f(a, b):
        return ops.logistic(ops.call(body, a, b, name="bdot")[0])
    return ops.checkpoint(f, policy=P.dots_with_no_batch_dims_saveable)(x, y)


def remat_static(x):
    return ops.checkpoint(lambda a, n: ops.integer_pow(ops.sin(a), n), static_argnums=(1,))(x, 3)


def call_batch_dims(x, y):
    body = spec.trace(lambda a, b: ops.tanh(ops.dot_general(a, b, BATCH_MID)), x.type, y.type)
    return ops.call(body, x, y, name="bmm")[0]


def call_nested(x, y):
    inner = spec.trace(lambda a: ops.square(a), x.type)
    body = spec.trace(lambda a, b: ops.call(inner, a, name="sq")[0] - b, x.type, y.type)
    return ops.call(body, x, y, name="outer")[0]


def call_unused_input(x, y):
    body = spec.trace(lambda a, b: ops.cos(a), x.type, y.type)
    return ops.call(body, x, y, name="drops_b")[0]


def scan_rnn(h, xs, w):
    """A scan with a carry, xs and a const (all three batched or not)."""
    body = lambda c, x, w: (ops.tanh(c @ w * 0.3 + x), ops.sin(c) * x)
    return tuple(spec.scan(body, h, xs, consts=(w,)))


def scan_counter(c, w, k):
    """A reverse scan without xs (length=3): a float carry, an int32 carry
    that feeds it, a const."""
    def body(carry, x, w):
        h, n = carry
        h2 = ops.sin(h @ w * 0.5) + ops.convert_element_type(n, h.dtype) * 0.1
        return (h2, n + 1), h2 * 2.0
    (h, n), ys = spec.scan(body, (c, k), None, consts=(w,), length=3, reverse=True)
    return h, n, ys


EXTRA = [
    VCase("add_any", ops.add_any, [normal(3, 4), normal(3, 4)]),
    VCase("add_any-scalar", ops.add_any, [normal(), normal()]),
    # cases whose batched shapes coincide at different batch axes ([B, B]):
    # lax._select_batch_rule's branch that moves one case's batch axis
    VCase("select_n-scalar-pred-square", ops.select_n,
          [lambda rng: np.array(rng.random() < 0.5), normal(B), normal(B)]),
    VCase("select_n-scalar-pred-square-true", ops.select_n,
          [lambda rng: np.array(True), normal(B), normal(B)]),
    VCase("name-of-input", lambda x: ops.checkpoint_name(x, "x"), [normal(3, 4)]),
    VCase("name-of-value", lambda x, y: ops.checkpoint_name(ops.sin(x) * y, "h"), [normal(3), normal(3)]),
    VCase("device_put", to_host_and_back, [normal(2, 3)]),
    *[remat_case(p) for p in REMAT_POLICIES],
    VCase("remat-two-outputs", remat_two_outputs, [normal(4), normal(4)]),
    VCase("remat-output-of-one-input", remat_output_of_one_input, [normal(4), normal(4)]),
    VCase("call-output-of-one-input", call_output_of_one_input, [normal(2, 3), normal(2, 3)]),
    VCase("remat-nested", remat_nested, [normal(2, 3), normal(3, 4)]),
    VCase("remat-with-call", remat_with_call, [normal(2, 3, 4), normal(2, 4, 5)]),
    VCase("remat-static-argnums", remat_static, [normal(3, 2)]),
    VCase("call-dot_general-batch-dims", call_batch_dims, [normal(3, 2, 4), normal(4, 2, 5)]),
    VCase("call-nested", call_nested, [normal(3), normal(3)]),
    VCase("call-unused-input", call_unused_input, [normal(3), normal(2)]),
    VCase("custom_jvp_call", custom_jvp_sin_mul, [normal(2, 3), normal(3)]),
    VCase("custom_vjp_call", custom_vjp_sin_mul, [normal(2, 3), normal(3)]),
    VCase("remat_opt", remat_opt_sin_mul, [normal(2, 3), normal(3)]),
    # a non-symmetric 2x2 system on two leaves: the batching rule's fixpoint over x and b
    VCase("custom_linear_solve", upper_solve, [lambda rng: rng.uniform(1, 2, 3), normal(3),
                                               lambda rng: rng.uniform(1, 2, 3), normal(3), normal(3)]),
    VCase("reduce_max-axes01-of-3d", lambda x: ops.reduce_max(x, (0, 2)),
          [lambda rng: rng.permutation(24).reshape(2, 3, 4) * 0.25]),
    VCase("transpose-then-reshape", lambda x: ops.reshape(ops.transpose(x, (1, 0)), (2, 6)),
          [normal(3, 4)]),
    VCase("broadcast-then-dot", lambda x, W: ops.dot_general(
        ops.broadcast_in_dim(x, (2, 3), (1,)), W, MATMUL), [normal(3), normal(3, 4)]),
    VCase("scan", scan_rnn, [normal(3), normal(4, 3), normal(3, 3)]),
    VCase("scan-reverse-int-carry-no-xs", scan_counter,
          [normal(3), normal(3, 3), lambda rng: rng.integers(0, 5)], fixed={2: np.int32}),
    # cond: the index is batched when x is (select_n over both branches), unbatched otherwise
    VCase("cond-pred-of-x", lambda x, y: spec.cond(ops.reduce_sum(x, (0,)) > 0.0,
                                                   lambda a, b: ops.sin(a) * b, lambda a, b: ops.cos(b) - a, x, y),
          [normal(3), normal(3)]),
    VCase("cond-literal-index", lambda x: spec.switch(np.int32(1), [ops.sin, ops.exp], x), [normal(2, 3)]),
    # while: an unbatched predicate (a counter), and a batched one (each member stops on its own)
    VCase("while-counter", lambda x: spec.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, ops.sin(c[1]) * 2.0), (0, x))[1], [normal(3)]),
    VCase("while-batched-pred", lambda x: spec.while_loop(
        lambda c: ops.reduce_sum(c, (0,)) < 10.0, lambda c: ops.abs(c) * 1.5 + 1.0, x), [normal(3)]),
]

VCASES = [example_case(p, ex) for p, exs in spec.core.examples.items() for ex in exs] + EXTRA
assert len({c.id for c in VCASES}) == len(VCASES)


def in_axes_configs(case):
    """(id, in_axes, out_axes) for a case: all leading; all last (negative,
    out_axes too); axis 1 where the input has a dim; and, for several
    inputs, alternating leading/last and each input unbatched in turn."""
    n = len(case.gens)
    ndims = [np.ndim(g(np.random.default_rng(0))) for g in case.gens]
    configs = [("all0", [0] * n, 0), ("last", [-1] * n, -1)]
    if all(d >= 1 for d in ndims):
        configs.append(("axis1", [1] * n, "axis1"))   # out: axis 1, or 0 for a scalar output
    if n >= 2:
        configs.append(("alternate", [0 if i % 2 == 0 else -1 for i in range(n)], 0))
        for i in range(n):
            configs.append((f"none{i}", [None if j == i else 0 for j in range(n)], 0))
            configs.append((f"none{i}-last", [None if j == i else -1 for j in range(n)], -1))
            if n >= 3:   # the batched inputs at different axes
                others = iter([0, -1] * n)
                configs.append((f"none{i}-alternate", [None if j == i else next(others)
                                                       for j in range(n)], 0))
    return configs


VMAP_PARAMS = [(c, axes, out) for c in VCASES for _, axes, out in in_axes_configs(c)]
VMAP_IDS = [f"{c.id}-{cid}" for c in VCASES for cid, _, _ in in_axes_configs(c)]


def batch_members(case, in_axes, seed):
    """B input lists (one per member; unbatched inputs are shared) and the
    stacked batched inputs."""
    rng = np.random.default_rng(seed)
    members = [case.make(rng) for _ in range(B)]
    for m in members[1:]:
        for i, a in enumerate(in_axes):
            if a is None:
                m[i] = members[0][i]
    stacked = [members[0][i] if a is None else np.stack([m[i] for m in members], axis=a)
               for i, a in enumerate(in_axes)]
    return members, stacked


def loop_reference(prog, members):
    """Evaluate the unbatched program per member; stack each output on axis 0."""
    per = [spec.evaluate(prog, *m) for m in members]
    return [np.stack([p[k] for p in per]) for k in range(len(prog.outputs))]


@pytest.mark.parametrize("case,in_axes,out_axes", VMAP_PARAMS, ids=VMAP_IDS)
def test_vmap_equals_loop_over_batch(case, in_axes, out_axes):
    members, stacked = batch_members(case, in_axes, seed=0)
    prog = spec.trace(case.fn, *[ArrayType(v.shape, v.dtype) for v in members[0]])
    if out_axes == "axis1":
        out_axes = [min(1, t.ndim) for t in prog.out_types]
    else:
        out_axes = [out_axes] * len(prog.outputs)
    try:
        vp = spec.vmap(prog, in_axes=in_axes, out_axes=out_axes, axis_size=B)
    except AxesRefused as e:     # JAX's rule refuses these axes too (tie)
        pytest.skip(f"JAX's batching rule refuses these batch dims too: {e}")
    spec.check_program(vp)
    # the batched program's types: the batch axis where in/out_axes say
    for t, v in zip(vp.in_types, stacked):
        assert tuple(t.shape) == v.shape and t.dtype == v.dtype
    for t, bt, oa in zip(prog.out_types, vp.out_types, out_axes):
        shape = list(t.shape)
        shape.insert(oa % (t.ndim + 1), B)
        assert bt == ArrayType(shape, t.dtype, t.memory_space), (bt, t)
    got = spec.evaluate(vp, *stacked)
    want = loop_reference(prog, members)
    assert len(got) == len(want)
    for g, w, oa in zip(got, want, out_axes):
        assert_batched_close(np.moveaxis(g, oa, 0), w)


def test_every_primitive_has_a_vmap_case():
    """Each primitive (sub-programs included) appears in some batched
    program above, so a new primitive needs a case here."""
    seen = set()

    def walk(prog):
        for e in prog.eqns:
            seen.add(e.primitive.name)
            for _, sub in subprograms(e.params):
                walk(sub)
    for case in VCASES:
        vals = case.make(np.random.default_rng(0))
        walk(spec.trace(case.fn, *[ArrayType(v.shape, v.dtype) for v in vals]))
    # primitives with registered Examples: vmap vs loop in tests/test_primitive_examples.py
    seen |= {p.name for p in spec.core.examples}
    # named collectives: vmap(axis_name=...) vs numpy in tests/test_prims_collective.py
    from test_prims_collective import NAMED_PROOFS
    seen |= set(NAMED_PROOFS)
    assert set(spec.primitives) - seen == set(NO_VMAP)


# custom_lin (the linear part of a custom_vjp, made by differentiation) has
# no batching rule in JAX either: it raises ad.raise_custom_vjp_error_on_jvp.
# Checked by test_custom_lin_cannot_be_batched instead of a vmap case.
NO_VMAP = {"custom_lin": "forward mode of a custom_vjp raises, batched or not"}


def test_custom_lin_cannot_be_batched():
    prog = spec.trace(custom_vjp_sin_mul, spec.f32[2, 3], spec.f32[3])
    jp = spec.jvp(prog)
    assert "custom_lin" in str(jp)
    with pytest.raises(TypeError, match="forward-mode autodiff"):
        spec.vmap(jp, 0, 0, axis_size=B)
    # reverse mode of the batched custom_vjp is fine (bwd batched)
    vp = spec.vjp_program(spec.vmap(prog, 0, 0, axis_size=B))
    spec.check_program(vp)


def test_vmap_with_no_batched_input_broadcasts_outputs():
    prog = spec.trace(lambda x: ops.sin(x), spec.f32[3])
    vp = spec.vmap(prog, in_axes=None, out_axes=1, axis_size=4)
    x = np.linspace(-1, 1, 3).astype(np.float32)
    got = spec.evaluate(vp, x)[0]
    assert got.shape == (3, 4)
    assert_batched_close(np.moveaxis(got, 1, 0), np.stack([spec.evaluate(prog, x)[0]] * 4))


def test_vmap_out_axes_none_for_unbatched_output():
    prog = spec.trace(lambda x, y: (ops.cos(x), x * y), spec.f32[3], spec.f32[3])
    vp = spec.vmap(prog, in_axes=[None, 0], out_axes=[None, 0], axis_size=2)
    x = np.arange(3, dtype=np.float32)
    y = np.arange(6, dtype=np.float32).reshape(2, 3)
    c, p = spec.evaluate(vp, x, y)
    assert_batched_close(c, np.cos(x))
    assert_batched_close(p, x * y)
    with pytest.raises(spec.BatchingError):
        spec.vmap(prog, in_axes=[0, 0], out_axes=[None, 0], axis_size=2)


@pytest.mark.parametrize("out_axes", [2, 5, -3, -7])
def test_vmap_out_axes_out_of_range_is_an_error(out_axes):
    """As for in_axes (and jax.vmap): an out_axes entry outside
    [-(ndim+1), ndim] of the batched output is an error, not wrapped."""
    prog = spec.trace(ops.sin, spec.f32[3])      # batched output: 2 dims
    with pytest.raises(spec.BatchingError, match="out_axes"):
        spec.vmap(prog, in_axes=0, out_axes=out_axes, axis_size=2)


def test_vmap_errors():
    prog = spec.trace(ops.add, spec.f32[3], spec.f32[3])
    with pytest.raises(spec.BatchingError, match="axis_size"):
        spec.vmap(prog, in_axes=0)
    with pytest.raises(spec.BatchingError, match="in_axes"):
        spec.vmap(prog, in_axes=[0], axis_size=2)
    with pytest.raises(spec.BatchingError, match="out of range"):
        spec.vmap(prog, in_axes=[2, 0], axis_size=2)


# ==========================================================================
# 3. batching and higher-order AD, with and without checkpoints and names

def maybe_name(x, name, named):
    return ops.checkpoint_name(x, name) if named else x


def mlp(x, W1, W2, named=True):
    h = maybe_name(ops.sin(x @ W1), "h", named)
    a = maybe_name(ops.tanh(h @ W2), "a", named)
    return ops.reduce_sum(a * a, (0,))


def attention_like(q, k, named=True):
    s = ops.dot_general(q, k, (((2,), (2,)), ((0,), (0,))))
    h = maybe_name(ops.exp(s * 0.5), "h", named)
    a = maybe_name(ops.logistic(h), "a", named)
    return ops.reduce_sum(a * h, (0, 1, 2))


def chain(x, y, named=True):
    h = maybe_name(ops.sin(x) * y, "h", named)
    a = maybe_name(ops.log1p(ops.square(h)), "a", named)
    return ops.reduce_sum(a * y + ops.cos(a), (0,))


PROGRAMS = {
    "mlp": (mlp, (spec.f64[3], spec.f64[3, 4], spec.f64[4, 2])),
    "attention_like": (attention_like, (spec.f64[2, 3, 2], spec.f64[2, 2, 2])),
    "chain": (chain, (spec.f64[4], spec.f64[4])),
}

AD_POLICIES = {
    "none": None,
    "dots_saveable": P.dots_saveable,
    "everything_saveable": P.everything_saveable,
    "save_only_h": P.save_only_these_names("h"),
}

# (program name, named, policy name or "plain" for no checkpoint)
VARIANTS = ([(p, named, "plain") for p in PROGRAMS for named in (True, False)]
            + [(p, named, pol) for p in PROGRAMS for named in (True, False) for pol in AD_POLICIES
               if named or pol != "save_only_h"])
VARIANT_IDS = [f"{p}-{'named' if named else 'unnamed'}-{pol}" for p, named, pol in VARIANTS]


def build(pname, named, policy):
    fn, types = PROGRAMS[pname]
    body = functools.partial(fn, named=named)
    if policy == "plain":
        return spec.trace(lambda *xs: body(*xs), *types)
    pol = AD_POLICIES[policy]
    return spec.trace(lambda *xs: ops.checkpoint(body, policy=pol)(*xs), *types)


def reference_program(pname):
    """The independent reference: no checkpoint, no names."""
    return build(pname, False, "plain")


def all_argnums(prog):
    return tuple(range(len(prog.inputs)))


def point(pname, seed=0):
    _, types = PROGRAMS[pname]
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.2, 1.0, t.shape) for t in types]


# float64 tolerance of a batched program against a loop of the same
# unbatched one: same operations, possibly another summation order, on O(1)
# values with <= ~10 terms per sum, so ~1e-15 relative; 1e-10 leaves margin
# and still catches any misplaced member or axis (O(1) errors).
LOOP_TOL_F64 = 1e-10


def assert_f64_close(got, want, tol):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


VG_AXES = {"all0": 0, "first-only": "first", "last": -1}


@pytest.mark.parametrize("axes", VG_AXES)
@pytest.mark.parametrize("pname,named,policy", VARIANTS, ids=VARIANT_IDS)
def test_vmap_of_grad_equals_loop_of_grad(pname, named, policy, axes):
    prog = build(pname, named, policy)
    g = spec.grad(prog, argnums=all_argnums(prog))
    n = len(prog.inputs)
    in_axes = [0] + [None] * (n - 1) if VG_AXES[axes] == "first" else [VG_AXES[axes]] * n
    rng = np.random.default_rng(4)
    members = [[rng.uniform(0.2, 1.0, t.shape) for t in prog.in_types] for _ in range(B)]
    for m in members[1:]:
        for i, a in enumerate(in_axes):
            if a is None:
                m[i] = members[0][i]
    stacked = [members[0][i] if a is None else np.stack([m[i] for m in members], axis=a)
               for i, a in enumerate(in_axes)]
    vg = spec.vmap(g, in_axes=in_axes, out_axes=0, axis_size=B)
    spec.check_program(vg)
    got = spec.evaluate(vg, *stacked)
    want = loop_reference(g, members)
    # and the loop of the plain (un-checkpointed, unnamed) program's grad
    plain = loop_reference(spec.grad(reference_program(pname), argnums=all_argnums(prog)), members)
    for a, w, p in zip(got, want, plain):
        assert_f64_close(a, w, LOOP_TOL_F64)
        assert_f64_close(a, p, LOOP_TOL_F64)


@pytest.mark.parametrize("pname,named,policy", VARIANTS, ids=VARIANT_IDS)
def test_grad_of_vmap_equals_loop_of_grad(pname, named, policy):
    """grad of sum(vmap(f)) (first input batched, the rest shared): the
    batched input's cotangent is the stack of per-member grads, a shared
    input's is their sum."""
    prog = build(pname, named, policy)
    n = len(prog.inputs)
    in_axes = [0] + [None] * (n - 1)
    vp = spec.vmap(prog, in_axes=in_axes, axis_size=B)
    total = spec.trace(lambda *xs: ops.reduce_sum(eval_program_traced(vp, *xs)[0], (0,)), *vp.in_types)
    gv = spec.grad(total, argnums=tuple(range(n)))
    spec.check_program(gv)
    rng = np.random.default_rng(5)
    xs = [rng.uniform(0.2, 1.0, t.shape) for t in vp.in_types]
    got = spec.evaluate(gv, *xs)
    g_plain = spec.grad(reference_program(pname), argnums=tuple(range(n)))
    per = [spec.evaluate(g_plain, xs[0][b], *xs[1:]) for b in range(B)]
    want = [np.stack([p[0] for p in per])] + [sum(p[i] for p in per) for i in range(1, n)]
    for a, w in zip(got, want):
        assert_f64_close(a, w, LOOP_TOL_F64)


# Finite differences of first derivatives (float64, central, step 1e-5 on
# inputs in [0.2, 1]): truncation h^2/6 |f'''| ~ 2e-11 * |f'''| and rounding
# ~eps64 * |f| / h ~ 2e-11 * |f|, with |f|, |f'''| <= ~1e2 for these
# programs: < 1e-8. A tolerance of 1e-6 (atol at the scale max(1, |value|))
# has >= 100x margin; a wrong second-order rule is off by O(1).
FD_STEP = 1e-5
FD_TOL = 1e-6


def fd_gradient(f, xs):
    """Central-difference gradient of scalar numpy function f at xs."""
    out = []
    for i, x in enumerate(xs):
        g = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            up, dn = [a.copy() for a in xs], [a.copy() for a in xs]
            up[i][idx] += FD_STEP
            dn[i][idx] -= FD_STEP
            g[idx] = (float(f(*up)) - float(f(*dn))) / (2 * FD_STEP)
        out.append(g)
    return out


def fd_directional(f, xs, ts):
    """Central difference of every output of f along ts."""
    up = f(*[x + FD_STEP * t for x, t in zip(xs, ts)])
    dn = f(*[x - FD_STEP * t for x, t in zip(xs, ts)])
    return [(u - d) / (2 * FD_STEP) for u, d in zip(up, dn)]


def weights(prog, seed=7):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=t.shape) for t in prog.in_types]


def grad_dot_v(g, vs):
    """The scalar program sum_i <v_i, g(x)_i> (v_i constants)."""
    def s(*xs):
        terms = [ops.reduce_sum(o * v, tuple(range(v.ndim)))
                 for o, v in zip(eval_program_traced(g, *xs), vs)]
        return functools.reduce(ops.add, terms)
    return spec.trace(s, *g.in_types)


@functools.lru_cache(maxsize=None)
def fd_hessian_vector(pname):
    """grad of <v, grad f> by finite differences of the plain grad program."""
    plain = reference_program(pname)
    g = spec.grad(plain, argnums=all_argnums(plain))
    vs = weights(plain)
    s = grad_dot_v(g, vs)
    return fd_gradient(lambda *xs: spec.evaluate(s, *xs)[0], point(pname))


@pytest.mark.parametrize("pname,named,policy", VARIANTS, ids=VARIANT_IDS)
def test_grad_of_grad_equals_finite_differences_of_grad(pname, named, policy):
    prog = build(pname, named, policy)
    g = spec.grad(prog, argnums=all_argnums(prog))
    s = grad_dot_v(g, weights(prog))
    gg = spec.grad(s, argnums=all_argnums(prog))
    spec.check_program(gg)
    got = spec.evaluate(gg, *point(pname))
    for a, w in zip(got, fd_hessian_vector(pname)):
        assert_f64_close(a, w, FD_TOL)


@pytest.mark.parametrize("pname,named,policy", VARIANTS, ids=VARIANT_IDS)
def test_jvp_of_grad_equals_finite_differences_of_grad(pname, named, policy):
    prog = build(pname, named, policy)
    g = spec.grad(prog, argnums=all_argnums(prog))
    jg = spec.jvp(g)
    spec.check_program(jg)
    xs, ts = point(pname), weights(prog, seed=8)
    outs = spec.evaluate(jg, *xs, *ts)
    n = len(g.outputs)
    g_plain = spec.grad(reference_program(pname), argnums=all_argnums(prog))
    want_primal = spec.evaluate(g_plain, *xs)
    want_tangent = fd_directional(lambda *a: spec.evaluate(g_plain, *a), xs, ts)
    for a, w in zip(outs[:n], want_primal):
        assert_f64_close(a, w, LOOP_TOL_F64)
    for a, w in zip(outs[n:], want_tangent):
        assert_f64_close(a, w, FD_TOL)


@pytest.mark.parametrize("pname,named,policy", VARIANTS, ids=VARIANT_IDS)
def test_vjp_of_jvp_equals_transposed_jacobian(pname, named, policy):
    """vjp of (x, t) -> (f(x), f'(x) t): the cotangents equal J^T ct, with J
    the Jacobian of the plain program's JVP by finite differences."""
    prog = build(pname, named, policy)
    jp = spec.jvp(prog)
    xs, ts = point(pname), weights(prog, seed=8)
    args = xs + ts
    outs, vjp_fn, _ = spec.vjp(jp, *args)
    ct = [np.float64(0.7), np.float64(-1.3)]
    got = vjp_fn(*ct)
    assert len(got) == len(args)
    jp_plain = spec.jvp(reference_program(pname))
    want = fd_gradient(lambda *a: sum(c * o for c, o in zip(ct, spec.evaluate(jp_plain, *a))), args)
    for a, w in zip(outs, spec.evaluate(jp_plain, *args)):
        assert_f64_close(a, w, LOOP_TOL_F64)
    for a, w in zip(got, want):
        assert_f64_close(a, w, FD_TOL)


OFFLOAD = P.save_and_offload_only_these_names(
    names_which_can_be_saved=["h"], names_which_can_be_offloaded=["a"],
    offload_src="device", offload_dst="pinned_host")


@pytest.mark.parametrize("order", ["grad_of_grad", "jvp_of_grad"])
def test_higher_order_ad_through_offloaded_residuals(order):
    """An offloading policy puts device_put equations into the grad program;
    differentiating that program again needs device_put's JVP (JAX: linear)."""
    fn, types = PROGRAMS["mlp"]
    prog = spec.trace(lambda *xs: ops.checkpoint(fn, policy=OFFLOAD)(*xs), *types)
    g = spec.grad(prog, argnums=all_argnums(prog))
    assert any(e.primitive is device_put_p for e in g.eqns)
    xs = point("mlp")
    if order == "grad_of_grad":
        gg = spec.grad(grad_dot_v(g, weights(prog)), argnums=all_argnums(prog))
        for a, w in zip(spec.evaluate(gg, *xs), fd_hessian_vector("mlp")):
            assert_f64_close(a, w, FD_TOL)
    else:
        ts = weights(prog, seed=8)
        outs = spec.evaluate(spec.jvp(g), *xs, *ts)
        g_plain = spec.grad(reference_program("mlp"), argnums=all_argnums(prog))
        for a, w in zip(outs[len(g.outputs):], fd_directional(lambda *a: spec.evaluate(g_plain, *a), xs, ts)):
            assert_f64_close(a, w, FD_TOL)


def test_device_put_is_linear():
    """JVP copies the tangent to the same memory; the transpose copies the
    cotangent back to the operand's memory (device)."""
    prog = spec.trace(lambda x: spec.core.bind(device_put_p, x, memory_space="pinned_host")[0], spec.f64[3])
    jp = spec.jvp(prog)
    assert [t.memory_space for t in jp.out_types] == ["pinned_host", "pinned_host"]
    x, t = np.array([1.0, -2.0, 0.5]), np.array([3.0, 4.0, -5.0])
    out, tan = spec.evaluate(jp, x, t)
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(tan, t)
    tp = spec.transpose(prog, [True])
    assert tp.out_types == [spec.f64[3]]
    np.testing.assert_array_equal(spec.evaluate(tp, t)[0], t)


def test_vmap_of_grad_with_offloaded_residuals():
    fn, types = PROGRAMS["mlp"]
    prog = spec.trace(lambda *xs: ops.checkpoint(fn, policy=OFFLOAD)(*xs), *types)
    g = spec.grad(prog, argnums=all_argnums(prog))
    rng = np.random.default_rng(9)
    members = [[rng.uniform(0.2, 1.0, t.shape) for t in types] for _ in range(B)]
    vg = spec.vmap(g, in_axes=0, axis_size=B)
    got = spec.evaluate(vg, *[np.stack(m) for m in zip(*members)])
    for a, w in zip(got, loop_reference(g, members)):
        assert_f64_close(a, w, LOOP_TOL_F64)


# ==========================================================================
# 4. vmap of a checkpointed program keeps its residuals' provenance

RES_POLICIES = {
    "none": None,
    "nothing_saveable": P.nothing_saveable,
    "dots_saveable": P.dots_saveable,
    "save_only_h": P.save_only_these_names("h"),
    "everything_saveable": P.everything_saveable,
}


def batched(t: ArrayType) -> ArrayType:
    return ArrayType((B,) + tuple(t.shape), t.dtype, t.memory_space)


@pytest.mark.parametrize("policy", RES_POLICIES)
@pytest.mark.parametrize("pname", PROGRAMS)
def test_vmap_keeps_residual_sources_with_leading_batch_dim(pname, policy):
    fn, types = PROGRAMS[pname]
    pol = RES_POLICIES[policy]
    prog = spec.trace(lambda *xs: ops.checkpoint(fn, policy=pol)(*xs), *types)
    res = spec.saved_residuals(prog)
    bres = spec.saved_residuals(spec.vmap(prog, in_axes=0, axis_size=B))
    assert [r.source for r in bres] == [r.source for r in res], (
        [str(r) for r in res], [str(r) for r in bres])
    assert [r.type for r in bres] == [batched(r.type) for r in res]


def batched_somewhere(bt: ArrayType, t: ArrayType) -> bool:
    """bt is t with a batch axis of size B inserted at some position."""
    return any(bt == ArrayType(t.shape[:k] + (B,) + t.shape[k:], t.dtype, t.memory_space)
               for k in range(t.ndim + 1))


# everything_saveable is left out here on purpose: with a shared input,
# batching itself adds equations (broadcast_batcher gives the unbatched
# operand of an elementwise op a size-1 leading axis with broadcast_in_dim,
# as JAX does), and saving everything then saves those new values too.
@pytest.mark.parametrize("policy", ["none", "nothing_saveable", "dots_saveable", "save_only_h"])
@pytest.mark.parametrize("pname", PROGRAMS)
def test_vmap_with_shared_inputs_keeps_residual_sources(pname, policy):
    """Only the first input batched: residuals that are shared arguments
    stay unbatched, the batched argument has its leading batch axis, and
    values computed from it carry the batch axis where the batching rules
    put it (a dot_general with one batched operand keeps it as a free dim,
    after the dot's batch dims, as in JAX)."""
    fn, types = PROGRAMS[pname]
    pol = RES_POLICIES[policy]
    prog = spec.trace(lambda *xs: ops.checkpoint(fn, policy=pol)(*xs), *types)
    res = spec.saved_residuals(prog)
    in_axes = [0] + [None] * (len(types) - 1)
    bres = spec.saved_residuals(spec.vmap(prog, in_axes=in_axes, axis_size=B))
    assert [r.source for r in bres] == [r.source for r in res], (
        [str(r) for r in res], [str(r) for r in bres])
    for r, br in zip(res, bres):
        if r.source.kind == "argument":
            shared = in_axes[r.source.index] is None
            assert br.type == (r.type if shared else batched(r.type)), (str(r), str(br))
        else:
            assert batched_somewhere(br.type, r.type), (str(r), str(br))


def test_vmap_keeps_offloaded_residuals_in_host_memory():
    fn, types = PROGRAMS["mlp"]
    prog = spec.trace(lambda *xs: ops.checkpoint(fn, policy=OFFLOAD)(*xs), *types)
    res = spec.saved_residuals(prog)
    bres = spec.saved_residuals(spec.vmap(prog, in_axes=0, axis_size=B))
    assert any(r.type.memory_space for r in res)
    assert [r.source for r in bres] == [r.source for r in res]
    assert [r.type for r in bres] == [batched(r.type) for r in res]


def test_a_batched_output_with_out_axes_none_raises_jax_s_error():
    """An output that must stay unbatched (out_axes None) but is batched:
    the spec raises JAX's ValueError in JAX's words, so a stack where both
    refuse (equinox's vprim transpose batching a buffer's cotangent, found
    by a pristine nightly, aaee1d8182) is `not applicable`, not a finding.
    JAX's message is read off JAX."""
    jax = pytest.importorskip("jax")
    from spec.batching import move_to
    with pytest.raises(ValueError) as jax_error:
        jax.vmap(lambda x: x, out_axes=None)(np.ones(2, np.float32))
    from oracle.checker import _same_reason
    with pytest.raises(ValueError) as spec_error:
        spec.trace(lambda x: move_to(x, 0, None, 2), spec.f32[2])
    assert _same_reason(spec_error.value, jax_error.value), (str(spec_error.value), str(jax_error.value))
