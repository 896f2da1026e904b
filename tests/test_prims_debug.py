"""jax.debug.print under remat (spec/prims_debug.py), against what jax
0.10.2 does, recorded by tests/record_jax_debug_print.py in
tests/recordings/debug_print.json: how many times the print runs in
grad(checkpoint(f, policy)), and how many debug_print equations the
forward pass and the differentiated checkpoint (the backward pass) hold.

The spec-level tests import no jax: the recorded programs are written here
with spec ops. With jax: oracle.check of losses that print, under every
standard policy, remat2 and remat3, and vmap's unrolled prints.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import spec
from spec import ops, policies as P
from spec.prims_debug import count_prints, debug_print, debug_print_p

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "recordings", "debug_print.json")) as f:
    RECORDED = json.load(f)

f32 = spec.f32
X = np.linspace(-1.0, 1.0, 3, dtype=np.float32)
M, W = np.ones((2, 3), np.float32), np.full((3, 2), 0.5, np.float32)


def print_intermediate(x):
    s = ops.checkpoint_name(ops.sin(x), "s")
    debug_print(s, fmt="s={s}", kwarg_names=("s",))
    return ops.reduce_sum(s * x, (0,))


def print_input(x):
    debug_print(x, fmt="x={}")
    return ops.reduce_sum(ops.sin(x), (0,))


def print_dot(x, w):
    y = x @ w
    debug_print(y, fmt="y={}")
    return ops.reduce_sum(y, (0, 1))


PROGRAMS = {"print_intermediate": (print_intermediate, (X,)), "print_input": (print_input, (X,)),
            "print_dot": (print_dot, (M, W))}
POLICIES = {"none": None, "dots_saveable": P.dots_saveable, "everything_saveable": P.everything_saveable,
            "save_s": P.save_only_these_names("s")}


def _grad(name, policy):
    fn, args = PROGRAMS[name]
    types = [spec.ArrayType(a.shape, a.dtype) for a in args]
    pol = POLICIES[policy]
    if policy == "save_s" and name != "print_intermediate":
        pol = P.nothing_saveable    # what JAX's save_only_these_names('s') is without an 's' (the
                                    # spec's builder refuses a policy naming an unbound name)
    prog = spec.trace(lambda *xs: ops.checkpoint(fn, policy=pol)(*xs), *types)
    return spec.grad(prog, tuple(range(len(args)))), args


def _placement(prog, inside=False):
    """(debug_print equations outside any differentiated remat, inside one)."""
    out = [0, 0]
    for e in prog.eqns:
        if e.primitive is debug_print_p:
            out[inside] += 1
        for _, sub in spec.ir.subprograms(e.params):
            a, b = _placement(sub, inside or (e.primitive.name == "remat" and e.params.get("differentiated")))
            out[0] += a
            out[1] += b
    return out


@pytest.mark.parametrize("case", sorted(RECORDED["programs"]))
def test_prints_as_jax_does_under_remat(case):
    name, policy = case.split("/")
    grad, args = _grad(name, policy)
    want = RECORDED["programs"][case]
    assert count_prints(grad, *args) == want["prints"]
    assert _placement(grad) == [want["forward"], want["backward"]]


def test_no_checkpoint_prints_once():
    prog = spec.trace(print_intermediate, f32[3])
    assert count_prints(spec.grad(prog), X) == 1
    assert count_prints(spec.vjp_program(prog), X, np.float32(1.0)) == 1


def test_dce_keeps_the_print_and_only_it():
    prog = spec.trace(lambda x: (debug_print(ops.sin(x), fmt="{}"), ops.cos(x) * 0.0 + x)[1], f32[2])
    pruned, _ = spec.dce(prog)
    assert [e.primitive.name for e in pruned.eqns] == ["sin", "debug_print", "cos", "mul", "add"]
    unused = spec.trace(lambda x: (debug_print(x, fmt="{}"), ops.exp(x), x)[2], f32[2])
    assert [e.primitive.name for e in spec.dce(unused)[0].eqns] == ["debug_print"]


def test_printing_a_saved_dot_makes_it_a_residual():
    """Under dots_saveable the backward pass prints the dot output, which
    reduce_sum's transpose would not need: the print makes it a residual
    (JAX: the differentiated remat reads it, recorded above)."""
    grad, _ = _grad("print_dot", "dots_saveable")
    fn = lambda x, w: ops.checkpoint(print_dot, policy=P.dots_saveable)(x, w)
    res = spec.saved_residuals(spec.trace(fn, f32[2, 3], f32[3, 2]))
    assert "f32[2,2] output of dot_general" in [str(r) for r in res]
    quiet = lambda x, w: ops.checkpoint(lambda a, b: ops.reduce_sum(a @ b, (0, 1)), policy=P.dots_saveable)(x, w)
    assert "f32[2,2] output of dot_general" not in [str(r) for r in spec.saved_residuals(
        spec.trace(quiet, f32[2, 3], f32[3, 2]))]


def test_vmap_unrolls_one_print_per_member():
    prog = spec.trace(lambda x, c: (debug_print(x, c, fmt="{} {}"), x * c)[1], f32[2], f32[2])
    batched = spec.vmap(prog, in_axes=(0, None), axis_size=3)
    assert [e.primitive.name for e in batched.eqns].count("debug_print") == 3
    assert count_prints(batched, np.ones((3, 2), np.float32), np.ones(2, np.float32)) == 3


def test_in_tree_must_fit_the_operands():
    with pytest.raises(spec.PrimitiveError, match="in_tree"):
        spec.trace(lambda x: spec.core.bind(debug_print_p, x, fmt="{}", ordered=False, partitioned=False,
                                            in_tree=(2, ()), static_args=(), np_printoptions=(),
                                            has_placeholders=True), f32[2])


# ==========================================================================
# with JAX

def _jax():
    return pytest.importorskip("jax")


def test_vmap_matches_jaxs_unrolled_prints():
    jax = _jax()
    import oracle

    def f(x, c):
        jax.debug.print("{} {}", x, c)
        return x * c
    x, c = np.ones((3, 2), np.float32), np.ones(2, np.float32)
    theirs = oracle.from_jaxpr(jax.make_jaxpr(jax.vmap(f, in_axes=(0, None)))(x, c))
    prog = spec.trace(lambda x, c: (debug_print(x, c, fmt="{} {}"), x * c)[1], f32[2], f32[2])
    mine = spec.vmap(prog, in_axes=(0, None), axis_size=3)
    assert [e.primitive.name for e in mine.eqns] == [e.primitive.name for e in theirs.eqns]


def _losses():
    jax = _jax()
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name

    def mlp(w1, w2, x):
        h = checkpoint_name(jnp.tanh(x @ w1), "h")
        jax.debug.print("h mean {m}, first {f}", m=jnp.mean(h), f=h[0, 0])
        out = h @ w2
        jax.debug.print("loss parts {}", out)
        return jnp.sum(jnp.sin(out))
    return mlp


@pytest.mark.parametrize("policy", ["None", "dots_saveable", "dots_with_no_batch_dims_saveable",
                                    "everything_saveable", "save_h"])
def test_oracle_check_loss_that_prints(policy, capsys):
    jax = _jax()
    import oracle
    rng = np.random.default_rng(0)
    w1, w2 = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(4, 2)).astype(np.float32)
    x = rng.normal(size=(2, 3)).astype(np.float32)
    pol = {"None": None, "save_h": jax.checkpoint_policies.save_only_these_names("h")}.get(
        policy) or getattr(jax.checkpoint_policies, policy, None)
    report = oracle.check(_losses(), pol, w1, w2, x)
    assert {r.implementation for r in report.results if r.status == "ok"} == {"remat2", "remat3"}, str(report)
