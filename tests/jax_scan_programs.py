"""Programs with `lax.scan` (and checkpoints inside, around or both), each
written twice: with JAX and with the spec's builder API (`spec.scan`), plus
the types of their inputs.

The recorder (`tests/record_jax_scan_residuals.py`) stores, per program,
JAX's `saved_residuals` and the equations of `jax.make_jaxpr(fn)` (scan,
checkpoint and jit bodies nested); `tests/test_recorded_scan_residuals.py`
checks the spec against both without importing jax.

Matching JAX's tracing: lax.scan makes the values a body closes over its
consts, in order of first use, so the spec versions pass them explicitly
(`consts=`, received after carry and x); `x[0]` is slice + squeeze;
jax.checkpoint of a closure takes the closed-over values as its first
inputs. Avoid bodies that return a carry unchanged or a y equal to an x:
lax.scan forwards those out of the loop (the spec's `scan` builder does
not), so the two versions would differ.
"""
from __future__ import annotations

import numpy as np

import spec
from spec import ops
from spec import policies as sp
from spec.prims_math import floor

from jax_programs import TestProgram, _LazyModule

jax = _LazyModule("jax")
jnp = _LazyModule("jax.numpy")
lax = _LazyModule("jax.lax")
adc = _LazyModule("jax.ad_checkpoint")


class _JaxPolicies:
    def __getattr__(self, attr):
        return getattr(jax.checkpoint_policies, attr)


jcp = _JaxPolicies()
L, D = 4, 3                               # scan length, feature size
XS = (("f32", (L, D)), ("f32", (D, D)))   # xs, a weight shared by every iteration
XW = (("f32", (L, D)), ("f32", (L, D, D)))  # xs, one weight per iteration (scanned layers)
# xs and four weights of different widths (shared, or one per iteration), so
# that the residuals of different dots have different types: their order shows
XS4 = (("f32", (L, D)), ("f32", (D, 5)), ("f32", (D, 7)), ("f32", (7, D)), ("f32", (5, D)))
XW4 = (("f32", (L, D)), ("f32", (L, D, 5)), ("f32", (L, D, 7)), ("f32", (L, 7, D)), ("f32", (L, 5, D)))


def _first(x):          # x[0] as jax.numpy traces it
    return ops.squeeze(ops.slice(x, (0, 0), (1, D), None), (0,))


# --- bodies (JAX, spec): carry c, x, then the consts

def cell_jax(c, x, w):
    h = jnp.sin(c @ w + x)
    return h, jnp.cos(h)


def cell_spec(c, x, w):
    h = ops.sin(c @ w + x)
    return h, ops.cos(h)


def named_cell_jax(c, x, w):
    h = adc.checkpoint_name(jnp.sin(c @ w + x), "h")
    return h, jnp.cos(h)


def named_cell_spec(c, x, w):
    h = ops.checkpoint_name(ops.sin(c @ w + x), "h")
    return h, ops.cos(h)


def invariant_cell_jax(c, x, w):
    h = jnp.sin(c @ jnp.sin(w) + x)
    return h, jnp.cos(h)


def invariant_cell_spec(c, x, w):
    h = ops.sin(c @ ops.sin(w) + x)
    return h, ops.cos(h)


def _loss_jax(c, ys):
    return jnp.sum(c) + jnp.sum(ys)


def _loss_spec(c, ys):
    return ops.reduce_sum(c, (0,)) + ops.reduce_sum(ys, (0, 1))


# --- program builders

def _scan_prog(cell, spec_cell, ckpt=None, reverse=False):
    """scan(cell) over xs with a shared weight; ckpt: None (no checkpoint),
    or (jax policy thunk, spec policy) to checkpoint the body."""
    def jax_fn(xs, w):
        body = (lambda c, x: cell(c, x, w))
        if ckpt is not None:
            body = jax.checkpoint(body, policy=ckpt[0]() if ckpt[0] else None)
        c, ys = lax.scan(body, xs[0], xs, reverse=reverse)
        return _loss_jax(c, ys)

    def spec_fn(xs, w):
        if ckpt is None:
            body = spec_cell
        else:
            def body(c, x, w):
                return ops.checkpoint(lambda w, c, x: spec_cell(c, x, w), policy=ckpt[1])(w, c, x)
        c, ys = spec.scan(body, _first(xs), xs, consts=(w,), reverse=reverse)
        return _loss_spec(c, ys)
    return jax_fn, spec_fn


def _ckpt_around(jax_policy=None, spec_policy=None):
    """A checkpoint around the whole scan."""
    def jax_fn(xs, w):
        def f(xs, w):
            return lax.scan(lambda c, x: cell_jax(c, x, w), xs[0], xs)
        c, ys = jax.checkpoint(f, policy=jax_policy() if jax_policy else None)(xs, w)
        return _loss_jax(c, ys)

    def spec_fn(xs, w):
        def f(xs, w):
            return spec.scan(cell_spec, _first(xs), xs, consts=(w,))
        c, ys = ops.checkpoint(f, policy=spec_policy)(xs, w)
        return _loss_spec(c, ys)
    return jax_fn, spec_fn


def layers_jax(xs, ws):
    """Scanned layers: the weights are the xs, the activation the carry."""
    layer = jax.checkpoint(lambda h, w: (jnp.tanh(h @ w), jnp.sum(h * h)),
                           policy=jcp.dots_saveable)
    h, norms = lax.scan(layer, xs[0], ws)
    return jnp.sum(h) + jnp.sum(norms)


def layers_spec(xs, ws):
    layer = ops.checkpoint(lambda h, w: (ops.tanh(h @ w), ops.reduce_sum(h * h, (0,))),
                           policy=sp.dots_saveable)
    h, norms = spec.scan(layer, _first(xs), ws)
    return ops.reduce_sum(h, (0,)) + ops.reduce_sum(norms, (0,))


def layers_names_jax(xs, ws):
    def layer(h, w):
        z = adc.checkpoint_name(h @ w, "proj")
        return jnp.tanh(z), jnp.sum(jnp.sin(z))
    h, s = lax.scan(jax.checkpoint(layer, policy=jcp.save_only_these_names("proj")), xs[0], ws)
    return jnp.sum(h) + jnp.sum(s)


def layers_names_spec(xs, ws):
    def layer(h, w):
        z = ops.checkpoint_name(h @ w, "proj")
        return ops.tanh(z), ops.reduce_sum(ops.sin(z), (0,))
    h, s = spec.scan(ops.checkpoint(layer, policy=sp.save_only_these_names("proj")), _first(xs), ws)
    return ops.reduce_sum(h, (0,)) + ops.reduce_sum(s, (0,))


def layers_offload_jax(xs, ws):
    def layer(h, w):
        z = adc.checkpoint_name(h @ w, "proj")
        return jnp.tanh(z), jnp.sum(jnp.sin(z))
    pol = jcp.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["proj"],
        offload_src="device", offload_dst="pinned_host")
    h, s = lax.scan(jax.checkpoint(layer, policy=pol), xs[0], ws)
    return jnp.sum(h) + jnp.sum(s)


def layers_offload_spec(xs, ws):
    def layer(h, w):
        z = ops.checkpoint_name(h @ w, "proj")
        return ops.tanh(z), ops.reduce_sum(ops.sin(z), (0,))
    pol = sp.save_and_offload_only_these_names(
        names_which_can_be_saved=(), names_which_can_be_offloaded=("proj",),
        offload_src="device", offload_dst="pinned_host")
    h, s = spec.scan(ops.checkpoint(layer, policy=pol), _first(xs), ws)
    return ops.reduce_sum(h, (0,)) + ops.reduce_sum(s, (0,))


def two_carries_jax(xs, w):
    def body(carry, x):
        a, b = carry
        a2 = jnp.sin(a @ w) * b
        b2 = jnp.cos(b + x)
        return (a2, b2), a2 * x
    (a, b), ys = lax.scan(body, (xs[0], xs[1]), xs)
    return jnp.sum(a) + jnp.sum(b) + jnp.sum(ys)


def two_carries_spec(xs, w):
    def body(carry, x, w):
        a, b = carry
        a2 = ops.sin(a @ w) * b
        b2 = ops.cos(b + x)
        return (a2, b2), a2 * x
    second = ops.squeeze(ops.slice(xs, (1, 0), (2, D), None), (0,))
    (a, b), ys = spec.scan(body, (_first(xs), second), xs, consts=(w,))
    return ops.reduce_sum(a, (0,)) + ops.reduce_sum(b, (0,)) + ops.reduce_sum(ys, (0, 1))


def no_xs_jax(xs, w):
    c, ys = lax.scan(lambda c, _: (jnp.sin(c @ w), jnp.cos(c)), xs[0], None, length=3)
    return jnp.sum(c) + jnp.sum(ys)


def no_xs_spec(xs, w):
    c, ys = spec.scan(lambda c, _, w: (ops.sin(c @ w), ops.cos(c)), _first(xs), None, consts=(w,), length=3)
    return ops.reduce_sum(c, (0,)) + ops.reduce_sum(ys, (0, 1))


def scan_in_jit_jax(xs, w):
    return jax.jit(scanned_cell)(xs, w)


def scanned_cell(xs, w):                 # jitted by scan_in_jit_jax
    c, ys = lax.scan(lambda c, x: cell_jax(c, x, w), xs[0], xs)
    return _loss_jax(c, ys)


def scan_in_jit_spec(xs, w):
    body = spec.trace(lambda xs, w: _loss_spec(*spec.scan(cell_spec, _first(xs), xs, consts=(w,))),
                      xs.type, w.type)
    (y,) = ops.call(body, xs, w, name="scanned_cell")
    return y


def constant_carried(xs, w):               # jitted by constant_carry_in_jit_jax
    c, _ = lax.scan(lambda c, x: (jnp.floor(c @ w), None), xs[0] * 2.0, xs)
    return c


def constant_carry_in_jit_jax(xs, w):
    return jnp.sum(jax.jit(constant_carried)(xs, w))


def constant_carry_in_jit_spec(xs, w):
    def body(c, x, w):
        return floor(c @ w), None
    jitted = spec.trace(lambda xs, w: spec.scan(body, _first(xs) * 2.0, xs, consts=(w,))[0], xs.type, w.type)
    (c,) = ops.call(jitted, xs, w, name="constant_carried")
    return ops.reduce_sum(c, (0,))


def zero_init_jax(xs, w):
    c, ys = lax.scan(lambda c, x: cell_jax(c, x, w), jnp.zeros(D, jnp.float32), xs)
    return _loss_jax(c, ys)


def zero_init_spec(xs, w):
    c, ys = spec.scan(cell_spec, ops.broadcast_in_dim(np.float32(0), (D,), ()), xs, consts=(w,))
    return _loss_spec(c, ys)


def scalar_zero_init_jax(xs, w):
    c, ys = lax.scan(lambda c, x: (jnp.sum(jnp.sin(x @ w)) * c + jnp.sum(x), jnp.cos(x) * c), np.float32(0.0), xs)
    return c + jnp.sum(ys)


def scalar_zero_init_spec(xs, w):
    def body(c, x, w):
        return ops.reduce_sum(ops.sin(x @ w), (0,)) * c + ops.reduce_sum(x, (0,)), ops.cos(x) * c
    c, ys = spec.scan(body, np.float32(0.0), xs, consts=(w,))
    return c + ops.reduce_sum(ys, (0, 1))


def rule_zero_jax(xs, w):
    def body(c, x):
        one = c ** 0
        return one, one
    c, ys = lax.scan(body, xs[0] * xs[1], xs)
    return _loss_jax(c, ys)


def rule_zero_spec(xs, w):
    second = ops.squeeze(ops.slice(xs, (1, 0), (2, D), None), (0,))

    def body(c, x):
        one = ops.integer_pow(c, 0)
        return one, one
    c, ys = spec.scan(body, _first(xs) * second, xs)
    return _loss_spec(c, ys)


# --- residual order: a body whose tangent half reads its dots' outputs in
# another order than it makes them (b, made second, is read first, by sin's
# JVP, then a by cos's; mul's JVP reads t before s). partial_eval_jaxpr_custom
# collects a scan body's residuals in the order its split first needs them,
# and the known half of the scan returns them in that order.

def crossed_cell_jax(c, x, w, v, u, z, name=False):
    nm = adc.checkpoint_name if name else (lambda y, n: y)
    a = nm(c @ w, "a")                  # f32[5]
    b = nm(x @ v, "b")                  # f32[7]
    s = nm(jnp.sin(b) @ u, "s")         # f32[3]
    t = nm(jnp.cos(a) @ z, "t")         # f32[3]
    return s * t, jnp.tanh(s)


def crossed_cell_spec(c, x, w, v, u, z, name=False):
    nm = ops.checkpoint_name if name else (lambda y, n: y)
    a = nm(c @ w, "a")
    b = nm(x @ v, "b")
    s = nm(ops.sin(b) @ u, "s")
    t = nm(ops.cos(a) @ z, "t")
    return s * t, ops.tanh(s)


def _around_crossed(jax_policy, spec_policy, name=False, layers=False):
    """checkpoint(scan(crossed cell)) with the four weights shared (consts)
    or, with layers, one per iteration (xs)."""
    def jax_fn(xs, w, v, u, z):
        def f(xs, w, v, u, z):
            if layers:
                return lax.scan(lambda c, xw: crossed_cell_jax(c, *xw, name=name), xs[0], (xs, w, v, u, z))
            return lax.scan(lambda c, x: crossed_cell_jax(c, x, w, v, u, z, name), xs[0], xs)
        c, ys = jax.checkpoint(f, policy=jax_policy())(xs, w, v, u, z)
        return _loss_jax(c, ys)

    def spec_fn(xs, w, v, u, z):
        def f(xs, w, v, u, z):
            if layers:
                return spec.scan(lambda c, xw: crossed_cell_spec(c, *xw, name=name), _first(xs),
                                 (xs, w, v, u, z))
            return spec.scan(lambda c, x, w, v, u, z: crossed_cell_spec(c, x, w, v, u, z, name),
                             _first(xs), xs, consts=(w, v, u, z))
        c, ys = ops.checkpoint(f, policy=spec_policy)(xs, w, v, u, z)
        return _loss_spec(c, ys)
    return jax_fn, spec_fn


def hoisted_crossed_jax(xs, w, v, u, z):
    """checkpoint(everything_saveable) around a scan of the crossed cell on
    cos(w): cos(w) and its JVP's sin(w) are loop-invariant, hoisted: the
    closed_call returns them first, then the stacked ones."""
    def f(xs, w, v, u, z):
        return lax.scan(lambda c, x: crossed_cell_jax(c, x, jnp.cos(w), v, u, z), xs[0], xs)
    c, ys = jax.checkpoint(f, policy=jcp.everything_saveable)(xs, w, v, u, z)
    return _loss_jax(c, ys)


def hoisted_crossed_spec(xs, w, v, u, z):
    def f(xs, w, v, u, z):
        return spec.scan(lambda c, x, w, v, u, z: crossed_cell_spec(c, x, ops.cos(w), v, u, z),
                         _first(xs), xs, consts=(w, v, u, z))
    c, ys = ops.checkpoint(f, policy=sp.everything_saveable)(xs, w, v, u, z)
    return _loss_spec(c, ys)


def _crossed_checkpointed_body(jax_policy, spec_policy, around=None):
    """scan(checkpoint(crossed cell)); around: (jax policy thunk, spec
    policy) of a checkpoint around the whole scan, or None."""
    def jax_fn(xs, w, v, u, z):
        def f(xs, w, v, u, z):
            body = jax.checkpoint(lambda c, x: crossed_cell_jax(c, x, w, v, u, z), policy=jax_policy())
            return lax.scan(body, xs[0], xs)
        if around is not None:
            f = jax.checkpoint(f, policy=around[0]())
        c, ys = f(xs, w, v, u, z)
        return _loss_jax(c, ys)

    def spec_fn(xs, w, v, u, z):
        def f(xs, w, v, u, z):
            def body(c, x, w, v, u, z):
                return ops.checkpoint(lambda w, v, u, z, c, x: crossed_cell_spec(c, x, w, v, u, z),
                                      policy=spec_policy)(w, v, u, z, c, x)
            return spec.scan(body, _first(xs), xs, consts=(w, v, u, z))
        if around is not None:
            f = ops.checkpoint(f, policy=around[1])
        c, ys = f(xs, w, v, u, z)
        return _loss_spec(c, ys)
    return jax_fn, spec_fn


def _p(name, pair, in_types, note=""):
    jax_fn, spec_fn = pair
    return TestProgram(name, jax_fn, spec_fn, in_types, note)


PROGRAMS: list[TestProgram] = [
    _p("scan_plain", _scan_prog(cell_jax, cell_spec), XS,
       "the shared weight forwarded, three per-iteration residuals stacked"),
    _p("scan_reverse", _scan_prog(cell_jax, cell_spec, reverse=True), XS),
    _p("scan_loop_invariant", _scan_prog(invariant_cell_jax, invariant_cell_spec), XS,
       "sin(w) and cos(w) hoisted out of the loop"),
    _p("scan_checkpointed_body", _scan_prog(cell_jax, cell_spec, ckpt=(None, None)), XS,
       "only the carry per iteration (and the xs, forwarded)"),
    _p("scan_checkpointed_body_dots", _scan_prog(cell_jax, cell_spec,
                                                 ckpt=(lambda: jcp.dots_saveable, sp.dots_saveable)), XS),
    _p("scan_checkpointed_body_everything", _scan_prog(
        invariant_cell_jax, invariant_cell_spec,
        ckpt=(lambda: jcp.everything_saveable, sp.everything_saveable)), XS,
       "loop-invariant values hoisted out of a checkpointed body"),
    _p("scan_checkpointed_body_names", _scan_prog(
        named_cell_jax, named_cell_spec,
        ckpt=(lambda: jcp.save_only_these_names("h"), sp.save_only_these_names("h"))), XS),
    _p("checkpoint_around_scan", _ckpt_around(), XS, "only the inputs"),
    _p("checkpoint_around_scan_dots", _ckpt_around(lambda: jcp.dots_saveable, sp.dots_saveable), XS,
       "the scan split inside the checkpoint: residuals are outputs of closed_call"),
    _p("checkpoint_around_scan_everything", _ckpt_around(lambda: jcp.everything_saveable,
                                                         sp.everything_saveable), XS),
    _p("scan_layers_dots", (layers_jax, layers_spec), XW,
       "scanned layers (weights as xs), each checkpointed with dots_saveable"),
    _p("scan_layers_names", (layers_names_jax, layers_names_spec), XW),
    _p("scan_layers_offload", (layers_offload_jax, layers_offload_spec), XW,
       "the named projection offloaded to pinned_host, stacked over layers"),
    _p("scan_two_carries", (two_carries_jax, two_carries_spec), XS),
    _p("scan_no_xs", (no_xs_jax, no_xs_spec), XS),
    _p("scan_in_jit", (scan_in_jit_jax, scan_in_jit_spec), XS),
    _p("scan_in_jit_constant_carry", (constant_carry_in_jit_jax, constant_carry_in_jit_spec), XS,
       "a carry the body overwrites with a constant (floor's zero tangent) in a jit: its "
       "tangent is still a tangent (the carry fixpoint), its zero saved by the jit"),
    _p("scan_zero_init_carry", (zero_init_jax, zero_init_spec), XS,
       "a carry starting at zeros: its tangent is instantiated in the linear part, not saved "
       "(fuzzer finding)"),
    _p("scan_scalar_zero_init_carry", (scalar_zero_init_jax, scalar_zero_init_spec), XS,
       "a scalar carry starting at a literal 0.0"),
    _p("scan_rule_made_zero_tangent", (rule_zero_jax, rule_zero_spec), XS,
       "a tangent a JVP rule makes from primals alone (x ** 0) in the body: a known gap "
       "(GAPS in tests/test_recorded_scan_residuals.py)"),
    _p("checkpoint_around_scan_dots_read_crossed", _around_crossed(lambda: jcp.dots_saveable, sp.dots_saveable),
       XS4, "dots saved in the order the tangent half first reads them, not made (b before a)"),
    _p("checkpoint_around_scan_names_read_crossed", _around_crossed(
        lambda: jcp.save_only_these_names("a", "b", "t"), sp.save_only_these_names("a", "b", "t"), name=True),
       XS4, "save_only_these_names over several names: likewise"),
    _p("checkpoint_around_scan_layers_names_crossed", _around_crossed(
        lambda: jcp.save_only_these_names("a", "b", "s", "t"), sp.save_only_these_names("a", "b", "s", "t"),
        name=True, layers=True), XW4, "scanned layers (the four weights as xs), four names saved"),
    _p("checkpoint_around_scan_everything_crossed", _around_crossed(
        lambda: jcp.everything_saveable, sp.everything_saveable), XS4,
       "the body's outputs that no staged equation reads are residuals last (ensure_out_inst)"),
    _p("checkpoint_around_scan_everything_crossed_hoisted", (hoisted_crossed_jax, hoisted_crossed_spec), XS4,
       "loop-invariant residuals (cos(w), sin(w)) first, hoisted, then the stacked ones"),
    _p("scan_checkpointed_body_everything_crossed", _crossed_checkpointed_body(
        lambda: jcp.everything_saveable, sp.everything_saveable), XS4,
       "a checkpointed body (no checkpoint around): the staged remat reads its residuals in "
       "partial_eval_jaxpr_custom's order, the scan stacks them in that order"),
    _p("scan_checkpointed_body_dots_crossed", _crossed_checkpointed_body(
        lambda: jcp.dots_saveable, sp.dots_saveable), XS4),
    _p("checkpoint_around_scan_of_checkpointed_body_crossed", _crossed_checkpointed_body(
        lambda: jcp.dots_saveable, sp.dots_saveable, around=(lambda: jcp.everything_saveable,
                                                              sp.everything_saveable)), XS4,
       "a checkpoint nested in the body of a scan inside a checkpoint: the known remat returns "
       "its residuals in the order the split first needs them"),
]

BY_NAME = {p.name: p for p in PROGRAMS}
assert len(BY_NAME) == len(PROGRAMS)
