"""Witnesses for the partial_eval, ad, batching, primitive, control_flow and
pjit mutants (see witnesses.py; registered into witness_lib.WITNESSES)."""
from __future__ import annotations

import numpy as np

from benchmarks.mutation.witness_lib import (_jax, _np, close, grad_vs_fd, jvp_vs_fd, kinds,
                                             residual_shapes, witness, xs)


# -- partial_eval -------------------------------------------------------------

@witness
def pe_policy_inverted():
    jax, jnp, _, _, cp = _np()
    f = lambda x: jnp.sin(jnp.sin(x))
    assert kinds(jax.checkpoint(f, policy=cp.nothing_saveable), xs()) == ["arg"]
    assert "cos" in kinds(jax.checkpoint(f, policy=cp.everything_saveable), xs())


@witness
def pe_recompute_not_available():
    jax, jnp, _, _, cp = _np()
    f = jax.checkpoint(lambda x: jnp.sin(jnp.sin(x)), policy=cp.nothing_saveable)
    assert kinds(f, xs()) == ["arg"]


@witness
def pe_literal_unknown():
    jax, jnp, _, _, cp = _np()
    f = jax.checkpoint(lambda x: jnp.sin(x * 2.0), policy=cp.everything_saveable)
    got = kinds(f, xs())
    assert got == ["cos"], got
    close(jax.grad(lambda x: jnp.sum(f(x)))(xs()), 2 * np.cos(2 * xs()))


@witness
def pe_dce_last_use_wins():
    jax, jnp, _, _, _ = _np()
    from jax._src import core
    from jax._src.interpreters import partial_eval as pe

    def f(x):
        s = jnp.sin(x)
        dead = jnp.cos(s)
        return s * 2.0, dead
    closed = jax.make_jaxpr(f)(xs())
    jaxpr, _ = pe.dce_jaxpr(closed.jaxpr, [True, False])
    out, = core.eval_jaxpr(jaxpr, closed.consts, xs())
    close(out, 2 * np.sin(xs()))


@witness
def pe_call_rule_saves_everything():
    jax, jnp, _, _, cp = _np()
    inner = jax.checkpoint(lambda s: jnp.sin(jnp.sin(s)), policy=cp.everything_saveable)
    outer = jax.checkpoint(lambda x: inner(jnp.cos(x)), policy=cp.nothing_saveable)
    assert kinds(outer, xs()) == ["arg"], kinds(outer, xs())


@witness
def pe_default_dce_drops_partly_used():
    jax, jnp, lax, _, _ = _np()
    from jax._src import core
    from jax._src.interpreters import partial_eval as pe
    closed = jax.make_jaxpr(lambda x: lax.split(x, (2, 2))[0] * 2.0)(xs(4))
    jaxpr, _ = pe.dce_jaxpr(closed.jaxpr, [True])
    out, = core.eval_jaxpr(jaxpr, closed.consts, xs(4))
    close(out, 2 * np.asarray(xs(4))[:2])


# -- ad -----------------------------------------------------------------------

@witness
def ad_add_tangents_doubles():
    jvp_vs_fd(lambda x: x * _np()[1].sin(x), xs())


@witness
def ad_add_tangents_drops_left():
    jax = _jax()

    @jax.custom_vjp
    def g(a, b):
        return a * 2.0
    g.defvjp(lambda a, b: (a * 2.0, None), lambda _, ct: (ct * 2.0, None))   # None: a zero cotangent
    close(jax.grad(lambda x: g(x, x).sum())(xs()), 2 * np.ones(3))


@witness
def ad_standard_jvp_first_operand_only():
    jvp_vs_fd(lambda x: x * _np()[1].cos(x), xs())


@witness
def ad_jvp_skips_partly_zero():
    jax = _jax()
    _, t = jax.jvp(lambda x: x * 2.0, (xs(),), (np.ones(3),))
    close(t, 2 * np.ones(3))


@witness
def ad_linearize_skips_partly_zero():
    jax, jnp, _, _, _ = _np()
    close(jax.grad(lambda x: jnp.sum(x * 2.0))(xs()), 2 * np.ones(3))


@witness
def ad_accum_overwrites():
    jax, jnp, _, _, _ = _np()
    close(jax.grad(lambda x: jnp.sum(jnp.sin(x) + jnp.cos(x)))(xs()), np.cos(xs()) - np.sin(xs()))


@witness
def ad_backward_in_forward_order():
    jax, jnp, _, _, _ = _np()
    close(jax.grad(lambda x: jnp.sum(jnp.sin(jnp.cos(x))))(xs()),
          -np.cos(np.cos(xs())) * np.sin(xs()))


@witness
def ad_perturbation_confusion():
    jax = _jax()
    inner = lambda x: jax.jvp(lambda y: x + y, (1.0,), (1.0,))[1]
    _, t = jax.jvp(lambda x: x * inner(x), (1.0,), (1.0,))
    close(t, 1.0)


@witness
def ad_linear_jvp_any_zero():
    jax, jnp, lax, _, _ = _np()
    f = lambda x: lax.concatenate([x, jnp.full(2, 0.5)], 0)
    _, t = jax.jvp(f, (xs(),), (np.ones(3),))
    close(t, [1, 1, 1, 0, 0])


# -- batching -----------------------------------------------------------------

def _square(seed=0, n=3):
    return np.random.default_rng(seed).standard_normal((n, n))


@witness
def b_broadcast_ignores_bdim():
    jax, _, lax, _, _ = _np()
    a, b = _square(0), _square(1)
    close(jax.vmap(lax.add, in_axes=(0, 1))(a, b), a + b.T)


@witness
def b_broadcast_wrong_out_dim():
    jax, _, lax, _, _ = _np()
    X, y = np.random.default_rng(2).standard_normal((3, 4)), xs(3)
    close(jax.vmap(lambda a, b: lax.mul(a, b) + b, in_axes=(1, None))(X, y), (X * y[:, None] + y[:, None]).T)


@witness
def b_reducer_shifts_equal_axis():
    jax, jnp, _, _, _ = _np()
    X = np.random.default_rng(3).standard_normal((2, 3))
    close(jax.vmap(lambda v: jnp.sum(v, axis=0))(X), X.sum(1))
    close(jax.vmap(lambda v: jnp.max(v, axis=0))(X), X.max(1))


@witness
def b_matchaxis_moves_backwards():
    jax = _jax()
    X = np.random.default_rng(4).standard_normal((2, 3, 4))
    close(jax.vmap(lambda v: v * 2.0, out_axes=2)(X), np.moveaxis(X * 2.0, 0, 2))


@witness
def b_matchaxis_broadcast_negative_axis():
    jax, jnp, _, _, _ = _np()
    out = jax.vmap(lambda v: jnp.arange(3.0), out_axes=-1)(np.ones(2))
    close(out, np.broadcast_to(np.arange(3.0)[:, None], (3, 2)))


@witness
def b_add_batched_moves_wrong_operand():
    jax = _jax()
    from jax._src import ad_util
    a, b = _square(5), _square(6)
    close(jax.vmap(ad_util.add_jaxvals, in_axes=(0, 1))(a, b), a + b.T)


# -- primitive rules ----------------------------------------------------------

@witness
def p_tanh_jvp():
    jvp_vs_fd(_np()[1].tanh, xs())


@witness
def p_logistic_jvp():
    jvp_vs_fd(_jax().nn.sigmoid, xs())


@witness
def p_integer_pow_jvp():
    jvp_vs_fd(lambda x: x ** 3, xs())
    jvp_vs_fd(lambda x: x ** -2, xs())


@witness
def p_max_jvp_to_loser():
    jax, jnp, _, _, _ = _np()
    x, y = xs() + 1.0, xs()
    _, t = jax.jvp(jnp.maximum, (x, y), (np.ones(3), np.zeros(3)))
    close(t, np.ones(3))


@witness
def p_div_jvp_sign():
    jvp_vs_fd(lambda y: 1.0 / y, xs())


@witness
def p_dot_transpose_contract_order():
    jax, _, lax, _, _ = _np()
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((2, 3, 3)), rng.standard_normal((5, 3, 3))
    dims = (((1, 2), (2, 1)), ((), ()))
    g = jax.grad(lambda x: lax.dot_general(x, y, dims).sum())(x)
    close(g, np.broadcast_to(np.einsum("lkj->jk", y), x.shape))


@witness
def p_transpose_transpose_perm():
    jax, _, lax, _, _ = _np()
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((3, 3, 3)), rng.standard_normal((3, 3, 3))
    g = jax.grad(lambda x: (lax.transpose(x, (1, 2, 0)) * w).sum())(x)
    close(g, np.transpose(w, np.argsort((1, 2, 0))))


@witness
def p_select_transpose_swapped():
    jax, _, lax, _, _ = _np()
    p = np.array([True, False, True])
    g = jax.grad(lambda y: lax.select(p, xs(), y).sum())(xs())
    close(g, (~p).astype(float))


@witness
def p_chooser_jvp_ties_summed():
    jax, jnp, _, _, _ = _np()
    _, t = jax.jvp(jnp.max, (np.array([1.0, 3.0, 3.0]),), (np.ones(3),))
    close(t, 1.0)


@witness
def p_unbroadcast_scalar():
    jax, _, lax, _, _ = _np()
    s = np.float64(0.7)
    close(jax.grad(lambda s: lax.mul(s, xs()).sum())(s), xs().sum())


@witness
def p_sub_transpose_sign():
    jax, _, lax, _, _ = _np()
    gx, gy = jax.grad(lambda x, y: lax.sub(x, y).sum(), argnums=(0, 1))(xs(), xs())
    close(gx, np.ones(3))
    close(gy, -np.ones(3))


from benchmarks.mutation import witnesses_control  # noqa: E402,F401  (control flow and pjit)
