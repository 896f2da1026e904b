"""custom_jvp_call / custom_vjp_call / custom_lin (spec/prims_custom.py).

* eval is the primal program (numpy reference);
* the JVP is the user's rule (also a deliberately wrong one), and the true
  derivative where the rule is one (float64 finite differences);
* grad of a custom_vjp uses bwd (a clipping bwd, against numpy);
* forward mode of a custom_vjp raises JAX's TypeError;
* vmap == a loop over the batch (primal, jvp rule, fwd/bwd);
* symbolic zeros: rules see spec.Zero for unperturbed inputs;
* DCE, transposition of a linear custom_jvp function, printing;
* with jax: the spec -> JAX -> spec round trip is the identity for the
  recorded programs, jax.nn.relu imports, and oracle.check passes.
"""
from __future__ import annotations

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


def test_unsupported_num_consts_is_named():
    jax = pytest.importorskip("jax")
    from oracle.errors import Unsupported
    from oracle.from_jax import trace_jax

    def outer(x, c):
        @jax.custom_jvp
        def f(y):
            return y * c                      # closes over a traced value: num_consts=1

        @f.defjvp
        def f_jvp(p, t):
            return f(p[0]), t[0] * c
        return f(x)
    x = np.ones(3, np.float32)
    with pytest.raises(Unsupported, match="num_consts"):
        trace_jax(outer, x, np.float32(2.0))


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
