"""Realistic functions for `oracle.check` (tests/test_oracle.py): MLP and
attention blocks, layer norms, residual connections, named intermediates,
nested checkpoints, jit and vmap inside, integer inputs, scalar, vector and
several outputs -- each paired with a checkpoint policy, its argument specs,
and the known divergences of jax 0.10.2 that `oracle.check` must report for
it, exactly (oracle/divergences.py).

Everything is float32 (plus int32 where an integer input is the point).
Mostly plain primitives: the softmax is written by hand
(exp(s - stop_gradient(max)) / sum; in jax 0.10.2 jax.nn.softmax happens to
be plain primitives too, see test_jax_nn_softmax_is_supported_in_0_10_2),
GELU is the tanh approximation written with jnp ops (jnp.tanh, `x ** 3` =
integer_pow), ReLU is `jnp.maximum(x, 0.)` (max), layer norm uses jnp.mean
(reduce_sum + div) and lax.rsqrt.

Most arguments are realistic arrays (activations ~ N(0, 1), weights ~
N(0, 1/fan_in)); a few cases pass jax.ShapeDtypeStructs, whose values
oracle.check draws uniform in [0.5, 1.5]. With such all-positive draws an
MLP saturates (tanh(100) == 1: every derivative 0, nothing is tested) and
attention becomes ill conditioned, where oracle.check raises false alarms
(tests/test_oracle.py::test_false_alarm_tolerance_on_default_draws).

Importing this module imports jax (tests/test_oracle.py skips without it).

Expected divergences, per case, as (name, property, implementation):

* ARGS3 -- 'remat3-names-arguments-args[i]' on residuals under remat3: JAX's
  remat3 calls the checkpoint's arguments `args[i]`; the oracle renames them
  and records that it did. Expected for every case with a policy (the
  checkpoint is the function under test, and remat3 saves some argument);
  not for policy=oracle.AS_IS, where the function as written keeps its
  parameter names.
* REMAT3_DOTS_NAMES -- 'remat3-policy-only-for-dots-and-names': remat3 asks
  the policy only about dot_general and checkpoint_name, so a built-in policy
  that would save anything else (everything_saveable saving a tanh, say)
  saves less.
* REMAT3_FULL -- 'remat3-unrecognised-policy-is-full-remat': a user callable,
  save_from_both_policies, an offload policy or
  save_anything_except_these_names is ignored by remat3 (nothing saved but
  the inputs) -- reported only where that changes the residuals.
* REMAT3_NAME_VMAP -- 'remat3-checkpoint-name-has-no-batching-rule': vmap of
  a function that calls checkpoint_name fails under remat3.
* STUB -- 'save-anything-except-these-names-is-a-stub' under remat2 (JAX's
  version saves the excluded names too) where a name it excludes would be
  saved otherwise.
* REMAT3_CSE -- 'remat3-barrier-iff-backward-reads-checkpoint-inputs'.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax.ad_checkpoint import checkpoint_name

import oracle
from spec import policies as sp

cp = jax.checkpoint_policies
f32 = jnp.float32


def S(*shape, dtype=f32):
    return jax.ShapeDtypeStruct(shape, dtype)


# --------------------------------------------------------------------------
# expected divergences

ARGS3 = ("remat3-names-arguments-args[i]", "residuals", "remat3")
REMAT3_DOTS_NAMES = ("remat3-policy-only-for-dots-and-names", "residuals", "remat3")
REMAT3_FULL = ("remat3-unrecognised-policy-is-full-remat", "residuals", "remat3")
REMAT3_NAME_VMAP = ("remat3-checkpoint-name-has-no-batching-rule", "vmap", "remat3")
STUB = ("save-anything-except-these-names-is-a-stub", "residuals", "remat2")
REMAT3_CSE = ("remat3-barrier-iff-backward-reads-checkpoint-inputs", "prevent_cse", "remat3")
REMAT3_ZERO_OUT = ("remat3-misses-zero-tangents-out-of-checkpoints", "residuals", "remat3")
REMAT3_ZERO_IN = ("remat3-instantiates-zero-tangents-into-checkpoints", "residuals", "remat3")
REMAT3_NESTED = ("remat3-ignores-enclosing-policy-in-nested-checkpoints", "residuals", "remat3")
REMAT3_INPUTS_FIRST = ("remat3-linearized-checkpoint-reads-inputs-first", "residuals", "remat3")
REMAT3_SCAN = ("remat3-scan-in-checkpoint-saves-scan-outputs", "residuals", "remat3")


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable
    policy: Any                       # JAX policy, spec policy, None, or oracle.AS_IS
    args: tuple                       # jax.ShapeDtypeStruct (or arrays)
    divergences: frozenset = frozenset()   # (name, property, implementation)
    properties: tuple | None = None   # None: all of oracle.check's properties
    note: str = ""

    __test__ = False

    def __repr__(self):
        return f"Case({self.name})"


CASES: list[Case] = []


def case(name, policy, args, divergences=None, properties=None, note=""):
    if divergences is None:       # remat3 names a top-level checkpoint's arguments args[i]
        divergences = () if policy is oracle.AS_IS else (ARGS3,)

    def register(fn):
        CASES.append(Case(name, fn, policy, tuple(args), frozenset(divergences), properties, note))
        return fn
    return register


# --------------------------------------------------------------------------
# building blocks

def gelu(x):
    """GELU, tanh approximation (jax.nn.gelu(approximate=True)), with jnp ops."""
    return 0.5 * x * (1.0 + jnp.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def relu(x):
    return jnp.maximum(x, 0.0)


def softmax(s, axis=-1):
    """Numerically stable softmax without custom_jvp."""
    m = lax.stop_gradient(jnp.max(s, axis=axis, keepdims=True))
    e = jnp.exp(s - m)
    return e / jnp.sum(e, axis=axis, keepdims=True)


def log_softmax(s, axis=-1):
    m = lax.stop_gradient(jnp.max(s, axis=axis, keepdims=True))
    z = s - m
    return z - jnp.log(jnp.sum(jnp.exp(z), axis=axis, keepdims=True))


def layer_norm(x, g, b, eps=1e-5):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    var = jnp.mean(xc * xc, axis=-1, keepdims=True)
    return xc * lax.rsqrt(var + eps) * g + b


def rms_norm(x, g, eps=1e-6):
    ms = jnp.mean(jnp.square(x), axis=-1, keepdims=True)
    return x * lax.rsqrt(ms + eps) * g


def attention(q, k, v):
    """Single-head attention with a leading batch dim: q, k, v f32[B, T, D]."""
    d = q.shape[-1]
    s = jnp.einsum("bqd,bkd->bqk", q, k) / np.float32(np.sqrt(d))
    p = softmax(s)
    return jnp.einsum("bqk,bkd->bqd", p, v)


def split_heads(x, h):
    t, d = x.shape
    return jnp.transpose(x.reshape(t, h, d // h), (1, 0, 2))       # [H, T, Dh]


def merge_heads(x):
    h, t, dh = x.shape
    return jnp.transpose(x, (1, 0, 2)).reshape(t, h * dh)


_MHA_SCORES = (((2,), (2,)), ((0,), (0,)))      # [H,T,Dh] x [H,T,Dh] -> [H,T,T]
_MHA_VALUES = (((2,), (1,)), ((0,), (0,)))      # [H,T,T] x [H,T,Dh] -> [H,T,Dh]


def mha(x, wq, wk, wv, wo, heads=2, names=False, mask=None):
    """Multi-head self-attention on x f32[T, D], batch dims via lax.dot_general."""
    q, k, v = (split_heads(x @ w, heads) for w in (wq, wk, wv))
    dh = q.shape[-1]
    s = lax.dot_general(q, k, _MHA_SCORES, preferred_element_type=f32) * np.float32(1 / np.sqrt(dh))
    if mask is not None:
        s = s + mask
    if names:
        s = checkpoint_name(s, "scores")
    p = softmax(s)
    if names:
        p = checkpoint_name(p, "probs")
    o = lax.dot_general(p, v, _MHA_VALUES, preferred_element_type=f32)
    return merge_heads(o) @ wo


T, D, H = 4, 8, 16          # tokens, model width, MLP hidden width
_RNG = np.random.default_rng(20261201)


def normal(*shape, scale=1.0):
    """A realistic f32 array: activations ~ N(0, 1), weights ~ N(0, 1/fan_in)."""
    return (_RNG.standard_normal(shape) * scale).astype(np.float32)


def weight(fan_in, fan_out):
    return normal(fan_in, fan_out, scale=1 / np.sqrt(fan_in))


# realistic arrays (most cases) ...
X = normal(T, D)
W_DH, W_HD, W_DD = weight(D, H), weight(H, D), weight(D, D)
WQ, WK, WV, WO = (weight(D, D) for _ in range(4))
B_H, B_D = normal(H, scale=0.1), normal(D, scale=0.1)
G_D = (1 + normal(D, scale=0.1)).astype(np.float32)
BTD = normal(2, T, D)
Q, K, V = (normal(2, T, D) for _ in range(3))
# ... and specs, whose values oracle.check draws (uniform in [0.5, 1.5])
SX, SVEC_D = S(T, D), S(D)
CAUSAL = np.triu(np.full((T, T), -1e9, np.float32), k=1)


# --------------------------------------------------------------------------
# MLP blocks

@case("mlp_gelu_dots_saveable", cp.dots_saveable, (X, W_DH, B_H, W_HD),
      note="the canonical remat policy: save the matmul outputs, recompute GELU")
def mlp_gelu(x, w1, b1, w2):
    return jnp.sum(gelu(x @ w1 + b1) @ w2)


@case("mlp_gelu_checkpoint_dots", cp.checkpoint_dots, (X, W_DH, B_H, W_HD),
      note="checkpoint_dots is the old name of dots_saveable")
def mlp_gelu_old_name(x, w1, b1, w2):
    return jnp.sum(jnp.square(gelu(x @ w1 + b1) @ w2))


@case("mlp_relu_nothing_saveable", cp.nothing_saveable, (X, W_DH, B_H, W_HD, B_D))
def mlp_relu(x, w1, b1, w2, b2):
    return relu(x @ w1 + b1) @ w2 + b2                              # vector (matrix) output


@case("mlp_relu_default_policy", None, (X, W_DH, W_HD),
      note="jax.checkpoint's default policy (None) saves nothing but the inputs")
def mlp_relu_default(x, w1, w2):
    return jnp.mean(relu(x @ w1) @ w2)


@case("mlp_gelu_everything_saveable", cp.everything_saveable, (X, W_DH, B_H, W_HD),
      divergences=(ARGS3, REMAT3_DOTS_NAMES),
      note="remat3 saves the dots but recomputes the GELU's tanh and powers")
def mlp_gelu_everything(x, w1, b1, w2):
    return jnp.sum(gelu(x @ w1 + b1) @ w2)


@case("mlp_relu_dots_no_batch_dims", cp.dots_with_no_batch_dims_saveable, (X, W_DH, W_HD))
def mlp_relu_no_batch(x, w1, w2):
    return jnp.sum(relu(x @ w1) @ w2)


@case("mlp_gelu_checkpoint_dots_no_batch_dims", cp.checkpoint_dots_with_no_batch_dims, (BTD, W_DH, W_HD),
      note="a rank-3 activation times a matrix: dots without batch dims")
def mlp_gelu_rank3(x, w1, w2):
    return jnp.sum(gelu(jnp.einsum("btd,dh->bth", x, w1)) @ w2)


@case("mlp_gelu_user_saves_tanh", lambda prim, *_, **__: prim.name == "tanh",
      (X, W_DH, B_H, W_HD), divergences=(ARGS3, REMAT3_FULL),
      note="a user policy saving the tanh inside the GELU; remat3 ignores it")
def mlp_gelu_user_tanh(x, w1, b1, w2):
    return jnp.sum(gelu(x @ w1 + b1) @ w2)


def save_big_2d_dots(prim, *avals, **params):
    """A user policy that reads avals and params: save dot_general outputs of
    2-D operands with no batch dims and a contraction over at most 8."""
    if prim.name != "dot_general":
        return False
    (lc, _), (lb, _) = params["dimension_numbers"]
    return all(a.ndim == 2 for a in avals) and not lb and avals[0].shape[lc[0]] <= 8


@case("mlp_user_policy_reads_avals", save_big_2d_dots, (X, W_DH, W_HD),
      divergences=(ARGS3, REMAT3_FULL),
      note="saves x @ w1 (contraction over 8) but not h @ w2 (contraction over 16)")
def mlp_user_avals(x, w1, w2):
    return jnp.sum(jnp.tanh(relu(x @ w1) @ w2))


@case("mlp_named_save_only_these_names", cp.save_only_these_names("hidden"),
      (X, W_DH, B_H, W_HD), divergences=(ARGS3, REMAT3_NAME_VMAP))
def mlp_named(x, w1, b1, w2):
    h = checkpoint_name(x @ w1 + b1, "hidden")
    a = checkpoint_name(gelu(h), "act")
    return jnp.sum(a @ w2)


@case("mlp_named_save_any_names_but_these", cp.save_any_names_but_these("hidden"),
      (X, W_DH, B_H, W_HD), divergences=(ARGS3, REMAT3_NAME_VMAP))
def mlp_named_but(x, w1, b1, w2):
    h = checkpoint_name(x @ w1 + b1, "hidden")
    a = checkpoint_name(gelu(h), "act")
    return jnp.sum(jnp.tanh(a @ w2))


@case("mlp_spec_save_anything_except_these_names", sp.save_anything_except_these_names("act"),
      (X, W_DH, B_H, W_HD), divergences=(ARGS3, STUB, REMAT3_FULL, REMAT3_NAME_VMAP),
      note="spec policy: JAX's version forgets its names (and is a stub saving everything)")
def mlp_named_except(x, w1, b1, w2):
    h = checkpoint_name(x @ w1 + b1, "hidden")
    a = checkpoint_name(gelu(h), "act")
    return jnp.sum(jnp.tanh(a @ w2))


@case("mlp_save_from_both_policies",
      cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("act")),
      (X, W_DH, B_H, W_HD), divergences=(ARGS3, REMAT3_FULL, REMAT3_NAME_VMAP))
def mlp_both(x, w1, b1, w2):
    a = checkpoint_name(gelu(x @ w1 + b1), "act")
    return jnp.sum(jnp.tanh(a @ w2))


@case("mlp_offload_dot_with_no_batch_dims", cp.offload_dot_with_no_batch_dims("device", "pinned_host"),
      (X, W_DH, W_HD), divergences=(ARGS3, REMAT3_FULL))
def mlp_offload_dots(x, w1, w2):
    return jnp.sum(gelu(x @ w1) @ w2)


@case("mlp_save_and_offload_only_these_names",
      cp.save_and_offload_only_these_names(names_which_can_be_saved=["hidden"],
                                           names_which_can_be_offloaded=["act"],
                                           offload_src="device", offload_dst="pinned_host"),
      (X, W_DH, W_HD), divergences=(ARGS3, REMAT3_FULL, REMAT3_NAME_VMAP))
def mlp_offload_names(x, w1, w2):
    h = checkpoint_name(x @ w1, "hidden")
    a = checkpoint_name(gelu(h), "act")
    return jnp.sum(jnp.tanh(a @ w2))


@case("mlp_spec_dots_saveable", sp.dots_saveable, (X, W_DH, W_HD),
      note="a spec policy handed to oracle.check (turned into JAX's dots_saveable)")
def mlp_spec_policy(x, w1, w2):
    return jnp.sum(jnp.tanh(relu(x @ w1) @ w2))


# --------------------------------------------------------------------------
# attention

@case("attention_einsum_dots_saveable", cp.dots_saveable, (Q, K, V),
      note="batched einsums (dot_general with batch dims) are saved")
def attention_einsum(q, k, v):
    return jnp.sum(attention(q, k, v))


@case("attention_einsum_dots_no_batch_dims", cp.dots_with_no_batch_dims_saveable, (BTD, WQ, WK, WV),
      note="the projections (no batch dims) are saved, the batched score and value dots are not")
def attention_projections(x, wq, wk, wv):
    q, k, v = (jnp.einsum("btd,de->bte", x, w) for w in (wq, wk, wv))
    return jnp.sum(attention(q, k, v) * x)


@case("mha_dot_general_nothing_saveable", cp.nothing_saveable, (X, WQ, WK, WV, WO))
def mha_nothing(x, wq, wk, wv, wo):
    return mha(x, wq, wk, wv, wo)                                   # matrix output


@case("mha_named_save_only_probs", cp.save_only_these_names("probs"), (X, WQ, WK, WV, WO),
      divergences=(ARGS3, REMAT3_NAME_VMAP),
      note="'scores' is named but not saved; 'probs' is saved")
def mha_named(x, wq, wk, wv, wo):
    return jnp.sum(jnp.tanh(mha(x, wq, wk, wv, wo, names=True)))


@case("mha_causal_everything_saveable", cp.everything_saveable, (X, WQ, WK, WV, WO),
      divergences=(ARGS3, REMAT3_DOTS_NAMES),
      note="an additive causal mask (a numpy constant)")
def mha_causal(x, wq, wk, wv, wo):
    return jnp.sum(mha(x, wq, wk, wv, wo, mask=CAUSAL) ** 2)


@case("attention_jit_softmax_dots_saveable", cp.dots_saveable, (Q, K, V),
      note="the softmax is a jax.jit-ed function inside the checkpoint")
def attention_jit_softmax(q, k, v):
    s = jnp.einsum("bqd,bkd->bqk", q, k)
    p = jax.jit(softmax)(s)
    return jnp.sum(jnp.einsum("bqk,bkd->bqd", p, v))


@case("cross_entropy_save_any_names_but_these", cp.save_any_names_but_these("logits"),
      (X, W_DD, S(T, D)), divergences=(ARGS3, REMAT3_NAME_VMAP),
      note="softmax cross entropy with soft labels: a scalar loss")
def cross_entropy(x, w, labels):
    logits = checkpoint_name(x @ w, "logits")
    logp = checkpoint_name(log_softmax(logits), "logp")
    return -jnp.sum(labels * logp) / T


# --------------------------------------------------------------------------
# layer norm and residual connections

@case("layer_norm_nothing_saveable", cp.nothing_saveable, (SX, SVEC_D, SVEC_D))
def layer_norm_only(x, g, b):
    return layer_norm(x, g, b)                                      # matrix output


@case("rms_norm_everything_saveable", cp.everything_saveable, (SX, SVEC_D),
      divergences=(ARGS3, REMAT3_DOTS_NAMES))
def rms_norm_only(x, g):
    return jnp.sum(jnp.sin(rms_norm(x, g)))


@case("pre_ln_residual_mlp_dots_saveable", cp.dots_saveable, (X, G_D, B_D, W_DH, W_HD),
      note="x + MLP(LN(x)): the residual stream")
def pre_ln_mlp(x, g, b, w1, w2):
    return x + gelu(layer_norm(x, g, b) @ w1) @ w2


@case("post_ln_residual_save_only_these_names", cp.save_only_these_names("ln_out", "never_used"),
      (X, G_D, B_D, W_DD), divergences=(ARGS3, REMAT3_NAME_VMAP),
      note="a policy name that never occurs ('never_used')")
def post_ln_residual(x, g, b, w):
    y = checkpoint_name(layer_norm(x + relu(x @ w), g, b), "ln_out")
    return jnp.sum(y * y)


@case("transformer_block_dots_saveable", cp.dots_saveable,
      (X, G_D, B_D, WQ, WK, WV, WO, G_D, B_D, W_DH, W_HD))
def transformer_block(x, g1, b1, wq, wk, wv, wo, g2, b2, w1, w2):
    x = x + mha(layer_norm(x, g1, b1), wq, wk, wv, wo, mask=CAUSAL)
    x = x + gelu(layer_norm(x, g2, b2) @ w1) @ w2
    return jnp.sum(x)


@case("layer_norm_jnp_var_dots_saveable", cp.dots_saveable, (X, G_D, B_D, W_DD),
      note="jnp.var is a jitted function (_var) with an integer argument and a jnp.where inside")
def layer_norm_jnp_var(x, g, b, w):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    y = (x - mu) * lax.rsqrt(jnp.var(x, axis=-1, keepdims=True) + 1e-5) * g + b
    return jnp.sum(jnp.tanh(y @ w))


@case("mlp_where_relu_nothing_saveable", cp.nothing_saveable, (X, W_DH, W_HD),
      note="ReLU written with jnp.where (a jitted _where with a constant branch)")
def mlp_where_relu(x, w1, w2):
    h = x @ w1
    return jnp.sum(jnp.tanh(jnp.where(h > 0, h, 0.0) @ w2))


# --------------------------------------------------------------------------
# names: used twice, unused, one name for two values

@case("name_read_twice", cp.save_only_these_names("h"), (X, W_DD),
      divergences=(ARGS3, REMAT3_NAME_VMAP))
def name_read_twice(x, w):
    h = checkpoint_name(jnp.tanh(x @ w), "h")
    return jnp.sum(jnp.sin(h) * h + h @ w)


@case("name_unused_by_backward", cp.save_only_these_names("h"), (X, W_DD),
      divergences=(ARGS3, REMAT3_NAME_VMAP),
      note="h only feeds an add, whose backward pass does not read it")
def name_unused(x, w):
    h = checkpoint_name(jnp.sin(x), "h")
    return jnp.sum(jnp.tanh(x @ w) + h)


@case("one_name_two_values", cp.save_only_these_names("h"), (X, W_DD),
      divergences=(ARGS3, REMAT3_NAME_VMAP),
      note="the same name on two intermediates: both are saved")
def one_name_two_values(x, w):
    a = checkpoint_name(jnp.sin(x @ w), "h")
    b = checkpoint_name(jnp.cos(a @ w), "h")
    return jnp.sum(jnp.tanh(b) * a)


# --------------------------------------------------------------------------
# nested checkpoints, written inside the function (policy=oracle.AS_IS)

@case("nested_dots_outer_everything_inner", oracle.AS_IS, (X, W_DH, B_H, W_HD))
def nested_dots_everything(x, w1, b1, w2):
    def inner(h):
        return gelu(h)

    def outer(x, w1, b1, w2):
        h = x @ w1 + b1
        a = jax.checkpoint(inner, policy=cp.everything_saveable)(h)
        return jnp.sum(jnp.tanh(a @ w2))
    return jax.checkpoint(outer, policy=cp.dots_saveable)(x, w1, b1, w2)


@case("nested_nothing_outer_names_inner", oracle.AS_IS, (X, W_DH, W_HD),
      divergences=(REMAT3_NAME_VMAP,))
def nested_nothing_names(x, w1, w2):
    def inner(x, w1):
        h = checkpoint_name(x @ w1, "h")
        return checkpoint_name(gelu(h), "a")

    def outer(x, w1, w2):
        a = jax.checkpoint(inner, policy=cp.save_only_these_names("a"))(x, w1)
        return jnp.sum(jnp.sin(a @ w2))
    return jax.checkpoint(outer, policy=cp.nothing_saveable)(x, w1, w2)


@case("stacked_layers_per_layer_remat", oracle.AS_IS, (X, WQ, WK, WV),
      note="three residual layers, each its own checkpoint (layer-wise remat)")
def stacked_layers(x, w1, w2, w3):
    def layer(x, w):
        return x + jnp.tanh(x @ w)
    for w in (w1, w2, w3):
        x = jax.checkpoint(layer, policy=cp.dots_saveable)(x, w)
    return jnp.sum(x ** 2)


@case("nested_user_policy_inner", oracle.AS_IS, (X, W_DH, B_H, W_HD),
      note="an inner checkpoint with a user policy inside a dots_saveable one: the enclosing "
           "policy splits the inner checkpoint, so neither implementation asks the user policy")
def nested_user_inner(x, w1, b1, w2):
    def inner(h):
        return jnp.sin(jnp.tanh(h)) * h

    def outer(x, w1, b1, w2):
        a = jax.checkpoint(inner, policy=lambda prim, *_, **__: prim.name in ("tanh", "sin"))(x @ w1 + b1)
        return jnp.sum(a @ w2)
    return jax.checkpoint(outer, policy=cp.dots_saveable)(x, w1, b1, w2)


def save_tanh(prim, *_, **__):
    return prim.name == "tanh"


@case("nested_user_policy_outer", oracle.AS_IS, (X, W_DH, W_HD), divergences=(REMAT3_FULL,),
      note="a user policy on the outer checkpoint, a default one inside")
def nested_user_outer(x, w1, w2):
    def inner(a, w2):
        return jnp.sin(a @ w2)

    def outer(x, w1, w2):
        a = jnp.tanh(x @ w1)
        return jnp.sum(jax.checkpoint(inner)(a, w2) * a[:, :D])
    return jax.checkpoint(outer, policy=save_tanh)(x, w1, w2)


@case("prevent_cse_false_mlp", oracle.AS_IS, (X, W_DH, W_HD), divergences=(REMAT3_CSE,),
      note="jax.checkpoint(..., prevent_cse=False): no optimization barrier under remat2")
def prevent_cse_false(x, w1, w2):
    def block(x, w1, w2):
        return jnp.sum(gelu(x @ w1) @ w2)
    return jax.checkpoint(block, prevent_cse=False)(x, w1, w2)


# --------------------------------------------------------------------------
# jit inside

@case("jit_gelu_inside_checkpoint", cp.dots_saveable, (X, W_DH, W_HD))
def jit_gelu_inside(x, w1, w2):
    return jnp.sum(jax.jit(gelu)(x @ w1) @ w2)


@jax.jit
def jitted_block(x, w1, w2):
    def block(x, w1, w2):
        return jnp.sum(jnp.tanh(relu(x @ w1) @ w2))
    return jax.checkpoint(block, policy=cp.dots_with_no_batch_dims_saveable)(x, w1, w2)


@case("checkpoint_inside_jit", oracle.AS_IS, (X, W_DH, W_HD),
      note="a jax.jit-ed function whose body is a checkpoint")
def checkpoint_inside_jit(x, w1, w2):
    return jitted_block(x, w1, w2) * 2.0


# --------------------------------------------------------------------------
# integer inputs

@case("int_count_mean_pool", cp.dots_saveable, (X, W_DD, S(dtype=jnp.int32)),
      note="an int32 token count converted to float")
def int_count_mean_pool(x, w, n):
    return jnp.sum(relu(x @ w), axis=0) / n.astype(f32)            # vector output


@case("int_lengths_mask", cp.everything_saveable, (X, W_DD, S(T, dtype=jnp.int32)),
      divergences=(ARGS3, REMAT3_DOTS_NAMES),
      note="an int32 vector compared to a threshold, made a float mask")
def int_lengths_mask(x, w, lengths):
    mask = (lengths > 2).astype(f32)[:, None]
    return jnp.sum(jnp.tanh(x @ w) * mask)


# --------------------------------------------------------------------------
# vmap inside

@case("vmap_per_example_mlp", cp.dots_saveable, (BTD, W_DH, W_HD),
      note="jax.vmap over examples of an MLP with shared weights")
def vmap_per_example(x, w1, w2):
    per_example = lambda xi: jnp.sum(gelu(xi @ w1) @ w2)
    return jax.vmap(per_example)(x)                                 # vector output


@case("vmap_attention_heads", cp.dots_with_no_batch_dims_saveable, (Q, K, V),
      note="jax.vmap of single-example attention: batch dims appear in the dots")
def vmap_attention(q, k, v):
    def one(q, k, v):
        p = softmax(q @ k.T / np.float32(np.sqrt(D)))
        return p @ v
    return jnp.sum(jax.vmap(one)(q, k, v) ** 2)


# --------------------------------------------------------------------------
# several outputs

@case("two_outputs_loss_and_activations", cp.save_only_these_names("h"), (X, W_DH, W_HD),
      divergences=(ARGS3, REMAT3_NAME_VMAP),
      note="a scalar loss and a matrix output together")
def two_outputs(x, w1, w2):
    h = checkpoint_name(relu(x @ w1), "h")
    y = h @ w2
    return jnp.mean(y * y), y


@case("scalar_input_scale", cp.everything_saveable, (S(), X, W_DD),
      divergences=(ARGS3, REMAT3_DOTS_NAMES),
      note="a scalar f32 argument (a learned temperature)")
def scalar_scale(t, x, w):
    return jnp.sum(jnp.exp(softmax((x @ w) * t)))


# --------------------------------------------------------------------------
# fuzzer findings (remat-oracle fuzz, seed 2029), kept as regression cases:
# each needs more than one remat3 defect modelled at once

SCALAR = S()


@case("fuzz_zero_tangent_into_and_out_of_checkpoints", oracle.AS_IS, (SCALAR, SCALAR),
      divergences=(REMAT3_ZERO_IN,),
      note="a**0 (zero tangent) into a checkpoint fed by another checkpoint")
def fuzz_zero_into_out_of(a, b):
    d = jax.checkpoint(lambda e: jnp.sin(e), prevent_cse=False)(jnp.sin(a))
    return jax.checkpoint(lambda m, n: jnp.sin(n), prevent_cse=False)(d, a ** 0), a * a


@case("fuzz_name_in_nested_checkpoint", oracle.AS_IS, (SCALAR,),
      divergences=(REMAT3_NESTED, REMAT3_CSE, REMAT3_NAME_VMAP),
      note="a name inside a nested checkpoint, the enclosing policy everything_saveable")
def fuzz_name_nested(a):
    def inner(k):
        return jnp.sin(checkpoint_name(k, "a"))
    return jax.checkpoint(lambda i: jax.checkpoint(inner, prevent_cse=False)(i),
                          policy=cp.everything_saveable, prevent_cse=False)(a)


@case("fuzz_jit_zero_tangent_out_of_checkpoint", oracle.AS_IS, (S(3),),
      divergences=(REMAT3_ZERO_OUT,),
      note="a checkpoint whose output is a jit's x.x ** 0: zero tangent inside, a value outside")
def fuzz_jit_zero_out(a):
    d = jax.checkpoint(lambda e: jax.jit(lambda g: jnp.dot(g, g) ** 0)(e) ** 2, prevent_cse=False)(a)
    return jnp.sin(d), jnp.sin(a)


@case("fuzz_dead_backward_of_nested_checkpoints", oracle.AS_IS, (S(3),),
      divergences=(REMAT3_CSE, REMAT3_ZERO_OUT),
      note="nested checkpoints whose backward pass is dead (sin(x ** 0) has a zero "
           "derivative): remat3 puts barriers there, which XLA then removes")
def fuzz_dead_backward(a):
    def outer(j):
        l = jax.checkpoint(lambda m: jnp.sin(m ** 0), prevent_cse=False)(j)
        return jax.checkpoint(jnp.sin, prevent_cse=False)(l)
    c = jax.checkpoint(lambda d: jnp.concatenate([d, d]))(a)
    return jax.checkpoint(outer, prevent_cse=False)(a), c, jnp.sin(a)


@case("fuzz_nested_checkpoint_only_recomputed", oracle.AS_IS, (S(),),
      divergences=(REMAT3_CSE,),
      note="a nested checkpoint (prevent_cse=True) whose tangent stop_gradient discards: its "
           "staged half only recomputes a primal, which JAX inlines when it transposes the "
           "enclosing body, so no barrier (fuzzer finding)")
def fuzz_nested_only_recomputed(a):
    def outer(c):
        e = jax.checkpoint(jnp.sin, prevent_cse=True)(c)
        return lax.stop_gradient(e) * c
    return jax.checkpoint(outer, prevent_cse=False)(a)


REMAT3_PRODUCER = ("remat3-names-nested-checkpoint-values-by-producer", "residuals", "remat3")


@case("fuzz_named_input_of_nested_checkpoint_saved_once", oracle.AS_IS, (S(),),
      divergences=(REMAT3_PRODUCER, REMAT3_CSE, REMAT3_NAME_VMAP),
      note="a named value read by a nested checkpoint and after it: remat3 saves it once "
           "(fuzzer finding)")
def fuzz_named_input_once(a):
    def body(c):
        d = checkpoint_name(c, "a")
        checkpoint_name(c, "b")
        g = jax.checkpoint(lambda h: h * h, prevent_cse=False)(d)
        return jnp.where(g > d, d, g)
    return jax.checkpoint(body, policy=cp.save_only_these_names("a", "b"), prevent_cse=False)(a)


LITERALS = "literal-residuals-depend-on-the-constant-s-python-type"


@case("jax_nn_gelu_and_relu_mlp", oracle.AS_IS, (X, W_DH, W_HD),
      divergences=((LITERALS, "residuals", "remat2"), (LITERALS, "residuals", "remat3")),
      note="jax.nn.gelu (its sqrt(2/pi) is a numpy scalar: JAX does not save it) and "
           "jax.nn.relu (a custom_jvp function), no checkpoint")
def jax_nn_mlp(x, w1, w2):
    return jnp.sum(jax.nn.relu(jax.nn.gelu(x @ w1, approximate=True) @ w2))


# --------------------------------------------------------------------------
# scan: checkpointed layers (the most common real use of remat)

N_LAYERS = 3


def _per_layer(make):
    return np.stack([make() for _ in range(N_LAYERS)])


LAYERS = (_per_layer(lambda: G_D), _per_layer(lambda: B_D),
          *(_per_layer(lambda: weight(D, D)) for _ in range(4)),
          _per_layer(lambda: G_D), _per_layer(lambda: B_D),
          _per_layer(lambda: weight(D, H)), _per_layer(lambda: weight(H, D)))


def named_block(x, layer):
    """A pre-LN transformer block with names on its projections."""
    g1, b1, wq, wk, wv, wo, g2, b2, w1, w2 = layer
    h = layer_norm(x, g1, b1)
    q, k, v = (split_heads(checkpoint_name(h @ w, n), 2) for w, n in ((wq, "q"), (wk, "k"), (wv, "v")))
    s = lax.dot_general(q, k, _MHA_SCORES, preferred_element_type=f32) * np.float32(1 / np.sqrt(D // 2))
    o = lax.dot_general(softmax(s + CAUSAL), v, _MHA_VALUES, preferred_element_type=f32)
    x = x + checkpoint_name(merge_heads(o) @ wo, "attn_out")
    u = checkpoint_name(layer_norm(x, g2, b2) @ w1, "mlp_in")
    return x + checkpoint_name(gelu(u) @ w2, "mlp_out")


@case("scanned_transformer_layers_names", oracle.AS_IS, (X,) + LAYERS,
      divergences=(REMAT3_NAME_VMAP, REMAT3_INPUTS_FIRST),
      note="the issue-8 acceptance case: a checkpointed transformer block (attention + MLP, "
           "layer norm, gelu, named projections, a names policy) scanned over 3 layers")
def scanned_transformer(x, *layers):
    block = jax.checkpoint(lambda x, layer: (named_block(x, layer), None),
                           policy=cp.save_only_these_names("q", "k", "v", "mlp_in"))
    x, _ = lax.scan(block, x, layers)
    return jnp.sum(x * x)


@case("checkpoint_around_scanned_layers_dots", oracle.AS_IS, (X,) + LAYERS,
      divergences=(REMAT3_NAME_VMAP, REMAT3_SCAN),
      note="a checkpoint around the whole scan of (unchecked) blocks, dots_saveable")
def checkpoint_around_scan(x, *layers):
    def run(x, *layers):
        return lax.scan(lambda x, layer: (named_block(x, layer), jnp.sum(x)), x, layers)
    x, norms = jax.checkpoint(run, policy=cp.dots_saveable)(x, *layers)
    return jnp.sum(x * x) + jnp.sum(norms)


REMAT3_CUSTOM_JVP_NAMES = ("remat3-names-custom_jvp-outputs-by-their-body", "residuals", "remat3")


@case("checkpointed_relu_output_then_dot", oracle.AS_IS, (S(3), S(3, 2)), divergences=(REMAT3_CUSTOM_JVP_NAMES,),
      note="a checkpoint whose output is jax.nn.relu's (a custom_jvp in a jit), read by a dot: "
           "flax.nnx.remat around nnx.relu(linear(x)), found by a sweep of model code")
def checkpointed_relu(x, w):
    h = jax.checkpoint(lambda x: jax.nn.relu(jnp.sin(x)))(x)
    return jnp.sum(h @ w)


@case("checkpointed_custom_jvp_output_then_dot", oracle.AS_IS, (S(3), S(3, 2)), divergences=(REMAT3_CUSTOM_JVP_NAMES,),
      note="the same with a custom_jvp function outside any jit: remat3 names its output by "
           "the body's `max`")
def checkpointed_custom_jvp(x, w):
    @jax.custom_jvp
    def r(y):
        return jnp.maximum(y, 0.)
    r.defjvp(lambda p, t: (r(p[0]), t[0] * (p[0] > 0)))
    h = jax.checkpoint(lambda x: r(jnp.sin(x)))(x)
    return jnp.sum(h @ w)


@case("loss_and_constant_bool_state", None, (S(3),),
      divergences=(ARGS3, ("remat3-jit-of-vmap-of-a-constant-checkpoint-output-crashes", "vmap", "remat3")),
      properties=("residuals", "vjp_leaves", "values", "jvp", "vmap"),     # reverse mode: not with a bool output
      note="a loss returning a constant bool beside it, as equinox's BatchNorm returns its "
           "State's first_time=False: jax.jvp returns the constant as a Python bool (the check "
           "reads it so), and remat3's jit of vmap crashes on it; found by a sweep of model code")
def loss_and_constant_bool_state(x):
    return jnp.sum(jnp.sin(x)), jnp.array(False)


class KeylessBox:
    """A pytree node registered without keys (its paths hold FlattenedIndexKey),
    as equinox.nn.State is."""
    def __init__(self, a, b):
        self.a, self.b = a, b


jax.tree_util.register_pytree_node(KeylessBox, lambda s: ((s.a, s.b), None), lambda _, c: KeylessBox(*c))


@case("keyless_pytree_node_argument", None, (S(3, 4), KeylessBox(S(4), S(4)), S(2, 3)),
      note="an argument whose pytree node has no keys: remat3 names its leaves args[1][0], "
           "the spec state[0] (a sweep of model code: eqx.nn.BatchNorm's State)")
def keyless_pytree_loss(w, state, x):
    return jnp.sum(jnp.sin(x @ w)) + jnp.sum(jnp.sin(state.a) * state.b)


BY_NAME = {c.name: c for c in CASES}
assert len(BY_NAME) == len(CASES), "duplicate case names"
