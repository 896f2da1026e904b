"""Programs with custom derivatives (jax.custom_jvp / jax.custom_vjp), each
written twice: with JAX and with the spec's builder API (spec.custom_jvp,
spec.custom_vjp), plus the types of their inputs.

The recorder (`tests/record_jax_custom_residuals.py`) stores JAX's
`saved_residuals` and the equations of `jax.make_jaxpr(fn)` (custom call,
checkpoint and jit bodies nested) per program; `tests/test_recorded_custom_
residuals.py` checks the spec against both without importing jax.

Importing this module does not import jax (lazy stand-ins, as in
tests/jax_programs.py). Every rule has the same name in both versions.

The custom functions:

* `scaled_sin` (custom_jvp): 2 sin x, whose rule is the true derivative
  written as (cos x * 2) * t and calls the function itself for the primal.
* `clipped_sin_sin` (custom_vjp): sin(sin x); fwd saves cos x and
  cos(sin x); bwd is the chain rule *clipped to [-0.1, 0.1]* (deliberately
  not the derivative). `named_clipped_sin_sin` names cos x 'r' in fwd.
* `sin_saving_input` (custom_vjp): sin x; fwd saves x itself (a residual
  that is an input: JAX forwards it).
* `relu`: jax.nn.relu (a custom_jvp around a jitted max) and its spec copy.
* `mul_sz` (custom_jvp, symbolic_zeros=True): x * y, whose rule skips the
  terms of unperturbed inputs.
"""
from __future__ import annotations

import numpy as np

import spec
from spec import ops
from spec import policies as sp

from jax_programs import F32, TestProgram, _LazyModule

jax = _LazyModule("jax")
jnp = _LazyModule("jax.numpy")
lax = _LazyModule("jax.lax")
adc = _LazyModule("jax.ad_checkpoint")
jcd = _LazyModule("jax.custom_derivatives")


class _JaxPolicies:
    def __getattr__(self, attr):
        return getattr(jax.checkpoint_policies, attr)


jcp = _JaxPolicies()


# --------------------------------------------------------------------------
# the custom functions, JAX versions (built on first use: jax is lazy)

_JAX: dict = {}


def _jax_fns():
    if _JAX:
        return _JAX

    def scaled_sin(x):
        return jnp.sin(x) * 2.0
    scaled_sin = jax.custom_jvp(scaled_sin)

    def scaled_sin_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return scaled_sin(x), jnp.cos(x) * 2.0 * t
    scaled_sin.defjvp(scaled_sin_jvp)

    def make_clipped(named):
        def clipped_sin_sin(x):
            return jnp.sin(jnp.sin(x))
        f = jax.custom_vjp(clipped_sin_sin)

        def clipped_fwd(x):
            s = jnp.sin(x)
            c = jnp.cos(x)
            if named:
                c = adc.checkpoint_name(c, "r")
            return jnp.sin(s), (c, jnp.cos(s))

        def clipped_bwd(res, ct):
            a, b = res
            return (jnp.minimum(jnp.maximum(ct * a * b, -0.1), 0.1),)
        f.defvjp(clipped_fwd, clipped_bwd)
        return f

    def sin_saving_input(x):
        return jnp.sin(x)
    sin_saving_input = jax.custom_vjp(sin_saving_input)

    def saving_fwd(x):
        return jnp.sin(x), x

    def saving_bwd(x, ct):
        return (ct * jnp.cos(x),)
    sin_saving_input.defvjp(saving_fwd, saving_bwd)

    def mul_sz(x, y):
        return x * y
    mul_sz = jax.custom_jvp(mul_sz)

    def mul_sz_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        SZ = jcd.SymbolicZero
        terms = []
        if type(tx) is not SZ:
            terms.append(tx * y)
        if type(ty) is not SZ:
            terms.append(x * ty)
        out_t = terms[0] if len(terms) == 1 else terms[0] + terms[1]
        return x * y, out_t
    mul_sz.defjvp(mul_sz_jvp, symbolic_zeros=True)

    _JAX.update(scaled_sin=scaled_sin, clipped=make_clipped(False), named=make_clipped(True),
                saving=sin_saving_input, relu=jax.nn.relu, mul_sz=mul_sz)
    return _JAX


# --------------------------------------------------------------------------
# the custom functions, spec versions

def _scaled_sin_spec():
    def scaled_sin(x):
        return ops.sin(x) * 2.0

    def scaled_sin_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), ops.cos(x) * 2.0 * t
    f = spec.custom_jvp(scaled_sin, scaled_sin_jvp)
    return f


def _clipped_spec(named):
    def clipped_sin_sin(x):
        return ops.sin(ops.sin(x))

    def clipped_fwd(x):
        s = ops.sin(x)
        c = ops.cos(x)
        if named:
            c = ops.checkpoint_name(c, "r")
        return ops.sin(s), (c, ops.cos(s))

    def clipped_bwd(res, ct):
        a, b = res
        return (ops.min(ops.max(ct * a * b, -0.1), 0.1),)
    return spec.custom_vjp(clipped_sin_sin, clipped_fwd, clipped_bwd)


def _saving_spec():
    def sin_saving_input(x):
        return ops.sin(x)

    def saving_fwd(x):
        return ops.sin(x), x

    def saving_bwd(x, ct):
        return (ct * ops.cos(x),)
    return spec.custom_vjp(sin_saving_input, saving_fwd, saving_bwd)


def _relu_spec():
    """jax.nn.relu as JAX 0.10.2 defines it: a custom_jvp around a jitted
    `max(x, 0.0)`, whose rule (from `defjvps`) calls relu for the primal and
    selects the tangent where x > 0."""
    def relu(x):
        body = spec.trace(lambda x: ops.max(x, 0.0), x.type)
        return ops.call(body, x, name="relu")[0]

    def jvp(primals, tangents):       # custom_jvp.defjvps: the primal first, then each rule
        (x,), (t,) = primals, tangents
        ans = f(x)
        positive = x > 0.0
        zeros = ops.broadcast_in_dim(np.float32(0.0), x.shape, ())
        return ans, ops.select_n(positive, zeros, t)
    f = spec.custom_jvp(relu, jvp)
    return f


def _mul_sz_spec():
    def mul_sz(x, y):
        return x * y

    def mul_sz_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        terms = []
        if not isinstance(tx, spec.Zero):
            terms.append(tx * y)
        if not isinstance(ty, spec.Zero):
            terms.append(x * ty)
        out_t = terms[0] if len(terms) == 1 else terms[0] + terms[1]
        return x * y, out_t
    return spec.custom_jvp(mul_sz, mul_sz_jvp, symbolic_zeros=True)


# --------------------------------------------------------------------------
# programs

def _sum(x, axes=(0,)):
    return ops.reduce_sum(x, axes)


def _ckpt(jax_body, spec_body, jax_policy=None, spec_policy=None):
    def jax_fn(*args):
        return jax.checkpoint(jax_body, policy=jax_policy() if jax_policy else None)(*args)

    def spec_fn(*args):
        return ops.checkpoint(spec_body, policy=spec_policy)(*args)
    return jax_fn, spec_fn


def jvp_body_jax(x):
    return jnp.sum(jnp.sin(_jax_fns()["scaled_sin"](x)))


def jvp_body_spec(x):
    return _sum(ops.sin(_scaled_sin_spec()(x)))


def jvp_dot_body_jax(x, W):
    return jnp.sum(jnp.sin(_jax_fns()["scaled_sin"](x @ W)))


def jvp_dot_body_spec(x, W):
    return _sum(ops.sin(_scaled_sin_spec()(x @ W)), (0, 1))


def vjp_body(kind):
    def jax_fn(x):
        return jnp.sum(jnp.sin(_jax_fns()[kind](x)))

    def spec_fn(x):
        f = {"clipped": lambda: _clipped_spec(False), "named": lambda: _clipped_spec(True),
             "saving": _saving_spec}[kind]()
        return _sum(ops.sin(f(x)))
    return jax_fn, spec_fn


def relu_mlp_jax(x, W1, W2):
    def layers(x, W1, W2):
        return jnp.sum(jax.nn.relu(x @ W1) @ W2)
    return jax.checkpoint(layers, policy=jcp.dots_saveable)(x, W1, W2)


def relu_mlp_spec(x, W1, W2):
    relu = _relu_spec()

    def layers(x, W1, W2):
        return _sum(relu(x @ W1) @ W2, (0, 1))
    return ops.checkpoint(layers, policy=sp.dots_saveable)(x, W1, W2)


def relu_top_jax(x):
    return jnp.sum(jax.nn.relu(x) * x)


def relu_top_spec(x):
    return _sum(_relu_spec()(x) * x)


def ckpt_in_primal_jax(x):
    def cos_cos(x):
        return jax.checkpoint(lambda y: jnp.cos(jnp.cos(y)))(x)
    f = jax.custom_vjp(cos_cos)

    def cos_cos_fwd(x):
        c = jnp.cos(x)
        return jnp.cos(c), (jnp.sin(x), jnp.sin(c))

    def cos_cos_bwd(res, ct):
        a, b = res
        return (ct * a * b,)
    f.defvjp(cos_cos_fwd, cos_cos_bwd)
    return jnp.sum(jnp.sin(f(x)))


def ckpt_in_primal_spec(x):
    def cos_cos(x):
        return ops.checkpoint(lambda y: ops.cos(ops.cos(y)))(x)

    def cos_cos_fwd(x):
        c = ops.cos(x)
        return ops.cos(c), (ops.sin(x), ops.sin(c))

    def cos_cos_bwd(res, ct):
        a, b = res
        return (ct * a * b,)
    f = spec.custom_vjp(cos_cos, cos_cos_fwd, cos_cos_bwd)
    return _sum(ops.sin(f(x)))


def jitted_clipped(x):          # the jitted function (its name is recorded)
    return jnp.cos(_jax_fns()["clipped"](x))


def vjp_in_jit_jax(x):
    return jnp.sum(jnp.sin(jax.jit(jitted_clipped)(x)))


def vjp_in_jit_spec(x):
    f = _clipped_spec(False)
    body = spec.trace(lambda x: ops.cos(f(x)), x.type)
    (y,) = ops.call(body, x, name="jitted_clipped")
    return _sum(ops.sin(y))


def jvp_in_jit_jax(x):
    def jitted_scaled(x):
        return jnp.cos(_jax_fns()["scaled_sin"](x))
    return jnp.sum(jnp.sin(jax.jit(jitted_scaled)(x)))


def jvp_in_jit_spec(x):
    f = _scaled_sin_spec()
    body = spec.trace(lambda x: ops.cos(f(x)), x.type)
    (y,) = ops.call(body, x, name="jitted_scaled")
    return _sum(ops.sin(y))


def _vmapped(spec_fn, types, x):
    """jax.vmap(fn)(x) in the spec: the batched program, inlined."""
    from spec.core import eval_program_traced
    prog = spec.trace(spec_fn, *types)
    return eval_program_traced(spec.vmap_program(prog, [0], "any", x.shape[0])[0], x)


def vmap_jvp_jax(x):
    return jnp.sum(jnp.sin(jax.vmap(_jax_fns()["scaled_sin"])(x)))


def vmap_jvp_spec(x):
    f = _scaled_sin_spec()
    (y,) = _vmapped(lambda r: f(r), [spec.f32[3]], x)
    return _sum(ops.sin(y), (0, 1))


def vmap_vjp_jax(x):
    return jnp.sum(jnp.sin(jax.vmap(_jax_fns()["clipped"])(x)))


def vmap_vjp_spec(x):
    f = _clipped_spec(False)
    (y,) = _vmapped(lambda r: f(r), [spec.f32[3]], x)
    return _sum(ops.sin(y), (0, 1))


def symbolic_zeros_jax(x):
    return jnp.sum(jnp.sin(_jax_fns()["mul_sz"](x, lax.stop_gradient(jnp.cos(x)))))


def symbolic_zeros_spec(x):
    return _sum(ops.sin(_mul_sz_spec()(x, ops.stop_gradient(ops.cos(x)))))


def symbolic_zeros_both_jax(x, y):
    return jnp.sum(jnp.sin(_jax_fns()["mul_sz"](x, y)))


def symbolic_zeros_both_spec(x, y):
    return _sum(ops.sin(_mul_sz_spec()(x, y)))


# --------------------------------------------------------------------------
# the table

X3 = ((F32, (3,)),)
XW = ((F32, (2, 3)), (F32, (3, 4)))
X23 = ((F32, (2, 3)),)


def _p(name, pair, in_types, note=""):
    jax_fn, spec_fn = pair
    return TestProgram(name, jax_fn, spec_fn, in_types, note)


PROGRAMS: list[TestProgram] = [
    _p("custom_jvp_top", (jvp_body_jax, jvp_body_spec), X3),
    _p("custom_jvp_ckpt_none", _ckpt(jvp_body_jax, jvp_body_spec), X3),
    _p("custom_jvp_ckpt_everything", _ckpt(jvp_body_jax, jvp_body_spec,
                                           lambda: jcp.everything_saveable, sp.everything_saveable), X3),
    _p("custom_jvp_ckpt_nothing", _ckpt(jvp_body_jax, jvp_body_spec,
                                        lambda: jcp.nothing_saveable, sp.nothing_saveable), X3),
    _p("custom_jvp_ckpt_dots", _ckpt(jvp_dot_body_jax, jvp_dot_body_spec,
                                     lambda: jcp.dots_saveable, sp.dots_saveable), XW),
    _p("relu_top", (relu_top_jax, relu_top_spec), X3),
    _p("relu_mlp_ckpt_dots", (relu_mlp_jax, relu_mlp_spec), ((F32, (2, 3)), (F32, (3, 4)), (F32, (4, 2)))),
    _p("custom_vjp_top", vjp_body("clipped"), X3),
    _p("custom_vjp_input_residual_top", vjp_body("saving"), X3, "fwd saves its input: JAX forwards it"),
    _p("custom_vjp_ckpt_none", _ckpt(*vjp_body("clipped")), X3),
    _p("custom_vjp_ckpt_everything", _ckpt(*vjp_body("clipped"),
                                           lambda: jcp.everything_saveable, sp.everything_saveable), X3),
    _p("custom_vjp_named_top", vjp_body("named"), X3),
    _p("custom_vjp_named_ckpt_save_r", _ckpt(*vjp_body("named"), lambda: jcp.save_only_these_names("r"),
                                             sp.save_only_these_names("r")), X3,
       "the name inside fwd is seen by the checkpoint's policy"),
    _p("custom_vjp_unnamed_ckpt_save_r", _ckpt(*vjp_body("clipped"), lambda: jcp.save_only_these_names("r"),
                                               None), X3,
       "the same policy on the unnamed rule saves nothing (spec side: policy None, the builder "
       "rejects a policy naming a name that is never bound)"),
    _p("custom_vjp_input_residual_ckpt_everything", _ckpt(*vjp_body("saving"),
                                                          lambda: jcp.everything_saveable,
                                                          sp.everything_saveable), X3),
    _p("ckpt_inside_custom_vjp_primal", (ckpt_in_primal_jax, ckpt_in_primal_spec), X3),
    _p("custom_vjp_in_jit", (vjp_in_jit_jax, vjp_in_jit_spec), X3),
    _p("custom_jvp_in_jit", (jvp_in_jit_jax, jvp_in_jit_spec), X3),
    _p("custom_jvp_under_vmap", (vmap_jvp_jax, vmap_jvp_spec), X23),
    _p("custom_vjp_under_vmap", (vmap_vjp_jax, vmap_vjp_spec), X23),
    _p("symbolic_zeros_one_unperturbed", (symbolic_zeros_jax, symbolic_zeros_spec), X3),
    _p("symbolic_zeros_both_perturbed", (symbolic_zeros_both_jax, symbolic_zeros_both_spec), X3 + X3),
]

BY_NAME = {p.name: p for p in PROGRAMS}
assert len(BY_NAME) == len(PROGRAMS), "duplicate program names"
