"""ragged_dot_general (spec/prims_ragged_dot.py): a mixture-of-experts
loss checked whole through JAX under every policy, remat2 and remat3;
the group semantics against a numpy loop; JAX's refusals (vmap at other
axes, reverse mode of the contracting mode) mirrored, read off JAX."""
import numpy as np
import pytest

import spec
from spec.prims_ragged_dot import ragged_dot, ragged_dot_general

jax = pytest.importorskip("jax")   # only the import may skip

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.ad_checkpoint import checkpoint_name  # noqa: E402

import oracle  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(lax, "ragged_dot_general"),
                                reason=f"jax {jax.__version__} has no lax.ragged_dot_general")


def test_rows_of_each_group_take_their_expert_and_the_rest_are_zero():
    """Group sizes (0, 2, 1) over 6 rows: rows 0-1 use expert 1, row 2
    expert 2, rows 3-5 no expert (zeros); numpy loops as the reference."""
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(6, 3)), rng.normal(size=(3, 3, 2))
    gs = np.array([0, 2, 1], np.int32)
    prog = spec.trace(ragged_dot, spec.f64[6, 3], spec.f64[3, 3, 2], spec.ArrayType((3,), "int32"))
    (got,) = spec.evaluate(prog, x, w, gs)
    want = np.zeros((6, 2))
    want[0:2], want[2:3] = x[0:2] @ w[1], x[2:3] @ w[2]
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)


def _moe_loss(params, x):
    """A top-1 mixture of experts as such layers are written: tokens sorted
    by their expert, one ragged product with the experts' weights."""
    router, w = params
    logits = x @ router
    expert = jnp.argmax(logits, axis=-1)
    order = jnp.argsort(expert)
    group_sizes = jnp.bincount(expert, length=w.shape[0]).astype(jnp.int32)
    h = checkpoint_name(jax.nn.gelu(lax.ragged_dot(x[order], w, group_sizes)), "expert_out")
    gate = jax.nn.softmax(logits, axis=-1)[order].max(axis=-1, keepdims=True)
    return jnp.mean((h * gate) ** 2)


_CP = jax.checkpoint_policies


@pytest.mark.parametrize("policy", [None, _CP.dots_saveable, _CP.everything_saveable,
                                    _CP.save_only_these_names("expert_out"), _CP.nothing_saveable],
                         ids=["none", "dots", "everything", "names", "nothing"])
def test_mixture_of_experts_loss_checks_whole(policy):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 4)).astype(np.float32)
    params = (rng.normal(size=(4, 3)).astype(np.float32), (0.5 * rng.normal(size=(3, 4, 5))).astype(np.float32))
    report = oracle.check(_moe_loss, policy, params, x)
    assert {r.status for r in report.results} <= {"ok", "known divergence", "not checked"}, str(report)
    assert report.status("residuals", "remat2") == "ok", str(report)


def test_vmap_at_another_axis_is_refused_as_jax_refuses_it():
    x, w, gs = np.ones((2, 6, 3), np.float32), np.ones((3, 3, 2), np.float32), np.array([1, 2, 2], np.int32)
    with pytest.raises(NotImplementedError) as jax_error:
        jax.vmap(lax.ragged_dot, in_axes=(0, None, None))(x, w, gs)
    prog = spec.trace(ragged_dot, spec.f32[6, 3], spec.f32[3, 3, 2], spec.ArrayType((3,), "int32"))
    with pytest.raises(NotImplementedError) as spec_error:
        spec.vmap(prog, in_axes=[0, None, None], out_axes=[0], axis_size=2)
    assert str(spec_error.value) == str(jax_error.value)
    batched = spec.vmap(prog, in_axes=[0, 0, 0], out_axes=[0], axis_size=2)    # JAX's one batching
    ws, gss = np.stack([w, 2 * w]), np.stack([gs, np.array([3, 0, 1], np.int32)])
    (got,) = spec.evaluate(batched, x, ws, gss)
    np.testing.assert_allclose(got, jax.vmap(lax.ragged_dot)(x, ws, gss), rtol=1e-6)


def test_reverse_mode_of_the_contracting_mode_is_refused_by_both():
    """JAX transposes the non-contracting mode only: grad through the
    contracting mode raises its NotImplementedError, which the spec raises
    too (`not applicable`); forward mode agrees."""
    dims = lax.RaggedDotDimensionNumbers((((1,), (0,)), ((), ())), (1,), ())
    gs = np.array([2, 2], np.int32)

    def f(x, y):
        return lax.ragged_dot_general(x, y, gs, dims).sum()
    x, y = np.ones((2, 5), np.float32), np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
    report = oracle.check(f, oracle.AS_IS, x, y, implementations=("remat2",))
    assert report.status("vjp", "remat2") == "not applicable", str(report)
    assert report.status("jvp", "remat2") == "ok", str(report)
    prog = spec.trace(lambda x, y: ragged_dot_general(x, y, gs, ((((1,), (0,)), ((), ())), (1,), ())),
                      spec.f32[2, 5], spec.f32[5, 3])
    with pytest.raises(NotImplementedError, match="Unimplemented grad_[xy]_dims for ragged dot general"):
        spec.vjp_program(prog)


def test_vmap_of_a_ragged_dot_with_batch_dims_is_jax_s_known_divergence():
    """Nightly finding 6023d0e998: JAX's lowering of a vmapped ragged dot
    that already has a batch dim hands api.vmap numpy integer in_axes and
    raises TypeError; the spec computes the product, the check names the
    divergence."""
    dims = lax.RaggedDotDimensionNumbers((((2,), (2,)), ((0,), (1,))), (1,), (0,))

    def f(x, w, gs):
        return lax.ragged_dot_general(x, w, gs, dims)
    args = (np.ones((2, 4, 3), np.float32), np.ones((2, 2, 3, 2), np.float32), np.full((2, 2), 2, np.int32))
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2",), properties=("vmap", "values"))
    assert report.known_divergences == [("ragged-dot-batched-twice-vmaps-with-numpy-axes", "vmap", "remat2")]
    assert report.status("values", "remat2") == "ok"


@pytest.mark.parametrize("outer", ["vmap", "vmap o vmap"])
def test_a_vmapped_grad_of_the_contracting_mode_raises_the_batching_refusal_first(outer):
    """vmap of grad through the contracting mode, batched outside axis 0:
    JAX runs grad's forward pass under the vmap, whose batching rule
    refuses the axes before any transposition; the spec's grad failed in
    the transposition first, a different error (pristine nightly finding
    829cf0d24a). Both now raise the batching refusal: not applicable."""
    from fuzz import properties
    from oracle import stacks as S
    dims = ((((1,), (0,)), ((), ())), (1,), ())
    prog = spec.trace(lambda x, y, gs: ragged_dot_general(x, y, gs, dims),
                      spec.f32[2, 5], spec.f32[5, 3], spec.ArrayType((2,), "int32"))
    layers = [S.Layer("grad"), S.Layer("vmap", in_axes=(0, -1, 0, 0), out_axes=(0, 0), size=2)]
    if outer == "vmap o vmap":
        layers.insert(1, S.Layer("vmap", in_axes=(0, 0, 0, 0), out_axes=(0, 0), size=2))
    report = properties.oracle_agrees(prog, stack=S.Stack(tuple(layers)), implementations=("remat2",),
                                      only=(S.STACK,))
    assert report.status(S.STACK, "remat2") == "not applicable", str(report)
    assert "vmap over any dim but 0" in report.results[0].detail, str(report)
