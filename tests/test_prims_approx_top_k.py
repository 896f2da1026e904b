"""approx_top_k (lax.approx_max_k / approx_min_k; spec/prims_reductions.py).

Off TPU XLA computes it exactly (ApproxTopK's fallback is a sort): values
and indices against numpy's stable argsort here, and against jax 0.10.2
through oracle.check (values, JVP, VJP, vmap, second order, residuals --
JAX's JVP rule binds the primitive again and gathers the tangent with
jnp.take_along_axis, a jit of its own, whose known half a linearization
hoists: the residuals are JAX's only if the spec's rule has that shape)."""
from __future__ import annotations

import numpy as np
import pytest

import spec
from spec.prims_reductions import approx_max_k, approx_min_k

RNG = np.random.default_rng(0)
X = RNG.normal(size=(3, 5)).astype(np.float32)
Y = RNG.normal(size=(2, 4, 3)).astype(np.float32)


def _stable_top(x, k, axis, largest):
    moved = np.moveaxis(x, axis, -1)
    order = np.argsort(-moved if largest else moved, axis=-1, kind="stable")[..., :k]
    return (np.moveaxis(np.take_along_axis(moved, order, -1), -1, axis),
            np.moveaxis(order, -1, axis).astype(np.int32))


@pytest.mark.parametrize("largest", [True, False])
def test_ties_keep_the_earlier_index(largest):
    x = np.array([[1, 3, 3, 2, 0], [0, 0, 5, 1, 5]], np.float32)
    fn = approx_max_k if largest else approx_min_k
    values, indices = spec.evaluate(spec.trace(lambda a: fn(a, 2), spec.f32[2, 5]), x)
    want_v, want_i = _stable_top(x, 2, 1, largest)
    np.testing.assert_array_equal(values, want_v)
    np.testing.assert_array_equal(indices, want_i)


def test_aggregate_to_topk_false_is_refused():
    with pytest.raises(spec.PrimitiveError, match="aggregate_to_topk=False"):
        spec.trace(lambda a: approx_max_k(a, 2, aggregate_to_topk=False), spec.f32[3, 5])


@pytest.mark.parametrize("old", ["approx_top_k", "top_k"])
def test_the_old_jvp_rules_gather_the_same_tangents(old):
    """spec.semantics' older top_k / approx_top_k JVP rules (indices of
    every dimension, concatenated) gather what the new ones do: the tangent
    at the top-k indices, numpy's take_along_axis (a different program,
    the same values)."""
    from spec.prims_reductions import top_k
    from spec.semantics import following
    y = RNG.normal(size=(2, 4, 3)).astype(np.float32)
    t = RNG.normal(size=y.shape).astype(np.float32)
    fn, axis = ((lambda a: approx_max_k(a, 2, reduction_dimension=1), 1) if old == "approx_top_k"
                else (lambda a: top_k(a, 2, 2), 2))
    prog = spec.trace(lambda a: [fn(a)[0]], spec.f32[2, 4, 3])
    choice = {"approx_top_k": "approx_top_k_jvp_takes_along_axis", "top_k": "top_k_jvp_batches_its_gather"}[old]
    with following(**{choice: False}):
        jvp = spec.jvp(prog)
    assert "concatenate" in str(jvp) and "take_along_axis" not in str(jvp)
    _, tangent = spec.evaluate(jvp, y, t)
    _, indices = _stable_top(y, 2, axis, largest=True)
    np.testing.assert_array_equal(tangent, np.take_along_axis(t, indices, axis))


@pytest.mark.parametrize("shape, dimension, num_keys", [((5,), 0, 1), ((3, 2), 0, 1), ((2, 4, 3), 1, 2)])
def test_the_old_sort_jvp_rule_gathers_the_same_tangents(shape, dimension, num_keys):
    """spec.semantics' older sort JVP rule (sort_jvp_gathers_along_its_dimension
    =False: `t[idx]` through jnp indexing) gathers what the new one does,
    each operand's tangent in the sorted order (numpy's stable argsort of
    the keys, lexicographic), and binds the equations jax 0.4.36's jvp
    jaxpr of lax.sort binds, in its order (recorded from
    jax.make_jaxpr(jvp of lax.sort) on 0.4.25 and 0.4.36, one operand of
    rank 1: iota, sort, lt, add, select_n, broadcast_in_dim, gather)."""
    from spec.prims_reductions import sort
    from spec.semantics import following
    keys = RNG.permutation(np.prod(shape)).reshape(shape).astype(np.float32)   # no ties
    ops = [keys] + [RNG.normal(size=shape).astype(np.float32) for _ in range(num_keys)]
    tangents = [RNG.normal(size=shape).astype(np.float32) for _ in ops]
    prog = spec.trace(lambda *xs: sort(list(xs), dimension, True, num_keys), *[spec.f32[shape]] * len(ops))
    with following(sort_jvp_gathers_along_its_dimension=False):
        jvp = spec.jvp(prog)
    outs = spec.evaluate(jvp, *ops, *tangents)
    order = np.argsort(keys, axis=dimension, kind="stable")
    for t, got in zip(tangents, outs[len(ops):]):
        np.testing.assert_array_equal(got, np.take_along_axis(t, order, dimension))
    if shape == (5,):
        names = [e.primitive.name for e in jvp.eqns]
        assert names == ["iota", "sort", "lt", "add", "select_n", "broadcast_in_dim", "gather",
                         "lt", "add", "select_n", "broadcast_in_dim", "gather"][:len(names)], names


jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import oracle  # noqa: E402

CASES = {
    "max_k in the middle of a program": (lambda x: jnp.sin(lax.approx_max_k(jnp.cos(x), 2)[0]), X),
    "min_k over axis 0": (lambda x: lax.approx_min_k(x * 2.0, 2, reduction_dimension=0)[0].sum(), X),
    "max_k over a middle axis, negative": (lambda y: jnp.tanh(lax.approx_max_k(y, 2, reduction_dimension=-2)[0]), Y),
    "indices and values as outputs": (lambda x: (lax.approx_max_k(x, 2)[1], lax.approx_min_k(x, 1)[0]), X),
}


@pytest.mark.parametrize("name", CASES)
def test_jax_agrees(name):
    fn, arg = CASES[name]
    oracle.check(fn, oracle.AS_IS, arg)          # raises Mismatch on any disagreement


@pytest.mark.parametrize("policy", ["nothing_saveable", "everything_saveable", "dots_saveable"])
def test_under_a_checkpoint(policy):
    def f(x):
        return lax.approx_max_k(jnp.sin(x), 3)[0] * 2.0
    report = oracle.check(f, getattr(jax.checkpoint_policies, policy), X)
    assert all(r.status in ("ok", "known divergence", "not compared", "not applicable", "not checked")
               for r in report.results), str(report)


def _saves_adds(prim, *_, **__):
    """A user policy saving every `add` (the old JVP rule's normalised indices)."""
    return prim.name == "add"


ANSWERED = ("ok", "known divergence", "not compared", "not applicable", "not checked")


def test_a_policy_saving_the_old_rule_s_index_arithmetic():
    """Before jax 0.7.1 the JVP rule indexes `tangent[idx]`, whose index
    normalisation (lt, add, select_n per dimension) a policy saving `add`
    saves: two `i32[3,3] output of add` where 0.10.2 saves take_along_axis'
    output (found by a campaign on 0.6.2, 783db62c35). The spec following
    the old rule (spec.semantics) explains it on every release before."""
    def f(x):
        return lax.approx_min_k(x, 3, reduction_dimension=0)[0]
    report = oracle.check(f, _saves_adds, RNG.normal(size=(4, 3)).astype(np.float32))
    residuals = report.status("residuals", "remat2")
    assert residuals in ("ok", "known divergence"), str(report)
    assert all(r.status in ANSWERED for r in report.results), str(report)


def test_the_old_rule_s_indices_beside_a_scan_s_residuals():
    """A scan whose unused output linearization keeps, in the residual order
    of releases before 0.10, beside approx_top_k's old indices: three
    divergences at once on 0.6.2 (found by a campaign, 12eb95570e)."""
    @jax.custom_jvp
    def s(v):
        return jnp.sin(v)
    s.defjvp(lambda p, t: (jnp.sin(p[0]), jnp.cos(p[0]) * t[0]))

    def f(a, b):
        def body(carry, x):
            y = s(x)
            return jnp.sin(carry), y
        c, _ = lax.scan(body, a, a)
        return lax.approx_max_k(b, 2)[0], c
    report = oracle.check(f, oracle.AS_IS, RNG.normal(size=3).astype(np.float32), X)
    assert all(r.status in ANSWERED for r in report.results), str(report)
