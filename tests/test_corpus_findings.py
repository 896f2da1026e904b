"""The oracle's fixes for what the JAX-derived corpus (fuzz/corpus.py)
found, each on the class of calls, not the corpus case:

* a sharding param that places nothing (fully replicated) is the unset one;
* a program without inputs has no vmap to compare;
* a callable policy is shown an equation JAX elides when traced alone
  (a same-dtype convert_element_type of a weak-typed value);
* what the spec does not model, met lazily (a custom_vjp's fwd rule), is
  oracle.Unsupported, not a Mismatch or an internal error;
* inside a checkpoint, a jit's output that its body returns as a literal is
  recomputed, never a residual (JAX's saved_residuals is the reference);
* remat3's derivatives of checkpoints, and its crash on constant checkpoint
  outputs under jit(vmap), are named known divergences.
"""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax._src.ad_checkpoint import saved_residuals  # noqa: E402
from jax.sharding import AbstractMesh, NamedSharding, PartitionSpec  # noqa: E402

import oracle  # noqa: E402
import spec  # noqa: E402
from oracle import checker  # noqa: E402
from oracle.jax_params import spec_params  # noqa: E402
from oracle.policies import jax_view  # noqa: E402

f32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)  # noqa: E731


def _convert_params(sharding):
    return dict(new_dtype=np.dtype(np.float32), weak_type=False, sharding=sharding)


def test_replicated_sharding_param_is_the_unset_one():
    replicated = NamedSharding(AbstractMesh((), ()), PartitionSpec(None, None))
    prim, params = spec_params("convert_element_type", _convert_params(replicated))
    assert prim.name == "convert_element_type" and params == dict(new_dtype=np.float32, weak_type=False)


def test_partitioned_sharding_param_is_unsupported_by_name():
    split = NamedSharding(AbstractMesh((2,), ("x",)), PartitionSpec("x"))
    with pytest.raises(oracle.Unsupported, match="param sharding="):
        spec_params("convert_element_type", _convert_params(split))


@pytest.mark.parametrize("transform", [jax.jacfwd, jax.jacrev])
def test_jacobians_of_a_checkpoint_are_checked(transform):
    """jax.jacfwd / jacrev carry a replicated NamedSharding (their basis)."""
    fn = lambda x: transform(jax.checkpoint(lambda y: jnp.sin(y) * y))(x)  # noqa: E731
    report = oracle.check(fn, oracle.AS_IS, f32(2), properties=("residuals", "values"))
    assert report.status("values", "remat2") == "ok"
    assert report.status("residuals", "remat2") == "ok"


def test_program_without_inputs_has_no_vmap_but_values():
    def constant(scale, shift):
        return jnp.sin(jnp.float32(scale)) + shift
    report = oracle.check(constant, None, 0.5, 2.0, static_argnums=(0, 1),
                          properties=("values", "vmap"), implementations=("remat2",))
    assert report.status("vmap", "remat2") == "not compared"
    assert report.status("values", "remat2") == "ok"


def test_callable_policy_sees_an_elided_convert_element_type():
    """JAX keeps f32 -> f32 convert_element_type only on a weak-typed value."""
    prim, avals, params = jax_view("convert_element_type", (spec.f32[()],),
                                   (("new_dtype", np.dtype(np.float32)), ("weak_type", False)))
    assert prim.name == "convert_element_type"
    assert avals[0].weak_type and params["new_dtype"] == np.float32


def test_callable_policy_through_a_weak_typed_conversion_in_cond():
    """A Python float through lax.cond's branches: a weak -> strong
    convert_element_type the policy is asked about (the corpus's funky
    custom_jvp in cond)."""
    seen = []

    def save_cos(prim, *_, **__):
        seen.append(str(prim))
        return str(prim) == "cos"
    fn = lambda x: lax.cond(x > 0, jnp.sin, lambda v: v, x)  # noqa: E731
    report = oracle.check(fn, save_cos, 3., properties=("residuals",), implementations=("remat2",))
    assert report.status("residuals", "remat2") == "ok"
    assert "convert_element_type" in seen


def test_unmodelled_primitive_in_a_lazy_rule_is_unsupported():
    @jax.custom_vjp
    def tan(x):
        return jnp.tan(x)
    tan.defvjp(lambda x: (jnp.tan(x), (x, jax.lax.zeta(x + 2.0, x))), lambda r, g: (g / jnp.cos(r[0]) ** 2,))
    with pytest.raises(oracle.Unsupported, match="zeta"):
        oracle.check(lambda x: jax.checkpoint(tan)(x) * 2., oracle.AS_IS, 0.5)


@pytest.mark.parametrize("body", [lambda: 3., lambda: (3., jnp.float32(2.))[0]])
def test_literal_output_of_a_jit_in_a_checkpoint_is_recomputed(body):
    fn = lambda x: jax.jit(body)() * x  # noqa: E731
    with checker.implementation("remat2"):
        for f in (fn, jax.checkpoint(fn)):
            want = len(saved_residuals(f, 3.))
            assert len(oracle.expected_residuals(f, oracle.AS_IS, 3.)) == want
    assert want == 0     # inside the checkpoint


def _divergences(fn, policy, *args):
    report = oracle.check(fn, policy, *args)
    return {(n, impl) for n, _, impl in report.known_divergences}


def _sin_then_cos(y):
    return jnp.cos(jnp.sin(y))


@pytest.mark.parametrize("fn, arg", [
    (lambda x: jax.grad(jax.grad(jax.checkpoint(_sin_then_cos)))(x), 1.),
    (lambda x: jax.jacrev(jax.checkpoint(_sin_then_cos))(x), f32(3)),
], ids=["grad_of_grad", "jacrev"])
def test_remat3_derivative_of_a_checkpoint_is_named(fn, arg):
    found = _divergences(fn, oracle.AS_IS, arg)
    assert ("remat3-derivative-of-a-checkpoint-is-not-a-checkpoint", "remat3") in found
    assert not any(impl == "remat2" for _, impl in found)


def test_remat3_jit_vmap_constant_output_is_named():
    found = _divergences(lambda x: (jnp.sin(x), 3.), None, 2.)
    assert found == {("remat3-jit-of-vmap-of-a-constant-checkpoint-output-crashes", "remat3")}
