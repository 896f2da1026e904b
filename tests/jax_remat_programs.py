"""Checkpointed test programs (jax.checkpoint = remat2, JAX's default), each
written twice: with JAX (jax.numpy / jax.lax / jax.checkpoint) and with the
spec's builder API (spec.ops.checkpoint), plus the types of their inputs.

The recorder (`tests/record_jax_remat_residuals.py`) stores, per program,
JAX's `saved_residuals` and the equations of `jax.make_jaxpr(fn)` (with
checkpoint and jit bodies nested), and `tests/test_recorded_remat_residuals.py`
checks the spec against both without importing jax, so a residual
disagreement is never just two different programs.

Like tests/jax_programs.py, importing this module does not import jax
(`jax`, `jnp`, `lax`, `adc` are lazy stand-ins).

Notes on matching JAX's tracing:
* every program's top-level function has the same parameter names in both
  versions ("from the argument x" uses them);
* `x @ W` in jax.numpy is `dot_general[preferred_element_type=float32]`, as
  is the spec's `@`;
* jnp.sum(x) of a 1-D x is `reduce_sum[axes=(0,)]`, of a 2-D x
  `reduce_sum[axes=(0, 1)]`;
* JAX's policies come from `jax.checkpoint_policies`, the spec's from
  `spec.policies`; a user policy is the same Python callable for both
  (`prim.name` is the primitive's name in both).
* offloading policies are recorded with offload_src='device',
  offload_dst='pinned_host'; on CPU jax 0.10.2 accepts them, and the
  offloaded residual is "f32<host>[...] output of device_put".
"""
from __future__ import annotations

import numpy as np

import spec
from spec import ops
from spec import policies as sp

from jax_programs import F32, I32, TestProgram, _LazyModule

jax = _LazyModule("jax")
jnp = _LazyModule("jax.numpy")
lax = _LazyModule("jax.lax")
adc = _LazyModule("jax.ad_checkpoint")


class _JaxPolicies:
    """`jcp.dots_saveable` etc.: jax.checkpoint_policies, looked up lazily."""

    def __getattr__(self, attr):
        return getattr(jax.checkpoint_policies, attr)


jcp = _JaxPolicies()

OFFLOAD = dict(offload_src="device", offload_dst="pinned_host")

_BATCH_DN = (((2,), (1,)), ((0,), (0,)))      # f32[2,3,4] x f32[2,4,5] -> f32[2,3,5]


def jname(x, name):
    return adc.checkpoint_name(x, name)


# --------------------------------------------------------------------------
# bodies shared by several programs (JAX version, spec version)

def sin_sin_jax(x):
    return jnp.sum(jnp.sin(jnp.sin(x)))


def sin_sin_spec(x):
    return ops.reduce_sum(ops.sin(ops.sin(x)), (0,))


def dot_sin_jax(x, W):
    return jnp.sum(jnp.sin(x @ W))


def dot_sin_spec(x, W):
    return ops.reduce_sum(ops.sin(x @ W), (0, 1))


def batched_dot_sin_jax(a, b):
    out = lax.dot_general(a, b, _BATCH_DN, preferred_element_type=jnp.float32)
    return jnp.sum(jnp.sin(out))


def batched_dot_sin_spec(a, b):
    out = ops.dot_general(a, b, _BATCH_DN, preferred_element_type=np.float32)
    return ops.reduce_sum(ops.sin(out), (0, 1, 2))


def two_names_jax(x):
    a = jname(jnp.sin(x), "a")
    b = jname(jnp.cos(a), "b")
    return jnp.sum(jnp.sin(b) * a)


def two_names_spec(x):
    a = ops.checkpoint_name(ops.sin(x), "a")
    b = ops.checkpoint_name(ops.cos(a), "b")
    return ops.reduce_sum(ops.sin(b) * a, (0,))


def dot_named_jax(x, W):
    h = jname(jnp.sin(x @ W), "h")
    return jnp.sum(jnp.sin(h))


def dot_named_spec(x, W):
    h = ops.checkpoint_name(ops.sin(x @ W), "h")
    return ops.reduce_sum(ops.sin(h), (0, 1))


# --------------------------------------------------------------------------
# program builders: (jax_fn, spec_fn) pairs

def _ckpt1(jax_body, spec_body, jax_policy=None, spec_policy=None, **kw):
    """A one-argument program that is one checkpoint of `body`."""
    def jax_fn(x):
        return jax.checkpoint(jax_body, policy=jax_policy() if jax_policy else None, **kw)(x)

    def spec_fn(x):
        return ops.checkpoint(spec_body, policy=spec_policy, **kw)(x)
    return jax_fn, spec_fn


def _ckpt2(jax_body, spec_body, jax_policy=None, spec_policy=None, **kw):
    """A two-argument (x, W) program that is one checkpoint of `body`."""
    def jax_fn(x, W):
        return jax.checkpoint(jax_body, policy=jax_policy() if jax_policy else None, **kw)(x, W)

    def spec_fn(x, W):
        return ops.checkpoint(spec_body, policy=spec_policy, **kw)(x, W)
    return jax_fn, spec_fn


# --- nested checkpoints

def nested_body_jax(inner_policy):
    def inner(y):
        return jnp.sin(jnp.sin(y))

    def outer(x):
        y = jnp.cos(x)
        z = jax.checkpoint(inner, policy=inner_policy)(y)
        return jnp.sum(jnp.sin(z))
    return outer


def nested_body_spec(inner_policy):
    def inner(y):
        return ops.sin(ops.sin(y))

    def outer(x):
        y = ops.cos(x)
        z = ops.checkpoint(inner, policy=inner_policy)(y)
        return ops.reduce_sum(ops.sin(z), (0,))
    return outer


def nested_nothing_everything_jax(x):
    return jax.checkpoint(nested_body_jax(jcp.everything_saveable), policy=jcp.nothing_saveable)(x)


def nested_nothing_everything_spec(x):
    return ops.checkpoint(nested_body_spec(sp.everything_saveable), policy=sp.nothing_saveable)(x)


def nested_dots_nothing_jax(x, W):
    def body(x, W):
        h = x @ W                                                      # dot, outer level
        def inner(h, W2):
            return jnp.sin(h @ W2)                                     # dot inside the inner checkpoint
        z = jax.checkpoint(inner, policy=jcp.nothing_saveable)(jnp.sin(h), lax.transpose(W, (1, 0)))
        return jnp.sum(jnp.sin(z))
    return jax.checkpoint(body, policy=jcp.dots_saveable)(x, W)


def nested_dots_nothing_spec(x, W):
    def body(x, W):
        h = x @ W
        def inner(h, W2):
            return ops.sin(h @ W2)
        z = ops.checkpoint(inner, policy=sp.nothing_saveable)(ops.sin(h), ops.transpose(W, (1, 0)))
        return ops.reduce_sum(ops.sin(z), (0, 1))
    return ops.checkpoint(body, policy=sp.dots_saveable)(x, W)


def nested_name_inner_jax(x):
    def inner(y):
        h = jname(jnp.sin(y), "h")
        return jnp.sin(h)

    def body(x):
        return jnp.sum(jnp.sin(jax.checkpoint(inner)(jnp.cos(x))))
    return jax.checkpoint(body, policy=jcp.save_only_these_names("h"))(x)


def nested_name_inner_spec(x):
    def inner(y):
        h = ops.checkpoint_name(ops.sin(y), "h")
        return ops.sin(h)

    def body(x):
        return ops.reduce_sum(ops.sin(ops.checkpoint(inner)(ops.cos(x))), (0,))
    return ops.checkpoint(body, policy=sp.save_only_these_names("h"))(x)


# --- jit and checkpoint

def ckpt_in_jit(x):                      # the jitted function (its name is recorded)
    return jax.checkpoint(lambda y: jnp.sin(jnp.sin(y)))(x)


def ckpt_in_jit_spec_body(x):
    return ops.checkpoint(lambda y: ops.sin(ops.sin(y)))(x)


def checkpoint_in_jit_jax(x):
    return jnp.sum(jnp.cos(jax.jit(ckpt_in_jit)(x)))


def checkpoint_in_jit_spec(x):
    (y,) = ops.call(spec.trace(ckpt_in_jit_spec_body, x.type), x, name="ckpt_in_jit")
    return ops.reduce_sum(ops.cos(y), (0,))


def scaled_sin(x):                       # jitted inside a checkpoint
    return jnp.sin(jnp.sin(x)) * 2.0


def scaled_sin_spec(x):
    return ops.sin(ops.sin(x)) * 2.0


def jit_in_checkpoint_body_jax(x):
    return jnp.sum(jnp.cos(jax.jit(scaled_sin)(x)))


def jit_in_checkpoint_body_spec(x):
    (y,) = ops.call(spec.trace(scaled_sin_spec, x.type), x, name="scaled_sin")
    return ops.reduce_sum(ops.cos(y), (0,))


def cos_of_count(n):                     # jitted twice inside a checkpoint, its input an int:
    return jnp.cos(n.astype(jnp.float32))  # all known, so recomputed whole from n (model finding)


def cos_of_count_spec(n):
    return ops.cos(ops.convert_element_type(n, np.float32))


def nested_jit_of_int_body_jax(x, n):
    return jnp.sum(jnp.sin(x * jax.jit(jax.jit(cos_of_count))(n)))


def nested_jit_of_int_body_spec(x, n):
    inner = spec.trace(lambda m: ops.call(spec.trace(cos_of_count_spec, m.type), m, name="cos_of_count")[0],
                       n.type)
    (y,) = ops.call(inner, n, name="cos_of_count")
    return ops.reduce_sum(ops.sin(x * y), (0,))


SCALE = np.array([0.5, 1.5, -2.0], np.float32)


def scaled_by_constant(x):               # jitted inside a checkpoint, closing over SCALE:
    return jnp.sin(x) * SCALE            # both halves of its split close over it, nothing saves it


def jit_constant_body_jax(x):
    return jnp.sum(jnp.cos(jax.jit(scaled_by_constant)(x)))


def jit_constant_body_spec(x):
    (y,) = ops.call(spec.trace(lambda g: ops.sin(g) * SCALE, x.type), x, name="scaled_by_constant")
    return ops.reduce_sum(ops.cos(y), (0,))


def scaled_by_constant_in_checkpoint(x):   # jitted: a checkpoint closing over SCALE
    return jnp.sin(jax.checkpoint(lambda e: e * SCALE)(x))


def scaled_by_constant_in_checkpoint_spec(x):
    # jax.checkpoint passes the constant it closes over as its first operand
    # (spec.checkpoint takes traced operands only: the equation is bound as is)
    from spec.core import bind
    from spec.remat import remat_p
    body = spec.trace(lambda c, e: e * c, x.type, x.type)
    (y,) = bind(remat_p, SCALE, x, jaxpr=body, policy=None, prevent_cse=True, differentiated=False)
    return ops.sin(y)


def checkpoint_constant_in_jit_jax(x):
    # found by the fuzzer (spelling jit=True): the checkpoint's constant is a
    # const of the jit, which pjit's linearization forwards: "from a constant"
    return jax.jit(scaled_by_constant_in_checkpoint)(x)


def checkpoint_constant_in_jit_spec(x):
    body = spec.trace(scaled_by_constant_in_checkpoint_spec, x.type)
    (y,) = ops.call(body, x, name="scaled_by_constant_in_checkpoint")
    return y


def one_of_dot(x):                       # jitted inside a checkpoint: x.x ** 0 == 1,
    return jnp.dot(x, x) ** 0            # its tangent a literal 0.0 the jit returns


def one_of_dot_spec(x):
    return ops.integer_pow(ops.dot_general(x, x, (((0,), (0,)), ((), ())),
                                           preferred_element_type=np.float32), 0)


def jit_literal_tangent_body_jax(x):
    k = jax.jit(one_of_dot)(x)
    return k * k + jnp.sum(x)


def jit_literal_tangent_body_spec(x):
    (k,) = ops.call(spec.trace(one_of_dot_spec, x.type), x, name="one_of_dot")
    return k * k + ops.reduce_sum(x, (0,))


def max_squared(x):                      # jitted inside a checkpoint
    m = jnp.max(x)
    return m * m


def max_squared_spec(x):
    m = ops.reduce_max(x, (0,))
    return m * m


def jit_max_in_checkpoint_body_jax(x):
    return jax.jit(max_squared)(x)


def jit_max_in_checkpoint_body_spec(x):
    (y,) = ops.call(spec.trace(max_squared_spec, x.type), x, name="max_squared")
    return y


# a jit's residuals are the constants its linearization's tangent trace
# makes, in the order it last made them: a constant whose readers all died
# is made again when read again (spec/tangent_lifetimes.py; nightly finding
# 36736d4f48). e's first reader is f's tangent; whether that tangent
# survives the checkpoint decides e's place.

def _ignores_i(i, j):
    return jnp.sin(jnp.sin(j))


def _reads_i(i, j):
    return jnp.sin(jnp.sin(j)) * jnp.sum(i)


def _ignores_i_spec(i, j):
    return ops.sin(ops.sin(j))


def _reads_i_spec(i, j):
    return ops.sin(ops.sin(j)) * ops.reduce_sum(i, (0,))


def tangent_dies(a, b):                  # f's tangent dies at the checkpoint: e is made again by e * e
    e = jnp.sin(a)
    f = e * e
    y = jax.checkpoint(_ignores_i, policy=jcp.everything_saveable)(f, b)
    return e * e, y


def tangent_read(a, b):                  # the checkpoint reads f's tangent: e's first constant lives
    e = jnp.sin(a)
    f = e * e
    y = jax.checkpoint(_reads_i, policy=jcp.everything_saveable)(f, b)
    return e * e, y


def value_read_later(a, b):              # f is read after the checkpoint: its tangent lives
    e = jnp.sin(a)
    f = e * e
    y = jax.checkpoint(_ignores_i, policy=jcp.everything_saveable)(f, b)
    return e * e + f, y


def _lifetime_spec(name, ckpt_body, read_f_later):
    def body(a, b):
        e = ops.sin(a)
        f = e * e
        y = ops.checkpoint(ckpt_body, policy=sp.everything_saveable)(f, b)
        return (e * e + f if read_f_later else e * e), y

    def program(a, b):
        return tuple(ops.call(spec.trace(body, a.type, b.type), a, b, name=name))
    return program


def _lifetime_jax(fn):
    return lambda a, b: jax.jit(fn)(a, b)


# --- inputs

def int_input_jax(x, n):
    def body(x, n):
        return jnp.sum(jnp.sin(x * lax.convert_element_type(n, jnp.float32)))
    return jax.checkpoint(body)(x, n)


def int_input_spec(x, n):
    def body(x, n):
        return ops.reduce_sum(ops.sin(x * ops.convert_element_type(n, np.float32)), (0,))
    return ops.checkpoint(body)(x, n)


def unused_input_jax(x, unused):
    return jax.checkpoint(lambda x, u: jnp.sum(jnp.sin(jnp.sin(x))))(x, unused)


def unused_input_spec(x, unused):
    return ops.checkpoint(lambda x, u: ops.reduce_sum(ops.sin(ops.sin(x)), (0,)))(x, unused)


def static_argnums_jax(x):
    return jax.checkpoint(lambda x, n: jnp.sum(jnp.sin(x) ** n), static_argnums=(1,))(x, 3)


def static_argnums_spec(x):
    return ops.checkpoint(lambda x, n: ops.reduce_sum(ops.integer_pow(ops.sin(x), n), (0,)),
                          static_argnums=(1,))(x, 3)


def intermediate_input_jax(x):
    s = jnp.sin(x)
    return jax.checkpoint(lambda s: jnp.sum(jnp.sin(jnp.sin(s)) * s))(s)


def intermediate_input_spec(x):
    s = ops.sin(x)
    return ops.checkpoint(lambda s: ops.reduce_sum(ops.sin(ops.sin(s)) * s, (0,)))(s)


def two_outputs_jax(x):
    a, b = jax.checkpoint(lambda x: (jnp.sin(jnp.sin(x)), jnp.cos(x)))(x)
    return jnp.sum(a * b)


def two_outputs_spec(x):
    a, b = ops.checkpoint(lambda x: (ops.sin(ops.sin(x)), ops.cos(x)))(x)
    return ops.reduce_sum(a * b, (0,))


# --- names

def unused_name_body_jax(x):
    h = jname(jnp.sin(x), "h")          # the backward pass of add does not read h
    return jnp.sum(jnp.cos(x) + h)


def unused_name_body_spec(x):
    h = ops.checkpoint_name(ops.sin(x), "h")
    return ops.reduce_sum(ops.cos(x) + h, (0,))


def name_used_twice_body_jax(x):
    h = jname(jnp.sin(x), "h")
    return jnp.sum(jnp.sin(h) * h)


def name_used_twice_body_spec(x):
    h = ops.checkpoint_name(ops.sin(x), "h")
    return ops.reduce_sum(ops.sin(h) * h, (0,))


def name_and_operand_body_jax(x):
    s = jnp.sin(x)
    h = jname(s, "h")                   # s is needed unnamed too, so it is saved either way
    return jnp.sum(jnp.sin(h) * h * s)


def name_and_operand_body_spec(x):
    s = ops.sin(x)
    h = ops.checkpoint_name(s, "h")
    return ops.reduce_sum(ops.sin(h) * h * s, (0,))


def mul_literal_body_jax(x):
    return jnp.sum(jnp.sin(jnp.sin(x) * 2.0))


def mul_literal_body_spec(x):
    return ops.reduce_sum(ops.sin(ops.sin(x) * 2.0), (0,))


# --- MLP

def mlp_jax(x, W, b):
    def layer(x, W, b):
        return jnp.sum(jnp.tanh(lax.add(x @ W, lax.broadcast_in_dim(b, (2, 4), (1,)))))
    return jax.checkpoint(layer, policy=jcp.dots_saveable)(x, W, b)


def mlp_spec(x, W, b):
    def layer(x, W, b):
        return ops.reduce_sum(ops.tanh(ops.add(x @ W, ops.broadcast_in_dim(b, (2, 4), (1,)))), (0, 1))
    return ops.checkpoint(layer, policy=sp.dots_saveable)(x, W, b)


# --- user policy

def save_sin_outputs(prim, *_, **__):
    """A user policy: save the outputs of `sin`."""
    return prim.name == "sin"


# --------------------------------------------------------------------------
# the table

X3 = ((F32, (3,)),)
XW = ((F32, (2, 3)), (F32, (3, 4)))
AB = ((F32, (2, 3, 4)), (F32, (2, 4, 5)))


def _p(name, pair, in_types, note=""):
    jax_fn, spec_fn = pair
    return TestProgram(name, jax_fn, spec_fn, in_types, note)


PROGRAMS: list[TestProgram] = [
    # one checkpoint, each policy
    _p("policy_none", _ckpt1(sin_sin_jax, sin_sin_spec), X3),
    _p("everything_saveable", _ckpt1(sin_sin_jax, sin_sin_spec,
                                     lambda: jcp.everything_saveable, sp.everything_saveable), X3),
    _p("nothing_saveable", _ckpt1(sin_sin_jax, sin_sin_spec,
                                  lambda: jcp.nothing_saveable, sp.nothing_saveable), X3),
    _p("dots_saveable", _ckpt2(dot_sin_jax, dot_sin_spec,
                               lambda: jcp.dots_saveable, sp.dots_saveable), XW),
    _p("dots_no_batch_unbatched", _ckpt2(dot_sin_jax, dot_sin_spec,
                                         lambda: jcp.dots_with_no_batch_dims_saveable,
                                         sp.dots_with_no_batch_dims_saveable), XW,
       "saves the dot (no batch dims)"),
    _p("dots_no_batch_batched", _ckpt2(batched_dot_sin_jax, batched_dot_sin_spec,
                                       lambda: jcp.dots_with_no_batch_dims_saveable,
                                       sp.dots_with_no_batch_dims_saveable), AB,
       "does not save the batched dot"),
    _p("dots_saveable_batched", _ckpt2(batched_dot_sin_jax, batched_dot_sin_spec,
                                       lambda: jcp.dots_saveable, sp.dots_saveable), AB,
       "dots_saveable does save the batched dot"),
    _p("save_only_these_names_two", _ckpt1(two_names_jax, two_names_spec,
                                           lambda: jcp.save_only_these_names("a", "b"),
                                           sp.save_only_these_names("a", "b")), X3),
    _p("save_only_these_names_one_of_two", _ckpt1(two_names_jax, two_names_spec,
                                                  lambda: jcp.save_only_these_names("b"),
                                                  sp.save_only_these_names("b")), X3),
    _p("save_any_names_but_these", _ckpt1(two_names_jax, two_names_spec,
                                          lambda: jcp.save_any_names_but_these("b"),
                                          sp.save_any_names_but_these("b")), X3),
    _p("save_anything_except_these_names", _ckpt1(
        name_and_operand_body_jax, name_and_operand_body_spec,
        lambda: jcp.save_anything_except_these_names("h"),
        sp.save_anything_except_these_names("h")), X3,
       "known divergence: jax 0.10.2 saves everything, 'h' too"),
    _p("everything_saveable_name_and_operand", _ckpt1(
        name_and_operand_body_jax, name_and_operand_body_spec,
        lambda: jcp.everything_saveable, sp.everything_saveable), X3,
       "what JAX's save_anything_except_these_names('h') stub gives on the same program"),
    _p("save_and_offload_only_these_names", _ckpt1(
        two_names_jax, two_names_spec,
        lambda: jcp.save_and_offload_only_these_names(
            names_which_can_be_saved=["a"], names_which_can_be_offloaded=["b"], **OFFLOAD),
        sp.save_and_offload_only_these_names(
            names_which_can_be_saved=["a"], names_which_can_be_offloaded=["b"], **OFFLOAD)), X3),
    _p("offload_dot_with_no_batch_dims", _ckpt2(dot_sin_jax, dot_sin_spec,
                                                lambda: jcp.offload_dot_with_no_batch_dims(**OFFLOAD),
                                                sp.offload_dot_with_no_batch_dims(**OFFLOAD)), XW),
    _p("save_from_both_policies", _ckpt2(
        dot_named_jax, dot_named_spec,
        lambda: jcp.save_from_both_policies(jcp.dots_saveable, jcp.save_only_these_names("h")),
        sp.save_from_both_policies(sp.dots_saveable, sp.save_only_these_names("h"))), XW),
    _p("dots_saveable_with_name", _ckpt2(dot_named_jax, dot_named_spec,
                                         lambda: jcp.dots_saveable, sp.dots_saveable), XW,
       "the same program as save_from_both_policies, one policy"),
    _p("user_policy_save_sin", _ckpt1(sin_sin_jax, sin_sin_spec,
                                      lambda: save_sin_outputs, save_sin_outputs), X3),
    _p("everything_saveable_names", _ckpt1(two_names_jax, two_names_spec,
                                           lambda: jcp.everything_saveable, sp.everything_saveable), X3),
    # names
    _p("unused_name", _ckpt1(unused_name_body_jax, unused_name_body_spec,
                             lambda: jcp.save_only_these_names("h"), sp.save_only_these_names("h")), X3,
       "h is named but the backward pass does not read it"),
    _p("name_used_twice", _ckpt1(name_used_twice_body_jax, name_used_twice_body_spec,
                                 lambda: jcp.save_only_these_names("h"), sp.save_only_these_names("h")), X3),
    _p("mul_literal_none", _ckpt1(mul_literal_body_jax, mul_literal_body_spec), X3,
       "a scalar literal inside the checkpoint"),
    # nested checkpoints
    _p("nested_nothing_outer_everything_inner",
       (nested_nothing_everything_jax, nested_nothing_everything_spec), X3),
    _p("nested_everything_outer_nothing_inner", (
        lambda x: jax.checkpoint(nested_body_jax(jcp.nothing_saveable), policy=jcp.everything_saveable)(x),
        lambda x: ops.checkpoint(nested_body_spec(sp.nothing_saveable), policy=sp.everything_saveable)(x)),
       X3, "the inner policy is not consulted: the inner checkpoint's values are saved"),
    _p("nested_dots_outer_nothing_inner", (nested_dots_nothing_jax, nested_dots_nothing_spec), XW),
    _p("nested_name_inner_save_only_outer", (nested_name_inner_jax, nested_name_inner_spec), X3),
    # jit
    _p("checkpoint_in_jit", (checkpoint_in_jit_jax, checkpoint_in_jit_spec), X3),
    _p("jit_in_checkpoint", _ckpt1(jit_in_checkpoint_body_jax, jit_in_checkpoint_body_spec), X3),
    _p("nested_jit_of_known_input_in_checkpoint",
       _ckpt2(nested_jit_of_int_body_jax, nested_jit_of_int_body_spec), ((F32, (3,)), (I32, (3,))),
       "a jit in a jit whose inputs are all known is recomputed from them, not saved (found by "
       "random.normal of a key in tests/models)"),
    _p("jit_constant_in_checkpoint", _ckpt1(jit_constant_body_jax, jit_constant_body_spec), X3,
       "the jit's constant is shared by both halves of its split, not saved (fuzzer finding)"),
    _p("jit_constant_in_checkpoint_everything_saveable",
       _ckpt1(jit_constant_body_jax, jit_constant_body_spec, lambda: jcp.everything_saveable,
              sp.everything_saveable), X3),
    _p("jit_literal_tangent_in_checkpoint", _ckpt1(jit_literal_tangent_body_jax, jit_literal_tangent_body_spec),
       X3, "the jit's literal tangent output is recomputed with it, not saved (fuzzer finding)"),
    _p("jit_residual_order_in_checkpoint", _ckpt1(jit_max_in_checkpoint_body_jax, jit_max_in_checkpoint_body_spec,
                                                  lambda: jcp.everything_saveable, sp.everything_saveable),
       X3, "a jit's residuals inside a checkpoint are returned in first-use order (fuzzer finding)"),
    _p("checkpoint_constant_in_jit", (checkpoint_constant_in_jit_jax, checkpoint_constant_in_jit_spec), X3,
       "the checkpoint's constant is the jit's, saved as the constant (fuzzer finding)"),
    _p("jit_tangent_dies_at_checkpoint", (_lifetime_jax(tangent_dies), _lifetime_spec(
        "tangent_dies", _ignores_i_spec, False)), ((F32, (2,)), (F32, (3,))),
       "e's constant dies with f's tangent and is made again after the checkpoint's (nightly finding)"),
    _p("jit_tangent_read_by_checkpoint", (_lifetime_jax(tangent_read), _lifetime_spec(
        "tangent_read", _reads_i_spec, False)), ((F32, (2,)), (F32, (3,)))),
    _p("jit_value_read_after_checkpoint", (_lifetime_jax(value_read_later), _lifetime_spec(
        "value_read_later", _ignores_i_spec, True)), ((F32, (2,)), (F32, (3,)))),
    _p("jit_in_checkpoint_everything", _ckpt1(jit_in_checkpoint_body_jax, jit_in_checkpoint_body_spec,
                                              lambda: jcp.everything_saveable, sp.everything_saveable), X3),
    # inputs and outputs
    _p("int_input", (int_input_jax, int_input_spec), ((F32, (3,)), (I32, (3,)))),
    _p("unused_input", (unused_input_jax, unused_input_spec), ((F32, (3,)), (F32, (5,)))),
    _p("prevent_cse_false", _ckpt1(sin_sin_jax, sin_sin_spec, prevent_cse=False), X3),
    _p("static_argnums", (static_argnums_jax, static_argnums_spec), X3),
    _p("intermediate_input", (intermediate_input_jax, intermediate_input_spec), X3,
       "the checkpoint's input is sin(x), computed outside"),
    _p("two_outputs", (two_outputs_jax, two_outputs_spec), X3),
    # an MLP layer
    _p("mlp_layer_dots_saveable", (mlp_jax, mlp_spec), ((F32, (2, 3)), (F32, (3, 4)), (F32, (4,)))),
]

BY_NAME = {p.name: p for p in PROGRAMS}
assert len(BY_NAME) == len(PROGRAMS), "duplicate program names"
