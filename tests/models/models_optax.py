"""Losses written with optax's loss library and its optimisers, on small
models in plain jax.numpy: a regression/classification head trained on a
mix of optax losses (dataclass params, bool masks), and the loss of a
training step (an inner optax.adamw step with gradient clipping,
optax.apply_updates, then the loss at the updated params: MAML-style
second-order differentiation through the checkpoint)."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from jax.ad_checkpoint import checkpoint_name

from . import data
from . import zoo
from .zoo import Case, model

W = data.WIDTH


@struct.dataclass
class Heads:
    """flax.struct.dataclass params: a shared trunk and three heads."""
    trunk: jax.Array          # [F, W]
    trunk_bias: jax.Array     # [W]
    cls: jax.Array            # [W, C]
    reg: jax.Array            # [W, 2]
    emb: jax.Array            # [W, 4]


@model("optax_losses", "optax (losses)", names=("trunk",), slow=True)
def optax_losses():
    """A multi-task loss over optax's losses: poly_loss_cross_entropy,
    sigmoid_focal_loss, multiclass_hinge_loss and convex_kl_divergence on
    classification logits (smooth_labels, jax.nn.one_hot, log_softmax);
    huber_loss and log_cosh on a regression head; cosine_distance,
    triplet_margin_loss and safe_norm on embeddings; hinge_loss; a bool
    example mask through `where=` and jnp.where."""
    zoo.require(hasattr(optax.losses, "triplet_margin_loss"), "optax.losses.triplet_margin_loss (optax 0.2.5)")
    r = data.rng(21)
    F, C = 6, data.CLASSES
    n = lambda *s: (r.randn(*s) / np.sqrt(s[0])).astype(np.float32)
    params = Heads(trunk=n(F, W), trunk_bias=0.1 * n(W), cls=n(W, C), reg=n(W, 2), emb=n(W, 4))
    batch = {"x": data.normal(4, F, seed=3), "label": data.labels(4, seed=4),
             "target": data.normal(4, 2, seed=5), "sign": np.array([1., -1., 1., -1.], np.float32),
             "mask": np.array([True, True, False, True])}

    def loss(params, batch):
        h = checkpoint_name(jax.nn.silu(batch["x"] @ params.trunk + params.trunk_bias), "trunk")
        logits, pred, emb = h @ params.cls, h @ params.reg, h @ params.emb
        onehot = jax.nn.one_hot(batch["label"], C)
        soft = optax.smooth_labels(onehot, 0.1)
        mask = batch["mask"]
        cls = (optax.losses.poly_loss_cross_entropy(logits, soft, epsilon=1.0)
               + optax.losses.sigmoid_focal_loss(logits, onehot, alpha=0.25).sum(-1)
               + optax.losses.multiclass_hinge_loss(logits, batch["label"])
               + optax.losses.convex_kl_divergence(jax.nn.log_softmax(logits), soft, where=mask[:, None]))
        reg = (optax.losses.huber_loss(pred, batch["target"], delta=0.5).sum(-1)
               + optax.losses.log_cosh(pred, batch["target"]).sum(-1))
        anchors, positives = emb, jnp.roll(emb, 1, axis=0)
        metric = (optax.losses.cosine_distance(anchors, positives, epsilon=1e-6)
                  + optax.losses.triplet_margin_loss(anchors, positives, jnp.flip(emb, 0))
                  + 0.01 * optax.safe_norm(emb, 1e-6, axis=-1))
        margin = optax.losses.hinge_loss(pred[:, 0], batch["sign"])
        per_example = cls + reg + metric + margin
        return jnp.sum(jnp.where(mask, per_example, 0.0)) / jnp.maximum(mask.sum(), 1)
    return Case(loss, (params, batch))


@dataclasses.dataclass
class TaskBatch:
    """A registered dataclass of a task's support and query sets."""
    support_x: np.ndarray
    support_y: np.ndarray
    query_x: np.ndarray
    query_y: np.ndarray


if hasattr(jax.tree_util, "register_dataclass"):      # jax 0.4.26
    jax.tree_util.register_dataclass(TaskBatch, data_fields=["support_x", "support_y", "query_x", "query_y"],
                                     meta_fields=[])


def mlp(params, x):
    (w1, b1), (w2, b2) = params
    h = checkpoint_name(jnp.tanh(x @ w1 + b1), "hidden")
    return h @ w2 + b2


@model("optax_train_step", "optax (adamw, clip_by_global_norm, apply_updates)", names=("hidden",),
       slow=True)
def optax_train_step():
    """The loss of a training step, as meta-learning writes it: an inner
    step of optax.chain(clip_by_global_norm, adamw) on the support set's
    l2 loss (jax.value_and_grad inside the loss, weight decay, the optimizer
    state from tx.init), optax.apply_updates, then optax.squared_error on
    the query set at the updated params; the outer gradient is second
    order through the checkpoint. params a list of (w, b) tuples."""
    zoo.require(hasattr(jax.tree_util, "register_dataclass"), "jax.tree_util.register_dataclass (jax 0.4.26)")
    r = data.rng(31)
    params = [(r.randn(3, W).astype(np.float32) / np.sqrt(3), np.zeros(W, np.float32)),
              (r.randn(W, 1).astype(np.float32) / np.sqrt(W), np.zeros(1, np.float32))]
    xs = data.normal(6, 3, seed=32)
    ys = np.sin(xs.sum(-1, keepdims=True)).astype(np.float32)
    batch = TaskBatch(xs[:3], ys[:3], xs[3:], ys[3:])
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(learning_rate=0.1, weight_decay=1e-2))

    def inner_loss(params, x, y):
        return optax.l2_loss(mlp(params, x), y).mean()

    def meta_loss(params, task):
        opt_state = tx.init(params)
        loss, grads = jax.value_and_grad(inner_loss)(params, task.support_x, task.support_y)
        updates, opt_state = tx.update(grads, opt_state, params)
        adapted = optax.apply_updates(params, updates)
        return optax.losses.squared_error(mlp(adapted, task.query_x), task.query_y).mean(), loss
    return Case(meta_loss, (params, batch))
