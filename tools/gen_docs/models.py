"""The reference models of docs/policies.md: its `models` section is this
file's code, below this docstring (a block of that page runs it)."""
import functools

import numpy as np

import spec
from spec import ops, policies as P


def dense(x, W, b):
    y = x @ W
    return y + ops.broadcast_in_dim(b, y.shape, (1,))


def mlp(x, W1, b1, W2, b2):
    """Two dense layers, x[B, D] -> tanh -> [B, H] -> [B, O], and a squared-sum loss."""
    h = ops.checkpoint_name(ops.tanh(dense(x, W1, b1)), "hidden")
    y = ops.checkpoint_name(dense(h, W2, b2), "logits")
    return ops.reduce_sum(y * y, (0, 1))


MLP_TYPES = (spec.f32[4, 8], spec.f32[8, 16], spec.f32[16], spec.f32[16, 8], spec.f32[8])


def attention(x, Wq, Wk, Wv):
    """Softmax self-attention with 2 heads over x[T, D], summed to a scalar."""
    T, D = x.shape
    H = 2

    def heads(W):                                   # [T, D] -> [H, T, D/H]
        return ops.transpose(ops.reshape(x @ W, (T, H, D // H)), (1, 0, 2))
    q, k, v = heads(Wq), heads(Wk), heads(Wv)
    s = ops.dot_general(q, k, (((2,), (2,)), ((0,), (0,))))       # [H, T, T]: batch dim H
    s = ops.checkpoint_name(s * (1.0 / np.sqrt(D // H)), "scores")
    m = ops.broadcast_in_dim(ops.reduce_max(s, (2,)), s.shape, (0, 1))
    e = ops.exp(s - m)
    p = ops.checkpoint_name(e / ops.broadcast_in_dim(ops.reduce_sum(e, (2,)), s.shape, (0, 1)),
                            "probs")
    o = ops.dot_general(p, v, (((2,), (1,)), ((0,), (0,))))       # [H, T, D/H]
    return ops.reduce_sum(o, (0, 1, 2))


ATTENTION_TYPES = (spec.f32[4, 8], spec.f32[8, 8], spec.f32[8, 8], spec.f32[8, 8])


def checkpointed(model, policy):
    """jax.checkpoint(model, policy=policy), keeping the parameter names."""
    @functools.wraps(model)
    def f(*args):
        return ops.checkpoint(model, policy=policy)(*args)
    return f


def reference_policies(name1, name2):
    """Every entry of jax.checkpoint_policies (aliases once), for a model
    that names two values name1 and name2."""
    return {
        "everything_saveable": P.everything_saveable,
        "nothing_saveable": P.nothing_saveable,
        "dots_saveable": P.dots_saveable,
        "dots_with_no_batch_dims_saveable": P.dots_with_no_batch_dims_saveable,
        "offload_dot_with_no_batch_dims": P.offload_dot_with_no_batch_dims("device", "pinned_host"),
        "save_anything_except_these_names": P.save_anything_except_these_names(name1),
        "save_any_names_but_these": P.save_any_names_but_these(name1),
        "save_only_these_names": P.save_only_these_names(name1),
        "save_from_both_policies": P.save_from_both_policies(
            P.dots_with_no_batch_dims_saveable, P.save_only_these_names(name2)),
        "save_and_offload_only_these_names": P.save_and_offload_only_these_names(
            names_which_can_be_saved=[name1], names_which_can_be_offloaded=[name2],
            offload_src="device", offload_dst="pinned_host"),
    }


MODELS = {"mlp": (mlp, MLP_TYPES, ("hidden", "logits")),
          "attention": (attention, ATTENTION_TYPES, ("scores", "probs"))}
