"""custom_jvp_call / custom_vjp_call / custom_lin (spec/prims_custom.py).

* eval is the primal program (numpy reference);
* the JVP is the user's rule (also a deliberately wrong one), and the true
  derivative where the rule is one (float64 finite differences);
* grad of a custom_vjp uses bwd (a clipping bwd, against numpy);
* forward mode of a custom_vjp raises JAX's TypeError;
* vmap == a loop over the batch (primal, jvp rule, fwd/bwd);
* symbolic zeros: rules see spec.Zero for unperturbed inputs;
* DCE, transposition of a linear custom_jvp function, printing;
* closed-over values (num_consts): the consts' tangents are dropped
  (lift_jvp), a custom_vjp's perturbed const raises CustomVJPException
  (lift_fwd); with jax: oracle.check of functions closing over traced
  values (jax.scipy.special.erfcx and exp1 among them), the cases JAX
  leaks a stale tracer in refused, and the round trip through JAX;
* with jax: the spec -> JAX -> spec round trip is the identity for the
  recorded programs, jax.nn.relu imports, and oracle.check passes.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import spec
from spec import ops
from spec import policies as sp
from spec.prims_custom import FWD_ERROR

import jax_custom_programs as JCP

f32, f64 = spec.f32, spec.f64
RNG = np.random.default_rng(0)


# --------------------------------------------------------------------------
# custom functions

def scaled_sin():
    return JCP._scaled_sin_spec()


def clipped(named=False):
    return JCP._clipped_spec(named)


def wrong_rule_cube():
    """x**3 with the rule 3 t (deliberately not the derivative 3 x**2 t)."""
    def cube(x):
        return x * x * x

    def cube_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return cube(x), t * 3.0
    return spec.custom_jvp(cube, cube_jvp)


def two_in_two_out():
    """(x * y, sin x), rule = the true derivative (for finite differences)."""
    def f(x, y):
        return x * y, ops.sin(x)

    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        return f(x, y), (tx * y + x * ty, ops.cos(x) * tx)
    return spec.custom_jvp(f, f_jvp)


def clip_np(x):
    return np.minimum(np.maximum(x, -0.1), 0.1)


# --------------------------------------------------------------------------
# eval

def test_eval_is_the_primal_program():
    x = RNG.standard_normal(3).astype(np.float32)
    f, g = scaled_sin(), clipped()
    prog = spec.trace(lambda x: (f(x), g(x)), f32[3])
    a, b = spec.evaluate(prog, x)
    np.testing.assert_allclose(a, 2 * np.sin(x), rtol=1e-6)
    np.testing.assert_allclose(b, np.sin(np.sin(x)), rtol=1e-6)
    spec.check_program(prog)


def test_printing_names_the_rules():
    f, g = scaled_sin(), clipped()
    text = str(spec.trace(lambda x: g(f(x)), f32[3]))
    assert "custom_jvp_call[" in text and "jvp=scaled_sin_jvp" in text
    assert "fwd=clipped_fwd bwd=clipped_bwd" in text


# --------------------------------------------------------------------------
# JVP

def test_jvp_is_the_users_rule_even_when_wrong():
    cube = wrong_rule_cube()
    prog = spec.trace(lambda x: cube(x), f32[4])
    x, t = RNG.standard_normal(4).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
    y, ty = spec.evaluate(spec.jvp(prog), x, t)
    np.testing.assert_allclose(y, x ** 3, rtol=1e-5)
    np.testing.assert_allclose(ty, 3 * t, rtol=1e-6)          # the rule, not 3 x^2 t
    (gx,) = spec.evaluate(spec.grad(spec.trace(lambda x: ops.reduce_sum(cube(x), (0,)), f32[4])), x)
    np.testing.assert_allclose(gx, np.full(4, 3.0), rtol=1e-6)   # reverse mode transposes the rule


def test_jvp_of_a_true_rule_matches_finite_differences():
    f = two_in_two_out()
    prog = spec.trace(lambda x, y: f(x, y), f64[3], f64[3])
    x, y = RNG.standard_normal(3), RNG.standard_normal(3)
    tx, ty = RNG.standard_normal(3), RNG.standard_normal(3)
    out = spec.evaluate(spec.jvp(prog), x, y, tx, ty)
    eps = 1e-6
    plus = spec.evaluate(prog, x + eps * tx, y + eps * ty)
    minus = spec.evaluate(prog, x - eps * tx, y - eps * ty)
    for got, p, m in zip(out[2:], plus, minus):
        np.testing.assert_allclose(got, (p - m) / (2 * eps), rtol=1e-6, atol=1e-8)


def test_linearized_custom_jvp_saves_the_rules_known_values():
    """As JAX's linearize_from_jvp: the rule's primal-only part is the forward pass."""
    f = scaled_sin()
    prog = spec.trace(lambda x: ops.reduce_sum(ops.sin(f(x)), (0,)), f32[3])
    assert [str(r) for r in spec.saved_residuals(prog)] == ["f32[3] output of mul", "f32[3] output of cos"]


# --------------------------------------------------------------------------
# custom_vjp: reverse mode uses bwd; forward mode is an error

def test_grad_of_custom_vjp_is_bwd():
    g = clipped()
    prog = spec.trace(lambda x: ops.reduce_sum(ops.sin(g(x)), (0,)), f32[5])
    x = np.linspace(-2, 2, 5).astype(np.float32)
    (gx,) = spec.evaluate(spec.grad(prog), x)
    ct = np.cos(np.sin(np.sin(x)))                                # d sum(sin y) / dy
    want = clip_np(ct * np.cos(x) * np.cos(np.sin(x)))            # what bwd returns
    np.testing.assert_allclose(gx, want, rtol=1e-5)
    true = ct * np.cos(np.sin(x)) * np.cos(x)
    assert not np.allclose(gx, true), "the clipping must matter at these points"


def test_vjp_of_custom_vjp_with_two_inputs_and_a_none_cotangent():
    def f(x, y):
        return x * y

    def fwd(x, y):
        return x * y, (x, y)

    def bwd(res, ct):
        x, y = res
        return (ct * y * 10.0, None)                       # none for y
    h = spec.custom_vjp(f, fwd, bwd)
    prog = spec.trace(lambda x, y: h(x, y), f32[3], f32[3])
    x, y, ct = (RNG.standard_normal(3).astype(np.float32) for _ in range(3))
    _, vjp_fn, res = spec.vjp(prog, x, y)
    gx, gy = vjp_fn(ct)
    np.testing.assert_allclose(gx, ct * y * 10, rtol=1e-6)
    np.testing.assert_array_equal(gy, np.zeros(3, np.float32))
    assert [str(r) for r in res] == ["f32[3] from the argument x", "f32[3] from the argument y"]


def test_forward_mode_of_custom_vjp_raises_jaxs_type_error():
    g = clipped()
    prog = spec.trace(lambda x: g(x), f32[3])
    jp = spec.jvp(prog)                           # builds: custom_lin holds bwd
    assert "custom_lin" in str(jp)
    x = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        spec.evaluate(jp, x, x)
    with pytest.raises(TypeError, match=FWD_ERROR.replace("(", r"\(").replace(")", r"\)")):
        spec.vmap(jp, 0, 0, axis_size=2)


def test_forward_over_reverse_of_custom_vjp_differentiates_bwd():
    """jvp(vjp) works, as in JAX: bwd is an ordinary function of residuals."""
    def f(x):
        return ops.sin(x)

    def fwd(x):
        return ops.sin(x), ops.cos(x)

    def bwd(c, ct):
        return (ct * c,)
    h = spec.custom_vjp(f, fwd, bwd)
    prog = spec.trace(lambda x: ops.reduce_sum(h(x), (0,)), f64[3])
    vp = spec.vjp_program(prog)
    x, t = RNG.standard_normal(3), RNG.standard_normal(3)
    out = spec.evaluate(spec.jvp(vp), x, np.float64(1.0), t, np.float64(0.0))
    np.testing.assert_allclose(out[1], -np.sin(x) * t, rtol=1e-12)


# --------------------------------------------------------------------------
# vmap == loop

def _loop(prog, xs):
    return [np.stack(o) for o in zip(*[spec.evaluate(prog, *m) for m in zip(*xs)])]


@pytest.mark.parametrize("which", ["custom_jvp", "custom_vjp"])
def test_vmap_equals_loop_for_values_jvp_and_grad(which):
    fn = scaled_sin() if which == "custom_jvp" else clipped()
    prog = spec.trace(lambda x: ops.reduce_sum(ops.sin(fn(x)), (0,)), f32[3])
    xs = RNG.standard_normal((4, 3)).astype(np.float32)
    for p in [prog, spec.grad(prog)] + ([spec.jvp(prog)] if which == "custom_jvp" else []):
        args = [xs] * len(p.inputs)
        got = spec.evaluate(spec.vmap(p, 0, 0, axis_size=4), *args)
        for g, w in zip(got, _loop(p, args)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    # and the gradient of the batched program (batched rules) == loop of gradients
    bp = spec.vmap(prog, 0, 0, axis_size=4)
    summed = spec.trace(lambda x: ops.reduce_sum(spec.core.eval_program_traced(bp, x)[0], (0,)), f32[4, 3])
    (g,) = spec.evaluate(spec.grad(summed), xs)
    np.testing.assert_allclose(g, _loop(spec.grad(prog), [xs])[0], rtol=1e-5, atol=1e-6)


def test_vmap_with_an_unbatched_input_sums_bwd_cotangents():
    def f(x, w):
        return x * w

    def fwd(x, w):
        return x * w, (x, w)

    def bwd(res, ct):
        x, w = res
        return (ct * w, ct * x)
    h = spec.custom_vjp(f, fwd, bwd)
    prog = spec.trace(lambda x, w: ops.reduce_sum(h(x, w), (0,)), f32[3], f32[3])
    bp = spec.vmap(prog, (0, None), 0, axis_size=2)
    summed = spec.trace(lambda x, w: ops.reduce_sum(spec.core.eval_program_traced(bp, x, w)[0], (0,)),
                        f32[2, 3], f32[3])
    xs, w = RNG.standard_normal((2, 3)).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    gx, gw = spec.evaluate(spec.grad(summed, (0, 1)), xs, w)
    np.testing.assert_allclose(gx, np.broadcast_to(w, (2, 3)), rtol=1e-6)
    np.testing.assert_allclose(gw, xs.sum(0), rtol=1e-5)


# --------------------------------------------------------------------------
# symbolic zeros

def test_symbolic_zeros_rule_sees_zero_for_unperturbed_inputs():
    seen = []

    def f(x, y):
        return x * y

    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        seen.append((isinstance(tx, spec.Zero), isinstance(ty, spec.Zero)))
        out = spec.Zero(x.type) if isinstance(tx, spec.Zero) else tx * y
        return f(x, y), out
    h = spec.custom_jvp(f, f_jvp, symbolic_zeros=True)
    prog = spec.trace(lambda x: ops.reduce_sum(h(x, ops.stop_gradient(ops.cos(x))), (0,)), f32[3])
    x = RNG.standard_normal(3).astype(np.float32)
    (g,) = spec.evaluate(spec.grad(prog), x)
    np.testing.assert_allclose(g, np.cos(x), rtol=1e-6)
    assert (False, True) in seen
    # the tangent output is a symbolic zero when x is not perturbed: no tangent at all
    prog2 = spec.trace(lambda x, y: h(x, y), f32[3], f32[3])
    jp, out_nz = spec.jvp_program(prog2, [False, True], instantiate_zeros=False)
    assert out_nz == [False] and (True, False) in seen


def test_without_symbolic_zeros_the_rule_gets_instantiated_zeros():
    seen = []

    def f(x, y):
        return x * y

    def f_jvp(primals, tangents):
        seen.append(tuple(isinstance(t, spec.Zero) for t in tangents))
        (x, y), (tx, ty) = primals, tangents
        return f(x, y), tx * y + x * ty
    h = spec.custom_jvp(f, f_jvp)
    prog = spec.trace(lambda x, y: h(x, y), f32[3], f32[3])
    jp, out_nz = spec.jvp_program(prog, [False, True], instantiate_zeros=False)
    assert seen == [(False, False)] and "broadcast_in_dim" in str(jp)


# --------------------------------------------------------------------------
# DCE, transpose, checkpoint interplay

def test_dce_prunes_unused_outputs_and_their_rules():
    f = two_in_two_out()
    prog = spec.trace(lambda x, y: f(x, y)[1], f32[3], f32[3])
    pruned, used = spec.dce(prog)
    (eqn,) = pruned.eqns
    assert len(eqn.outputs) == 1 and used == [True, True]      # inputs kept, as JAX does
    x, y = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    t = RNG.standard_normal(3).astype(np.float32)
    got = spec.evaluate(spec.jvp(pruned), x, y, t, t)
    np.testing.assert_allclose(got[1], np.cos(x) * t, rtol=1e-6)


def test_dce_of_custom_vjp_gives_bwd_zero_cotangents_for_dropped_outputs():
    def f(x):
        return ops.sin(x), ops.cos(x)

    def fwd(x):
        return (ops.sin(x), ops.cos(x)), x

    def bwd(x, cts):
        a, b = cts
        return (a * 2.0 + b * 5.0,)
    h = spec.custom_vjp(f, fwd, bwd)
    prog = spec.trace(lambda x: ops.reduce_sum(h(x)[0], (0,)), f32[3])
    pruned, _ = spec.dce(prog)
    x = RNG.standard_normal(3).astype(np.float32)
    (g,) = spec.evaluate(spec.grad(pruned), x)
    np.testing.assert_allclose(g, np.full(3, 2.0), rtol=1e-6)


def test_transpose_of_a_linear_custom_jvp_function_transposes_the_primal():
    def double(x):
        return x * 2.0

    def double_jvp(primals, tangents):
        return double(primals[0]), tangents[0] * 100.0      # never used by transposition
    d = spec.custom_jvp(double, double_jvp)
    prog = spec.trace(lambda x: d(x), f32[3])
    (ct,) = spec.evaluate(spec.transpose(prog, [True]), np.ones(3, np.float32))
    np.testing.assert_allclose(ct, np.full(3, 2.0))


def test_checkpoint_policy_sees_names_inside_a_fwd_rule():
    g = clipped(named=True)
    prog = spec.trace(lambda x: ops.checkpoint(lambda x: ops.reduce_sum(ops.sin(g(x)), (0,)),
                                               policy=sp.save_only_these_names("r"))(x), f32[3])
    assert [str(r) for r in spec.saved_residuals(prog)] == ["f32[3] from the argument x", "f32[3] named 'r'"]


# --------------------------------------------------------------------------
# with jax: round trip, import of jax.nn, oracle.check

def test_round_trip_through_jax_is_the_identity():
    jax = pytest.importorskip("jax")
    from oracle.from_jax import from_jaxpr
    from oracle.to_jax import to_jax
    for p in JCP.PROGRAMS:
        prog = p.trace_spec()
        args = p.example_inputs()
        back = from_jaxpr(jax.make_jaxpr(to_jax(prog))(*args))
        assert str(back) == str(prog), p.name
        assert [str(r) for r in spec.saved_residuals(back)][-1:] == \
            [str(r) for r in spec.saved_residuals(prog)][-1:], p.name


def test_jax_nn_relu_and_silu_import_and_agree():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax._src.ad_checkpoint import saved_residuals
    from oracle.checker import jax_residuals
    from oracle.from_jax import trace_jax

    def mlp(x, W):
        return jnp.sum(jax.nn.relu(x @ W) * jax.nn.silu(x @ W))
    x, W = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal((3, 4)).astype(np.float32)
    prog = trace_jax(mlp, x, W)
    assert "custom_jvp_call" in str(prog)
    assert [(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)] == jax_residuals(mlp, (x, W))
    (gx, gW) = spec.evaluate(spec.grad(prog, (0, 1)), x, W)
    jx, jW = jax.grad(mlp, (0, 1))(x, W)
    np.testing.assert_allclose(gx, jx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gW, jW, rtol=1e-5, atol=1e-6)
    del saved_residuals


# --------------------------------------------------------------------------
# closed-over values (num_consts): the spec alone

def closed_sin():
    """sin(y) * c closing over c (num_consts=1); the rule reads c's value."""
    def f(c, y):
        return ops.sin(y) * c

    def f_jvp(consts, primals, tangents):
        (c,), (y,), (t,) = consts, primals, tangents
        return g(c, y), ops.cos(y) * c * t
    g = spec.custom_jvp(f, f_jvp, num_consts=1)
    return g


def _fd(fn, x, t, eps=1e-6):
    return (fn(x + eps * t) - fn(x - eps * t)) / (2 * eps)


def test_a_closed_over_values_tangent_is_dropped():
    """JAX's lift_jvp gives the rule the arguments' tangents only: the
    tangent through c is dropped (no error), whatever the function's true
    derivative in c (finite differences)."""
    g = closed_sin()
    prog = spec.trace(lambda c, y: ops.reduce_sum(g(c, y), (0,)), f64[()], f64[3])
    assert "num_consts=1" in str(prog) and "num_consts" not in str(spec.trace(scaled_sin(), f32[3]))
    c, y, t = np.float64(1.5), RNG.standard_normal(3), RNG.standard_normal(3)
    np.testing.assert_allclose(spec.evaluate(prog, c, y)[0], np.sum(np.sin(y) * c), rtol=1e-12)
    _, ty = spec.evaluate(spec.jvp(prog), c, y, np.float64(0.0), t)
    np.testing.assert_allclose(ty, _fd(lambda y: np.sum(np.sin(y) * c), y, t), rtol=1e-6)
    _, tc = spec.evaluate(spec.jvp(prog), c, y, np.float64(1.0), np.zeros(3))
    assert tc == 0.0 and abs(_fd(lambda c: np.sum(np.sin(y) * c), c, 1.0)) > 0.1
    gc, gy = spec.evaluate(spec.grad(prog, (0, 1)), c, y)
    assert gc == 0.0
    np.testing.assert_allclose(gy, np.cos(y) * c, rtol=1e-12)


def test_closed_over_values_batched_or_not():
    g = closed_sin()
    prog = spec.trace(lambda c, y: g(c, y), f64[2], f64[2])
    cs, ys, ts = RNG.standard_normal((3, 2)), RNG.standard_normal((3, 2)), RNG.standard_normal((3, 2))
    for in_axes, c in (((None, 0), cs[0]), ((0, 0), cs)):
        batched = spec.vmap(prog, in_axes=in_axes, axis_size=3)
        (out,) = spec.evaluate(batched, c, ys)
        np.testing.assert_allclose(out, np.sin(ys) * c, rtol=1e-12)
        _, tan = spec.evaluate(spec.jvp(batched), c, ys, np.ones_like(c), ts)
        np.testing.assert_allclose(tan, np.cos(ys) * c * ts, rtol=1e-12)     # c's tangent dropped


def test_dce_and_transpose_keep_the_closed_over_values():
    def f(c, y):
        return y * c, y + c

    def f_jvp(consts, primals, tangents):
        return h(consts[0], primals[0]), (tangents[0] * consts[0], tangents[0])
    h = spec.custom_jvp(f, f_jvp, num_consts=1)
    prog = spec.trace(lambda c, y: h(c, y), f64[3], f64[3])
    pruned, used = spec.dce(prog, [True, False])
    e = pruned.eqns[0]
    assert used == [True, True] and len(e.inputs) == 2 and e.params["num_consts"] == 1
    c, y = RNG.standard_normal(3), RNG.standard_normal(3)
    np.testing.assert_allclose(spec.evaluate(pruned, c, y)[0], y * c)
    linear = spec.trace(lambda c, y: h(c, y)[0], f64[3], f64[3])
    ct = RNG.standard_normal(3)
    (ct_y,) = spec.evaluate(spec.transpose(linear, [False, True]), c, ct)
    np.testing.assert_allclose(ct_y, ct * c)         # the primal body y * c transposed


def test_custom_vjp_differentiated_in_a_closed_over_value_raises_jaxs_exception():
    from spec.prims_custom import CLOSED_OVER_ERROR, CustomVJPException

    def f(c, x):
        return ops.sin(x) * c

    def fwd(consts, x):
        return ops.sin(x) * consts[0], ops.cos(x) * consts[0]
    k = spec.custom_vjp(f, fwd, lambda r, g: (r * g,), num_consts=1)
    prog = spec.trace(lambda c, x: ops.reduce_sum(k(c, x), (0,)), f64[3], f64[3])
    c, x = RNG.standard_normal(3), RNG.standard_normal(3)
    (gx,) = spec.evaluate(spec.grad(prog, (1,)), c, x)
    np.testing.assert_allclose(gx, np.cos(x) * c, rtol=1e-12)          # bwd
    with pytest.raises(CustomVJPException) as e:
        spec.grad(prog, (0, 1))
    assert str(e.value) == CLOSED_OVER_ERROR
    jax = pytest.importorskip("jax")
    from jax._src.interpreters import ad
    assert str(ad.CustomVJPException()) == CLOSED_OVER_ERROR                 # word for word
    del jax


# --------------------------------------------------------------------------
# closed-over values: what JAX does, through oracle.check

def _closures():
    """Functions whose custom functions close over a traced value (JAX makes
    it a const: num_consts=1)."""
    jax = pytest.importorskip("jax")
    import functools
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name

    def rule_reads(w, x):
        """The rule reads the scale it closes over, which is differentiated."""
        scale = jnp.sum(w)

        @jax.custom_jvp
        def f(y):
            return jnp.sin(y) * scale

        @f.defjvp
        def f_jvp(p, t):
            (y,), (ty,) = p, t
            return f(y), jnp.cos(y) * scale * ty
        return jnp.sum(f(x @ w))

    def rule_reads_stopped(w, x):
        """The same with scale not differentiated (stop_gradient)."""
        scale = jax.lax.stop_gradient(jnp.sum(w))

        @jax.custom_jvp
        def f(y):
            return jnp.sin(y) * scale

        @f.defjvp
        def f_jvp(p, t):
            (y,), (ty,) = p, t
            return f(y), jnp.cos(y) * scale * ty
        return jnp.sum(f(x @ w))

    @functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
    def g(s, y):
        return jnp.sin(y) * s

    @g.defjvp
    def g_jvp(s, p, t):
        return g(s, p[0]), jnp.cos(p[0]) * s * t[0]

    def nondiff(w, x):
        """An array-valued nondiff_argnums: closed over (and stop_gradient'ed)."""
        return jnp.sum(g(jnp.sum(w), x @ w))

    def fun_only(w, x):
        """Only the function closes over scale; its rule does not read it
        (it is the derivative with scale held at 2, as it is at W)."""
        scale = jnp.sum(w)

        @jax.custom_jvp
        def f(y):
            return jnp.sin(y) * scale

        @f.defjvp
        def f_jvp(p, t):
            (y,), (ty,) = p, t
            return jnp.sin(y) * 2.0, jnp.cos(y) * 2.0 * ty
        return jnp.sum(jnp.cos(f(checkpoint_name(x @ w, "h"))))

    def inner_checkpoint(w, x):
        return jax.checkpoint(fun_only, policy=jax.checkpoint_policies.dots_saveable)(w, x) * 2.0

    def vjp_closure(w, x, stopped=False):
        scale = jnp.sum(w)
        scale = jax.lax.stop_gradient(scale) if stopped else scale

        @jax.custom_vjp
        def f(y):
            return jnp.sin(y) * scale
        f.defvjp(lambda y: (jnp.sin(y) * 2.0, jnp.cos(y)), lambda c, gy: (c * 2.0 * gy,))
        return jnp.sum(jnp.cos(f(x @ w)))

    return dict(rule_reads=rule_reads, rule_reads_stopped=rule_reads_stopped, nondiff=nondiff,
                fun_only=fun_only, inner_checkpoint=inner_checkpoint, vjp_closure=vjp_closure,
                vjp_closure_stopped=functools.partial(vjp_closure, stopped=True))


W = np.array([[0.8, -0.2], [0.9, 0.5]], np.float32)     # sum 2: fun_only's rule is exact at W
X = np.array([[1.0, 2.0], [0.5, -1.0], [0.2, 0.3]], np.float32)


def _policy(name):
    import jax
    import oracle
    cp = jax.checkpoint_policies
    return {"as-is": oracle.AS_IS, "none": None, "dots": cp.dots_saveable,
            "names": cp.save_only_these_names("h")}[name]


def _statuses(report):
    return {(r.property, r.implementation): r.status for r in report.results}


def test_jax_drops_a_closed_over_values_tangent():
    """JAX's own gradient of fun_only is the derivative with scale held
    fixed (finite differences in float64), not the function's: the tangent
    through the closed-over scale is dropped (no error), as the spec says."""
    jax = pytest.importorskip("jax")
    fun_only = _closures()["fun_only"]
    w, x = W.astype(np.float64), X.astype(np.float64)
    t = RNG.standard_normal(w.shape)
    got = float(np.sum(np.asarray(jax.grad(fun_only)(W, X)) * t))
    assert np.isclose(np.sum(w), 2.0)
    frozen = lambda v: np.sum(np.cos(np.sin(x @ v) * np.sum(w)))      # noqa: E731  (scale held)
    whole = lambda v: np.sum(np.cos(np.sin(x @ v) * np.sum(v)))       # noqa: E731
    np.testing.assert_allclose(got, _fd(frozen, w, t), rtol=2e-3)
    assert abs(got - _fd(whole, w, t)) > 0.1


@pytest.mark.parametrize("case,policy", [("fun_only", "as-is"), ("fun_only", "none"), ("fun_only", "dots"),
                                         ("fun_only", "names"), ("inner_checkpoint", "as-is"),
                                         ("rule_reads_stopped", "as-is"), ("nondiff", "as-is")])
def test_oracle_check_of_closed_over_values(case, policy):
    """The function closing over a traced value JAX differentiates: every
    property agrees (the rule reads a live closure only as written, where
    JAX calls it itself: `rule_reads_stopped`, `nondiff`)."""
    import oracle
    fn = _closures()[case]
    report = oracle.check(fn, _policy(policy), W, X)
    assert set(_statuses(report).values()) <= {"ok", "known divergence"}, report
    # (checkpoint_name under vmap: remat3's known lack of a batching rule)
    assert {n for n, _, _ in report.known_divergences} <= {"remat3-checkpoint-name-has-no-batching-rule"}


@pytest.mark.parametrize("case,policy,why", [
    ("rule_reads", "as-is", "that is differentiated"),
    ("rule_reads", "none", "trace that is over"),
    ("rule_reads", "dots", "trace that is over"),
    ("rule_reads", "names", "trace that is over"),
    ("rule_reads_stopped", "none", "trace that is over"),
    ("nondiff", "dots", "trace that is over"),
])
def test_a_rule_closing_over_a_tracer_jax_leaks_is_unsupported(case, policy, why):
    """A rule reading a differentiated closed-over value (JAX: a JVPTracer
    leaks), or any traced one where JAX staged the custom function (a
    checkpoint: the rule is traced later, the tracer is stale,
    jax-ml/jax#20889): JAX's differentiated function fails when run
    (UnexpectedTracerError here) while its saved_residuals leaks the tracer
    as a constant; the oracle refuses, naming the call and the rule."""
    jax = pytest.importorskip("jax")
    import oracle
    fn, pol = _closures()[case], _policy(policy)
    target = fn if pol is oracle.AS_IS else jax.checkpoint(fn, policy=pol)
    with pytest.raises(jax.errors.UnexpectedTracerError):
        jax.jit(jax.grad(target))(W, X)
    with pytest.raises(oracle.Unsupported) as e:
        oracle.check(fn, pol, W, X)
    msg = str(e.value)
    assert why in msg and re.search(r"^custom_jvp_call \w+ \(at .*\): its JVP rule \w+ closes over", msg), msg
    assert ("20889" in msg) == (why == "trace that is over"), msg


@pytest.mark.parametrize("policy", ["none", "dots", "as-is"])
def test_oracle_check_of_a_custom_vjp_closing_over_a_traced_value(policy):
    """Differentiated in the value it closes over: where JAX staged it (a
    checkpoint) lift_fwd raises CustomVJPException, and the spec raises it
    (every property that differentiates: not applicable); as written, JAX
    calls fwd itself and drops the tangent, as the spec does then. Not
    differentiated in it (stop_gradient): agreement."""
    import oracle
    F = _closures()
    report = oracle.check(F["vjp_closure"], _policy(policy), W, X)
    st = _statuses(report)
    if policy == "as-is":
        assert st.pop(("jvp", "remat2")) == st.pop(("jvp", "remat3")) == "not applicable"
        assert set(st.values()) == {"ok"}, report
    else:
        assert {p for (p, _), s in st.items() if s == "not applicable"} == {
            "residuals", "vjp_leaves", "prevent_cse", "jvp", "vjp", "second_order"}, report
        assert all(r.detail.startswith("both raise CustomVJPException: Detected differentiation of a "
                                       "custom_vjp function with respect to a closed-over value")
                   for r in report.results if r.status == "not applicable"), report
        assert {st[("values", i)] for i in ("remat2", "remat3")} == {"ok"}
    report = oracle.check(F["vjp_closure_stopped"], _policy(policy), W, X, properties=VJP_PROPS)
    assert set(_statuses(report).values()) == {"ok"}, report


def test_oracle_check_of_erfcx():
    """jax.scipy.special.erfcx closes over its polynomial's coefficients (a
    constant: num_consts=1), which its rule does not read."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import oracle
    from jax.scipy.special import erfcx
    x = np.array([0.5, 1.5, 3.0], np.float32)
    fn = lambda x: jnp.sum(jnp.sin(erfcx(x)))       # noqa: E731
    assert "num_consts=1" in str(jax.make_jaxpr(fn)(x))
    report = oracle.check(fn, oracle.AS_IS, x)
    assert set(_statuses(report).values()) == {"ok"}, report
    # remat2 only: under a checkpoint remat3 saves no residual for the
    # closed-over constant, where remat2 and the spec save `f32[5] from a
    # constant` (no known divergence models it yet)
    report = oracle.check(fn, jax.checkpoint_policies.dots_saveable, x, implementations=("remat2",))
    assert set(_statuses(report).values()) == {"ok"}, report


def test_oracle_check_of_exp1():
    """exp1's rule (expn_jvp, a jit) calls expn closing over n - 1, a traced
    int (nondiff_argnums): differentiated twice, that rule is traced when
    its tracer is stale, inside a jit, whose lowering raises mlir's
    TypeError in JAX and the spec alike (second_order: not applicable)."""
    pytest.importorskip("jax")
    import jax.numpy as jnp
    import oracle
    from jax.scipy.special import exp1
    x = np.array([0.5, 1.5, 3.0], np.float32)
    report = oracle.check(lambda x: jnp.sum(jnp.sin(exp1(x))), None, x,
                          properties=("residuals", "vjp", "second_order"))
    st = _statuses(report)
    assert st.pop(("second_order", "remat2")) == st.pop(("second_order", "remat3")) == "not applicable"
    assert set(st.values()) == {"ok"}, report
    detail = next(r.detail for r in report.results if r.property == "second_order")
    assert "both raise TypeError: No constant handler for type" in detail, detail


def test_closed_over_values_round_trip_through_jax_and_reproducers():
    """A program with consts written as JAX (oracle.to_jax) and as a
    reproducer's source (oracle.repro) binds the same custom calls again."""
    jax = pytest.importorskip("jax")
    from oracle.from_jax import from_jaxpr, trace_jax
    from oracle.jax_api.source import emitter_table_source
    from oracle.jax_names import EMITTERS_SOURCE
    from oracle.repro import program_source
    from oracle.to_jax import to_jax
    head = ("import jax, ml_dtypes\nimport jax.numpy as jnp\nimport numpy as np\n"
            "from jax.ad_checkpoint import checkpoint_name\n" + emitter_table_source(EMITTERS_SOURCE) + "\n")
    F = _closures()
    g = closed_sin()
    programs = [trace_jax(F[n], W, X) for n in ("fun_only", "nondiff", "vjp_closure", "inner_checkpoint")]
    programs.append(spec.trace(lambda w, x: ops.reduce_sum(g(ops.reduce_sum(w, (0, 1)), x @ w), (0, 1)),
                               f32[2, 2], f32[3, 2]))
    for prog in programs:
        assert "num_consts=1" in str(prog)
        back = from_jaxpr(jax.make_jaxpr(to_jax(prog))(W, X))
        assert str(back) == str(prog)
        ns: dict = {}
        exec(compile(head + program_source(prog, "f"), "<reproducer>", "exec"), ns)
        assert str(from_jaxpr(jax.make_jaxpr(ns["f"])(W, X))) == str(prog)
        want = spec.evaluate(spec.grad(prog, (1,)), W, X)[0]
        np.testing.assert_allclose(spec.evaluate(spec.grad(back, (1,)), W, X)[0], want, rtol=1e-6)


VJP_PROPS = ("residuals", "vjp_leaves", "prevent_cse", "values", "vjp", "vmap", "second_order")  # no "jvp": JAX raises


def _oracle_cases():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import oracle
    F = JCP._jax_fns()
    cp = jax.checkpoint_policies
    x = np.linspace(-1, 1, 3).astype(np.float32)
    W = (np.arange(12).reshape(3, 4) / 12).astype(np.float32)
    return [
        ("custom_jvp-none", lambda x: jnp.sum(jnp.sin(F["scaled_sin"](x))), None, (x,), {}),
        ("custom_jvp-as-is", lambda x: jnp.sum(jnp.sin(F["scaled_sin"](x))), oracle.AS_IS, (x,), {}),
        ("custom_vjp-none", lambda x: jnp.sum(jnp.sin(F["clipped"](x))), None, (x,), dict(properties=VJP_PROPS)),
        ("custom_vjp-as-is", lambda x: jnp.sum(jnp.sin(F["clipped"](x))), oracle.AS_IS, (x,),
         dict(properties=VJP_PROPS)),
        ("relu-mlp-dots", lambda x, W: jnp.sum(jax.nn.relu(x @ W)), cp.dots_saveable, (x, W), {}),
    ]


@pytest.mark.parametrize("i", range(5))
def test_oracle_check_passes(i):
    pytest.importorskip("jax")
    import oracle
    name, fn, policy, args, kw = _oracle_cases()[i]
    report = oracle.check(fn, policy, *args, **kw)
    assert not report.known_divergences, (name, report)


def test_remat3_ignores_a_name_inside_a_custom_vjp_fwd():
    """remat2 and the spec save the fwd residual named 'r' under
    save_only_these_names('r'); remat3 (RematTrace.process_custom_vjp_call)
    re-binds the whole custom_vjp_call in the recomputation and never applies
    the policy inside it, so it saves only the argument: the known
    divergence remat3-custom-rules-are-full-remat, reported as such."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import oracle
    F = JCP._jax_fns()
    policy = jax.checkpoint_policies.save_only_these_names("r")
    fn = lambda x: jnp.sum(jnp.sin(F["named"](x)))   # noqa: E731
    x = np.linspace(-1, 1, 3).astype(np.float32)
    oracle.check(fn, policy, x, implementations=("remat2",), properties=("residuals", "values", "vjp"))
    report = oracle.check(fn, policy, x, implementations=("remat3",), properties=("residuals",))
    assert ("remat3-custom-rules-are-full-remat", "residuals", "remat3") in report.known_divergences, report


# --------------------------------------------------------------------------
# custom_vjp(optimize_remat=True): the remat_opt primitive (spec/prims_remat_opt.py)

def _tan_with_sin_fwd():
    """tan whose (deliberately different) forward rule returns sin: which of
    the two computes a primal output shows which program ran (JAX's
    test_optimize_remat_gh21303)."""
    from spec.prims_math import tan

    def fwd(x):
        return ops.sin(x), ops.cos(x)
    return spec.custom_vjp(tan, fwd, lambda c, g: (ops.mul(g, c),), optimize_remat=True)


def test_optimize_remat_binds_one_remat_opt_in_the_forward_rule():
    f = _tan_with_sin_fwd()
    prog = spec.trace(f, f32[3])
    fwd, _ = prog.eqns[0].params["fwd"]((True,))
    assert [e.primitive.name for e in fwd.eqns] == ["remat_opt"]
    x = np.float32([0.1, 0.5, 1.0])
    np.testing.assert_allclose(spec.evaluate(prog, x)[0], np.tan(x), rtol=1e-6)       # eval: the primal body
    np.testing.assert_allclose(spec.evaluate(fwd, x)[0], np.sin(x), rtol=1e-6)        # the forward rule: sin


def test_optimize_remat_runs_the_primal_function_where_no_residual_is_read():
    """Linearized, the forward pass computes the rule's output (sin); inside a
    checkpoint the residual is recomputed later, so remat_opt's DCE rule
    makes the forward pass the primal function (tan), as in JAX's
    test_optimize_remat_gh21303."""
    f = _tan_with_sin_fwd()
    x = np.float32([0.1, 0.5, 1.0])
    plain = spec.linearize(spec.trace(f, f32[3]))
    ckpt = spec.linearize(spec.trace(lambda y: spec.remat.checkpoint(f)(y), f32[3]))
    np.testing.assert_allclose(spec.evaluate(plain.forward, x)[0], np.sin(x), rtol=1e-6)
    np.testing.assert_allclose(spec.evaluate(ckpt.forward, x)[0], np.tan(x), rtol=1e-6)
    assert "remat_opt" not in str(ckpt.forward) and "remat_opt" in str(plain.forward)
    g = spec.evaluate(spec.vjp_program(spec.trace(f, f32[3])), x, np.ones(3, np.float32))[-1]
    np.testing.assert_allclose(g, np.cos(x), rtol=1e-6)                               # bwd: g * cos


def test_remat_opt_dce_keeps_the_forward_rule_while_a_residual_is_read():
    from spec.prims_remat_opt import _remat_opt_dce
    f = _tan_with_sin_fwd()
    fwd, _ = spec.trace(f, f32[3]).eqns[0].params["fwd"]((True,))
    e = fwd.eqns[0]                                   # outputs: (residual cos, primal sin)
    only_res, read = _remat_opt_dce(e, [True, False])
    assert only_res.primitive.name == "remat_opt" and read == [True]
    assert [q.primitive.name for q in only_res.params["fwd_jaxpr"].eqns] == ["cos"]
    only_out, read = _remat_opt_dce(e, [False, True])
    assert only_out.primitive.name == "call" and only_out.params["name"] is None
    assert [q.primitive.name for q in only_out.params["jaxpr"].eqns] == ["tan"]


def test_remat_opt_jvp_matches_finite_differences_and_reverse_mode_raises():
    """Forward mode of the forward rule is its JVP; reverse mode raises
    linearize_from_jvp's ValueError (one remat_opt computes primals and
    tangents together), as JAX does (checked below where JAX is installed)."""
    from spec.jvp import LINEARIZATION_ERROR
    f = _tan_with_sin_fwd()
    fwd, _ = spec.trace(f, f64[3]).eqns[0].params["fwd"]((True,))
    x, t = np.array([0.1, 0.5, 1.0]), np.array([0.3, -1.0, 2.0])
    outs = spec.evaluate(spec.jvp(fwd), x, t)
    eps = 1e-6
    fd = [(p - m) / (2 * eps) for p, m in zip(spec.evaluate(fwd, x + eps * t), spec.evaluate(fwd, x - eps * t))]
    for got, want in zip(outs[2:], fd):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(ValueError) as spec_error:
        spec.vjp_program(fwd)
    assert str(spec_error.value) == LINEARIZATION_ERROR
    jax = pytest.importorskip("jax")
    import oracle
    if not oracle.jax_api.capabilities().optimize_remat:
        return

    @jax.custom_vjp
    def tan(x):
        return jax.numpy.tan(x)
    tan.defvjp(lambda x: (jax.numpy.sin(x), jax.numpy.cos(x)), lambda c, g: (g * c,), optimize_remat=True)
    with pytest.raises(ValueError) as jax_error:
        jax.grad(lambda x: jax.vjp(tan, x)[0].sum())(np.float32([0.1, 0.5, 1.0]))
    assert str(jax_error.value) == LINEARIZATION_ERROR


def test_remat_opt_vmap_equals_a_loop():
    f = _tan_with_sin_fwd()
    fwd, _ = spec.trace(f, f32[3]).eqns[0].params["fwd"]((True,))
    xs = np.float32([[0.1, 0.5, 1.0], [0.2, -0.3, 0.7]])
    batched = spec.vmap(fwd, in_axes=1, axis_size=2)
    got = spec.evaluate(batched, xs.T)
    for i, row in enumerate(xs):
        for g, w in zip(got, spec.evaluate(fwd, row)):
            np.testing.assert_allclose(g[i], w, rtol=1e-6)


@pytest.mark.parametrize("policy", ["none", "dots", "everything", "as-is"])
def test_optimize_remat_through_jax(policy):
    """JAX's own custom_vjp(optimize_remat=True) imports, and oracle.check
    passes: residuals and values as JAX has them (the primal function in a
    checkpoint's forward pass, the rule outside one)."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import oracle
    if not oracle.jax_api.capabilities().optimize_remat:
        pytest.skip(f"jax {jax.__version__}: defvjp takes no optimize_remat=")

    @jax.custom_vjp
    def tan(x):
        return jnp.tan(x)
    tan.defvjp(lambda x: (jnp.sin(x), (jnp.cos(x), x)), lambda r, g: (g * r[0] + 0 * r[1],), optimize_remat=True)
    cp = jax.checkpoint_policies
    pol = {"none": None, "dots": cp.dots_saveable, "everything": cp.everything_saveable, "as-is": oracle.AS_IS}[policy]
    fn = lambda x: jnp.sum(tan(jnp.sin(x)) ** 2)   # noqa: E731
    report = oracle.check(fn, pol, np.linspace(-1, 1, 3).astype(np.float32), properties=VJP_PROPS)
    assert all(r.status in ("ok", "known divergence") for r in report.results), report
    prog = oracle.from_jaxpr(jax.make_jaxpr(jax.grad(fn))(np.float32([0.1, 0.2, 0.3])))
    assert "remat_opt" in str(prog)
    back = oracle.from_jaxpr(jax.make_jaxpr(oracle.to_jax(prog))(np.float32([0.1, 0.2, 0.3])))
    assert str(back).count("remat_opt") == str(prog).count("remat_opt")


def test_optimize_remat_of_two_arguments_in_a_checkpoint():
    """jax's custom_api_test test_optimize_remat_multiple_args: the
    checkpoint's backward pass reads the forward rule's residuals alone, so
    its DCE drops the rule's primal output; JAX keeps the primal function
    whole (its abstract eval never compares the two), the spec prunes both
    (its shape rule does compare them, and raised). JAX's gradient is
    compared by oracle.check."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import oracle
    if not oracle.jax_api.capabilities().optimize_remat:
        pytest.skip(f"jax {jax.__version__}: defvjp takes no optimize_remat=")

    @jax.custom_vjp
    def f(x, y):
        return jnp.sin(x) * y
    f.defvjp(lambda x, y: (f(x, y), (jnp.cos(x), jnp.sin(x), y)),
             lambda res, g: (res[0] * g * res[2], res[1] * g), optimize_remat=True)
    report = oracle.check(lambda x, y: jax.remat(f)(x, y), oracle.AS_IS, np.float32(3.2), np.float32(1.0),
                          properties=VJP_PROPS)
    assert all(r.status in ("ok", "known divergence") for r in report.results), report


@pytest.mark.parametrize("name", ["ldexp", "frexp", "frexp-both"])
def test_a_custom_jvp_rule_with_float0_tangents_of_integers(name):
    """jnp.ldexp and jnp.frexp are custom_jvp functions of an integer
    argument or output: JAX hands their rules float0 tangents (the ldexp
    rule never reads its exponent's; the frexp rule returns a float0 zero
    for its exponent), where the spec's tangent of an integer is a symbolic
    zero. The oracle imports them and JAX agrees with the spec on every
    property (it refused them as an unsupported dtype before)."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import oracle
    fns = {"ldexp": lambda x: jnp.sum(jnp.ldexp(x, 3)),
           "frexp": lambda x: jnp.sum(jnp.frexp(x)[0]),
           "frexp-both": lambda x: jnp.sum(jnp.frexp(x)[0] * jnp.frexp(x)[1])}
    x = np.linspace(-1.5, 1.7, 12, dtype=np.float32).reshape(3, 4)
    report = oracle.check(fns[name], jax.checkpoint_policies.dots_saveable, x)
    unchecked = {"not checked"} if oracle.jax_api.unavailable("remat3") else set()   # a release without remat3
    assert {r.status for r in report.results} <= {"ok", "not applicable"} | unchecked, str(report)
