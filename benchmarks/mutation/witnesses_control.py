"""Witnesses for the control_flow and pjit mutants (see witnesses.py)."""
from __future__ import annotations

import numpy as np

from benchmarks.mutation.witness_lib import _jax, _np, close, kinds, residual_shapes, witness, xs


# -- control flow -------------------------------------------------------------

def _scan_fn(c0, seq):
    jax, jnp, lax, _, _ = _np()
    carry, ys = lax.scan(lambda c, x: (jnp.sin(c) * x, c * x), c0, seq)
    return carry + jnp.sum(ys)


def _scan_fd(c0, seq, dc, dseq, eps=1e-6):
    up = _scan_fn(c0 + eps * dc, seq + eps * dseq)
    dn = _scan_fn(c0 - eps * dc, seq - eps * dseq)
    return (np.asarray(up) - np.asarray(dn)) / (2 * eps)


@witness
def cf_scan_transpose_same_direction():
    jax = _jax()
    c0, seq = 0.7, xs(4, 0.5, 2.0)
    gc, gs = jax.grad(_scan_fn, argnums=(0, 1))(c0, seq)
    dseq = np.linspace(0.2, 1.0, 4)
    close(gc * 1.0 + np.dot(gs, dseq), _scan_fd(c0, seq, 1.0, dseq), 1e-6)


@witness
def cf_scan_linearize_tangent_reversed():
    jax = _jax()
    c0, seq = 0.7, xs(4, 0.5, 2.0)
    dseq = np.linspace(0.2, 1.0, 4)
    _, lin = jax.linearize(_scan_fn, c0, seq)
    close(lin(1.0, dseq), _scan_fd(c0, seq, 1.0, dseq), 1e-6)


@witness
def cf_scan_batched_ys_dim():
    jax, jnp, lax, _, _ = _np()
    seq = xs(4)
    f = lambda c0: lax.scan(lambda c, x: (c + x, c * x), c0, seq)[1]
    C0 = np.array([0.1, 0.2, 0.3])
    close(jax.vmap(f)(C0), np.stack([np.asarray(f(c)) for c in C0]))


@witness
def cf_scan_no_hoisting():
    jax, jnp, lax, _, _ = _np()

    def f(w, c0):
        return lax.scan(lambda c, x: (c * jnp.sin(w) + x, None), c0, xs(5))[0]
    shapes = residual_shapes(f, xs(3), xs(3))
    assert (5, 3) in shapes and shapes.count((5, 3)) == 1, shapes


@witness
def cf_while_jvp_fixpoint_short():
    jax, jnp, lax, _, _ = _np()
    f = lambda w: lax.while_loop(lambda c: c < 5.0, lambda c: c + w, 0.0)   # 4 steps at w = 1.5
    _, t = jax.jvp(f, (1.5,), (1.0,))
    close(t, 4.0)


def _cond_fn(p, x):
    jax, jnp, lax, _, _ = _np()
    return lax.cond(p, lambda x: jnp.sin(x), lambda x: jnp.ones_like(x), x)


@witness
def cf_cond_jvp_all_branches():
    jax = _jax()
    _, t = jax.jvp(lambda x: _cond_fn(True, x), (xs(),), (np.ones(3),))
    close(t, np.cos(xs()))


@witness
def cf_cond_linearize_all_branches():
    jax = _jax()
    g = jax.grad(lambda x: _cond_fn(True, x).sum())(xs())
    close(g, np.cos(xs()))


@witness
def cf_cond_vmap_selects_inactive():
    jax, jnp, lax, _, _ = _np()
    P = np.array([True, False, True])
    f = lambda p, x: lax.cond(p, jnp.sin, jnp.cos, x)
    g = jax.grad(lambda X: jax.vmap(f)(P, X).sum())(xs())
    close(g, np.where(P, np.cos(xs()), -np.sin(xs())))


# -- pjit ---------------------------------------------------------------------

@witness
def j_linearize_no_input_forwarding():
    jax, jnp, _, _, _ = _np()
    f = lambda x: (lambda a, b: a * b)(*jax.jit(lambda x: (x, jnp.cos(x)))(x))
    got = kinds(f, xs())
    assert got.count("arg") == 1, got


@witness
def j_partial_eval_no_input_forwarding():
    jax, jnp, _, _, _ = _np()
    from jax._src.interpreters import partial_eval as pe
    closed = jax.make_jaxpr(lambda x, y: jax.jit(lambda a, b: (a, jnp.sin(a) * b))(x, y))(xs(), xs())
    known, _, _, _ = pe.partial_eval_jaxpr_nounits(closed, [False, True], False)
    jit_eqns = [e for e in known.jaxpr.eqns if e.primitive.name == "jit"]
    assert [len(e.outvars) for e in jit_eqns] == [1], [str(e) for e in jit_eqns]


@witness
def j_linearize_no_output_forwarding():
    jax, jnp, _, _, _ = _np()
    closed = jax.make_jaxpr(lambda x: jax.linearize(jax.jit(jnp.exp), x)[0])(xs())
    jit_eqns = [e for e in closed.jaxpr.eqns if e.primitive.name == "jit"]
    assert [len(e.outvars) for e in jit_eqns] == [1], [str(e) for e in jit_eqns]


@witness
def j_dce_drops_partly_used():
    jax, jnp, _, _, _ = _np()
    from jax._src import core
    from jax._src.interpreters import partial_eval as pe
    closed = jax.make_jaxpr(lambda x: jax.jit(lambda x: (jnp.sin(x), jnp.cos(x)))(x)[0] * 2.0)(xs())
    jaxpr, _ = pe.dce_jaxpr(closed.jaxpr, [True])
    out, = core.eval_jaxpr(jaxpr, closed.consts, xs())
    close(out, 2 * np.sin(xs()))
