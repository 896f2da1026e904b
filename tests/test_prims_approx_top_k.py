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
