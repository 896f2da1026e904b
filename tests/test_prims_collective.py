"""The collectives psum / pmean / pmax / pmin (spec/prims_collective.py)
over a named vmap axis, and stack / unstack (spec/prims_stack.py), which
flax's cross-device BatchNorm emits next to them.

Expected values are independent of the code under test:

* spec-level (no JAX): `spec.vmap(prog, axis_name='i')` of a per-member
  program equals numpy on the stacked batch, written by hand (every member
  sees the reduction over all members); nested named vmaps, unbatched
  operands, collectives inside a checkpoint and a scan body; gradients
  against float64 finite differences of the summed loss; exact sympy
  adjoint identities for the transposes (psum positional and named, stack,
  unstack) and exact JVPs of batched named programs;
* with JAX: the spec's batched program has JAX's equations (JAX's jaxpr of
  `jax.vmap(f, axis_name=...)` imported by the oracle), the transpose
  leaves JAX's identity `psum[axes=()]`, and `oracle.check` of a loss
  written `jax.vmap(member_loss, axis_name='batch')` with `lax.pmean`
  agrees with JAX under every standard policy, remat2 and remat3.
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import spec
from spec import ops
from spec import prims_collective as C
from spec import prims_stack as S
from spec.symbolic import array

from test_primitives import fd_jvp
from test_rules_exact import directional_derivative, exactly_zero, inner

f64, f32 = spec.f64, spec.f32
B = 3
RNG = np.random.default_rng(0)


def _vmapped(fn, types, in_axes=0, axis_name="i", size=B):
    return spec.vmap(spec.trace(fn, *types), in_axes=in_axes, axis_size=size, axis_name=axis_name)


# ==========================================================================
# spec: named axes under vmap == numpy on the batch

# (member fn, member input types, in_axes, numpy reference on the stacked inputs
#  giving the stacked outputs (batch axis 0))
NAMED = {
    "psum": (lambda x: C.psum(x, "i") * x, [f64[2]], 0,
             lambda xs: xs.sum(0, keepdims=True) * xs),
    "psum-batch-axis-1": (lambda x: ops.sin(C.psum(x, "i")), [f64[2]], 1,
                          lambda xs: np.broadcast_to(np.sin(xs.sum(1)), (B, 2))),
    "pmean": (lambda x: x - C.pmean(x, "i", axis_size=B), [f64[2, 2]], 0,
              lambda xs: xs - xs.mean(0, keepdims=True)),
    "psum-named-and-positional": (lambda x: C.psum(x, ("i", 1)), [f64[2, 2]], 0,
                                  lambda xs: np.broadcast_to(xs.sum((0, 2)), (B, 2))),
    "psum-positional-only": (lambda x: C.psum(x, 0), [f64[2, 2]], 0, lambda xs: xs.sum(1)),
    "psum-unbatched-operand": (lambda x, c: C.psum(c, "i") * x, [f64[2], f64[2]], (0, None),
                               lambda xs, c: B * c * xs),
    "pmax": (lambda x: C.pmax(x, "i") - x, [f64[3]], 0, lambda xs: xs.max(0, keepdims=True) - xs),
    "pmin-batch-axis-1": (lambda x: C.pmin(x, ("i",)) * x, [f64[2]], 1,
                          lambda xs: xs.min(1)[None, :] * xs.T),
    "pmax-unbatched-operand": (lambda x, c: C.pmax(c, "i") + x, [f64[2], f64[2]], (0, None),
                               lambda xs, c: c + xs),
    "other-name-unbatched-stays": (lambda x: C.psum(x, "j"), [f64[2]], None, None),
    "all_gather": (lambda x: C.all_gather(x, "i", axis_size=B), [f64[2]], 0,
                   lambda xs: np.broadcast_to(xs, (B, B, 2))),
    "all_gather-axis1-batch-axis1": (lambda x: C.all_gather(x, "i", axis=1, axis_size=B), [f64[2]], 1,
                                     lambda xs: np.broadcast_to(xs, (B, 2, B))),
    "all_gather-batch-axis1": (lambda x: C.all_gather(x, "i", axis_size=B), [f64[2]], 1,
                               lambda xs: np.broadcast_to(xs.T, (B, B, 2))),
    "all_gather-tiled": (lambda x: C.all_gather(x, "i", tiled=True, axis_size=B), [f64[2, 2]], 0,
                         lambda xs: np.broadcast_to(xs.reshape(2 * B, 2), (B, 2 * B, 2))),
    "all_gather-unbatched-operand": (lambda x, c: C.all_gather(c, "i", axis_size=B) * 2.0, [f64[2], f64[2]],
                                     (0, None), lambda xs, c: np.broadcast_to(2.0 * c, (B, B, 2))),
    "psum_scatter": (lambda x: C.psum_scatter(x, "i", axis_size=B), [f64[B, 2]], 0, lambda xs: xs.sum(0)),
    "psum_scatter-dim1-batch-axis2": (lambda x: C.psum_scatter(x, "i", scatter_dimension=1, axis_size=B),
                                      [f64[2, B]], 2, lambda xs: np.moveaxis(xs.sum(2), 1, 0)),
    "psum_scatter-tiled": (lambda x: C.psum_scatter(x, "i", tiled=True, axis_size=B), [f64[2 * B]], 0,
                           lambda xs: xs.sum(0).reshape(B, 2)),
    "psum_scatter-unbatched-operand": (lambda x, c: C.psum_scatter(c, "i", axis_size=B) + x, [f64[2], f64[B, 2]],
                                       (0, None), lambda xs, c: B * c + xs),
    "axis_index": (lambda x: ops.convert_element_type(C.axis_index("i"), np.float64) * x, [f64[2]], 0,
                   lambda xs: np.arange(B)[:, None] * xs),
}


@pytest.mark.parametrize("name", sorted(k for k, v in NAMED.items() if v[3] is not None))
def test_named_vmap_equals_numpy(name):
    fn, types, in_axes, ref = NAMED[name]
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(types)
    stacked = [RNG.normal(size=t.shape if a is None else t.shape[:a] + (B,) + t.shape[a:]) for t, a in zip(types, axes)]
    prog = spec.vmap(spec.trace(fn, *types), in_axes=list(axes), out_axes=0, axis_size=B, axis_name="i")
    assert not any(isinstance(a, str) for e in prog.eqns for a in e.params.get("axes", ())), \
        "the named axis must be batched away"
    (got,) = spec.evaluate(prog, *stacked)
    np.testing.assert_allclose(got, ref(*stacked), rtol=1e-13, atol=1e-13)


def test_nested_named_vmaps():
    """vmap 'j' inside vmap 'i': psum over ('i', 'j') sums the whole grid,
    over 'i' alone the column of each j, as JAX's nested vmaps do."""
    both = spec.trace(lambda x: C.psum(x, ("i", "j")) - x, f64[2])
    only_i = spec.trace(lambda x: C.psum(x, "i") * x, f64[2])
    xs = RNG.normal(size=(3, 4, 2))
    for prog, ref in ((both, xs.sum((0, 1), keepdims=True) - xs), (only_i, xs.sum(0, keepdims=True) * xs)):
        inner_prog = spec.vmap(prog, axis_size=4, axis_name="j")
        outer = spec.vmap(inner_prog, axis_size=3, axis_name="i")
        np.testing.assert_allclose(spec.evaluate(outer, xs)[0], ref, rtol=1e-13)


def test_nested_gather_and_scatter():
    """A collective over the outer name, batched first by the inner vmap
    (`_all_gather_batcher` / `_reduce_scatter_batcher`: another name's
    batch dim), then by the outer one."""
    xs = RNG.normal(size=(3, 2, 4))                    # i: 3, j: 4 (in axis 2 of each i-member)
    gather = spec.trace(lambda x: C.all_gather(x, "i", axis_size=3), f64[2])
    prog = spec.vmap(spec.vmap(gather, in_axes=1, axis_size=4, axis_name="j"), axis_size=3, axis_name="i")
    (got,) = spec.evaluate(prog, xs)                   # [i, j, k, :] = member (k, j)
    np.testing.assert_allclose(got, np.broadcast_to(np.moveaxis(xs, 2, 0)[None], (3, 4, 3, 2)), rtol=0)
    # the scatter dim before the inner batch dim: JAX's batcher fails here (see below)
    scatter = spec.trace(lambda x: C.psum_scatter(x, "i", axis_size=3), f64[3, 2])
    ys = RNG.normal(size=(3, 3, 4, 2))                 # i-member: (3, 4j, 2), j batched along 1
    prog = spec.vmap(spec.vmap(scatter, in_axes=1, axis_size=4, axis_name="j"), axis_size=3, axis_name="i")
    (got,) = spec.evaluate(prog, ys)                   # [i, j, :] = sum_k ys[k, i, j, :]
    np.testing.assert_allclose(got, ys.sum(0), rtol=1e-13)


def test_named_axis_reaches_checkpoint_and_scan_bodies():
    """A checkpoint's body and a scan's body are batched along the same,
    named, axis (the sub-programs' vmaps inherit the name)."""
    def member(x):
        y = ops.checkpoint(lambda a: C.psum(ops.sin(a), "i") * a)(x)
        _, ys = spec.scan(lambda c, r: (c + C.psum(r, "i"), c * r), np.float64(0.0), x)
        return y + ys
    xs = RNG.normal(size=(B, 2))
    (got,) = spec.evaluate(_vmapped(member, [f64[2]]), xs)
    s = np.sin(xs).sum(0)
    col = xs.sum(0)                                    # psum of each scanned row
    carry = np.array([0.0, col[0]])                    # carry before rows 0 and 1
    np.testing.assert_allclose(got, s * xs + carry * xs, rtol=1e-13)


def test_gradient_of_named_loss_is_the_summed_loss_gradient():
    """vmap(grad(member)) with a psum inside: psum's transpose psums the
    cotangent again (psum + pbroadcast), so each member gets the gradient
    of the *summed* loss w.r.t. its own input -- JAX's semantics -- here
    against float64 finite differences of sum_b loss_b."""
    member = spec.trace(lambda x: ops.reduce_sum(ops.sin(x * C.psum(x, "i")), (0,)), f64[2])
    grad = spec.vmap(spec.grad(member), axis_size=B, axis_name="i")
    xs = RNG.normal(size=(B, 2))
    (got,) = spec.evaluate(grad, xs)

    def total(xs):
        return np.sum(np.sin(xs * xs.sum(0, keepdims=True)))
    want = np.zeros_like(xs)
    for idx in np.ndindex(*xs.shape):
        e = np.zeros_like(xs)
        e[idx] = 1.0
        want[idx] = fd_jvp(total, [xs], [e], [0])[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_unbound_name_refuses_to_evaluate():
    prog = spec.trace(lambda x: C.psum(x, "i"), f32[2])
    with pytest.raises(spec.PrimitiveError, match="not bound"):
        spec.evaluate(prog, np.ones(2, np.float32))
    with pytest.raises(spec.PrimitiveError, match="axis names"):
        spec.trace(lambda x: C.pmean(x, 0), f32[2])
    with pytest.raises(spec.PrimitiveError, match="needs axis_size"):
        spec.trace(lambda x: C.pmean(x, "i"), f32[2])
    with pytest.raises(spec.PrimitiveError, match="distinct dims"):
        spec.trace(lambda x: C.psum(x, 1), f32[2])
    with pytest.raises(spec.PrimitiveError, match="numeric"):
        spec.trace(lambda x: C.psum(x > 0.0, 0), f32[2])
    with pytest.raises(spec.BatchingError, match="axis_name"):
        spec.vmap(prog, axis_size=2, axis_name=0)


@pytest.mark.parametrize("op", [C.pmax, C.pmin])
def test_pmax_pmin_have_no_derivative_as_in_jax(op):
    prog = spec.trace(lambda x: op(x, 0), f32[2])
    with pytest.raises(NotImplementedError, match=f"Differentiation rule for '{op.__name__}' not implemented"):
        spec.jvp(prog)
    # a zero tangent never reaches the rule (JAX's JVPTrace binds the primal)
    stopped = spec.trace(lambda x: op(ops.stop_gradient(x), 0) * x, f32[2])
    spec.jvp(stopped)


# ==========================================================================
# exact: adjoint identities and JVPs in sympy

ADJOINT = {
    "psum-positional": (lambda x: C.psum(x, (0, 2)), [f64[2, 2, 2]], None),
    "psum-no-axes": (lambda x: C.psum(x, ()), [f64[3]], None),
    "psum-named-vmapped": (lambda x: C.psum(x, "i") * 2.0, [f64[2]], "i"),
    "psum-named-and-positional-vmapped": (lambda x: C.psum(x, (1, "i")), [f64[2, 2]], "i"),
    "stack": (lambda a, b: S.stack([a, b], 1), [f64[2], f64[2]], None),
    "unstack": (lambda x: S.unstack(x, 1), [f64[2, 3]], None),
    "unstack-vmapped": (lambda x: S.unstack(x, 0), [f64[2, 2]], "i"),
    "all_gather-vmapped": (lambda x: C.all_gather(x, "i", axis=1, axis_size=2), [f64[2, 1]], "i"),
    "all_gather-tiled-vmapped": (lambda x: C.all_gather(x, "i", tiled=True, axis_size=2), [f64[2]], "i"),
    "psum_scatter-vmapped": (lambda x: C.psum_scatter(x, "i", scatter_dimension=1, axis_size=2),
                             [f64[1, 2]], "i"),
    "psum_scatter-tiled-vmapped": (lambda x: C.psum_scatter(x, "i", tiled=True, axis_size=2), [f64[4]], "i"),
}

# the named collectives' exact proofs are here (tests/test_rules_exact.py counts them)
NAMED_PROOFS = {"all_gather": ("all_gather-vmapped", "all_gather-tiled-vmapped"),
                "reduce_scatter": ("psum_scatter-vmapped", "psum_scatter-tiled-vmapped"),
                "axis_index": ("no operands: nothing to differentiate or transpose; "
                               "test_named_vmap_equals_numpy[axis_index]",)}


def test_named_proofs_bind_their_primitive():
    for name, cases in NAMED_PROOFS.items():
        for case in cases:
            if case in ADJOINT:
                fn, types, _ = ADJOINT[case]
                assert name in {e.primitive.name for e in spec.trace(fn, *types).eqns}, case


@pytest.mark.parametrize("name", sorted(ADJOINT))
def test_transpose_is_exact_adjoint(name):
    fn, types, axis = ADJOINT[name]
    prog = spec.trace(fn, *types)
    if axis is not None:
        prog = spec.vmap(prog, axis_size=2, axis_name=axis)
    args = [array(f"x{i}_", t.shape) for i, t in enumerate(prog.in_types)]
    ybar = [array(f"ybar{i}_", t.shape) for i, t in enumerate(prog.out_types)]
    tp = spec.transpose(prog, [True] * len(args))
    diff = inner(ybar, spec.evaluate(prog, *args)) - inner(spec.evaluate(tp, *ybar), args)
    assert exactly_zero(diff), sympy.expand(diff)


def test_jvp_of_batched_named_program_is_exact():
    """d/dt of vmap(x * pmean(x^2)) is sympy.diff of its evaluation."""
    prog = _vmapped(lambda x: ops.sin(x) * C.pmean(x * x, "i", axis_size=2), [f64[2]], size=2)
    xs, ts = array("x", (2, 2)), array("t", (2, 2))
    primal = spec.evaluate(prog, xs)[0]
    tangent = spec.evaluate(spec.jvp(prog), xs, ts)[1]
    for idx in np.ndindex(2, 2):
        want = directional_derivative(primal[idx], [xs], [ts], [0])
        assert exactly_zero(sympy.sympify(tangent[idx]) - want)


def test_transpose_leaves_jaxs_identity_psum():
    """psum's transpose broadcasts the cotangent back over the positional
    axes, then psums over the named ones: none, so psum[axes=()] (JAX's
    grad jaxpr of jax.vmap(..., axis_name) shows the same equation)."""
    prog = spec.trace(lambda x: ops.reduce_sum(ops.sin(C.psum(x, (0,))), (0,)), f32[3, 2])
    psums = [e.params["axes"] for e in spec.grad(prog).eqns if e.primitive is C.psum_p]
    assert psums == [(0,), ()]


# ==========================================================================
# with JAX

def _jax():
    return pytest.importorskip("jax")


def _jax_members():
    """name -> (spec member fn, jax member fn, member input types)."""
    from jax import lax
    import jax.numpy as jnp
    return {
        "pmean": (lambda x: x - C.pmean(x, "b", axis_size=B), lambda x: x - lax.pmean(x, "b"), [f32[2]]),
        "psum-mul": (lambda x: C.psum(x, "b") * x, lambda x: lax.psum(x, "b") * x, [f32[2, 2]]),
        "psum-named-and-positional": (lambda x: C.psum(x, ("b", 0)), lambda x: lax.psum(x, ("b", 0)), [f32[2, 2]]),
        "pmax": (lambda x: C.pmax(x, "b") - x, lambda x: lax.pmax(x, "b") - x, [f32[3]]),
        "pmin": (lambda x: C.pmin(x, "b") * x, lambda x: lax.pmin(x, "b") * x, [f32[3]]),
        "stack-pmean": (lambda x: C.pmean(S.stack([x, x * x], 0), "b", axis_size=B),
                        lambda x: lax.pmean(jnp.stack([x, x * x]), "b"), [f32[2]]),
        "all_gather": (lambda x: C.all_gather(x, "b", axis=1, axis_size=B),
                       lambda x: lax.all_gather(x, "b", axis=1), [f32[2, 2]]),
        "all_gather-tiled": (lambda x: C.all_gather(x, "b", tiled=True, axis_size=B),
                             lambda x: lax.all_gather(x, "b", tiled=True), [f32[2, 2]]),
        "psum_scatter": (lambda x: C.psum_scatter(x, "b", scatter_dimension=1, axis_size=B),
                         lambda x: lax.psum_scatter(x, "b", scatter_dimension=1), [f32[2, B]]),
        "psum_scatter-tiled": (lambda x: C.psum_scatter(x, "b", tiled=True, axis_size=B),
                               lambda x: lax.psum_scatter(x, "b", tiled=True), [f32[2 * B]]),
        "axis_index": (lambda x: ops.convert_element_type(C.axis_index("b"), np.float32) * x,
                       lambda x: lax.axis_index("b") * x, [f32[2]]),
    }


@pytest.mark.parametrize("in_axis", [0, 1])
@pytest.mark.parametrize("name", ["pmean", "psum-mul", "psum-named-and-positional", "pmax", "pmin", "stack-pmean",
                                  "all_gather", "all_gather-tiled", "psum_scatter", "psum_scatter-tiled",
                                  "axis_index"])
def test_spec_vmap_has_jaxs_equations(name, in_axis):
    jax = _jax()
    import oracle
    spec_fn, jax_fn, types = _jax_members()[name]
    in_axis = min(in_axis, types[0].ndim)
    mine = spec.vmap(spec.trace(spec_fn, *types), in_axes=in_axis, out_axes=0, axis_size=B, axis_name="b")
    shape = list(types[0].shape)
    shape.insert(in_axis, B)
    x = RNG.normal(size=shape).astype(np.float32)
    theirs = oracle.from_jaxpr(jax.make_jaxpr(jax.vmap(jax_fn, in_axes=in_axis, axis_name="b"))(x))
    assert [(e.primitive.name, e.params.get("axes")) for e in mine.eqns] == \
           [(e.primitive.name, e.params.get("axes")) for e in theirs.eqns]
    np.testing.assert_allclose(spec.evaluate(mine, x)[0], spec.evaluate(theirs, x)[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(jax.vmap(jax_fn, in_axes=in_axis, axis_name="b")(x)),
                               spec.evaluate(mine, x)[0], rtol=1e-6, atol=1e-6)


def test_jax_reduce_scatter_batcher_fails_where_the_spec_does_not():
    """Recorded jax 0.10.2 behaviour: `_reduce_scatter_batcher` (a vmap over
    another name) moves a batch dim that follows a non-tiled scatter dim up
    (`d += 1`) although the scatter dim is removed, and tracing fails with
    IndexError. The spec's rule moves it down; its value is numpy's
    (test_nested_gather_and_scatter)."""
    jax = _jax()
    from jax import lax
    f = jax.vmap(jax.vmap(lambda m: lax.psum_scatter(m, "i"), in_axes=1, axis_name="j"), axis_name="i")
    with pytest.raises(IndexError):
        f(np.zeros((3, 3, 4, 2), np.float32))
    scatter = spec.trace(lambda x: C.psum_scatter(x, "i", axis_size=3), f32[3, 2])
    prog = spec.vmap(spec.vmap(scatter, in_axes=1, axis_size=4, axis_name="j"), axis_size=3, axis_name="i")
    assert prog.out_types[0].shape == (3, 4, 2)


def _batchnorm_loss():
    """BatchNorm statistics across the batch, as flax's cross-device
    BatchNorm computes them (lax.pmean of stacked moments), under
    jax.vmap(axis_name='batch')."""
    jax = _jax()
    import jax.numpy as jnp
    from jax import lax

    def member_loss(w, x):
        h = jnp.tanh(x @ w)
        mean, mean2 = lax.pmean(jnp.stack([h, h * h]), "batch")
        y = (h - mean) * lax.rsqrt(mean2 - mean * mean + 1e-5)
        return jnp.sum(jnp.sin(y)) + 0.1 * lax.psum(jnp.sum(y * y), "batch")

    def loss(w, xs):
        return jnp.mean(jax.vmap(member_loss, in_axes=(None, 0), axis_name="batch")(w, xs))

    def loss_checkpointed_member(w, xs):
        return jnp.mean(jax.vmap(jax.checkpoint(member_loss), in_axes=(None, 0), axis_name="batch")(w, xs))
    return {"vmap-outside": loss, "checkpoint-inside-vmap": loss_checkpointed_member}


POLICIES = ["None", "dots_saveable", "dots_with_no_batch_dims_saveable", "everything_saveable", "nothing_saveable"]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("which", ["vmap-outside", "checkpoint-inside-vmap"])
def test_oracle_check_pmean_under_vmap(which, policy):
    jax = _jax()
    import oracle
    loss = _batchnorm_loss()[which]
    w = RNG.normal(size=(4, 3)).astype(np.float32)
    xs = RNG.normal(size=(5, 4)).astype(np.float32)
    pol = None if policy == "None" else getattr(jax.checkpoint_policies, policy)
    report = oracle.check(loss, pol, w, xs)
    impls = {r.implementation for r in report.results if r.status == "ok"}
    assert impls == {"remat2", "remat3"}, str(report)
