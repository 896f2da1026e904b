"""flax.nnx models, as the NNX docs write them, trained through the
functional API (nnx.split into params and the rest, nnx.merge inside the
loss) so that the loss is a function of the params pytree."""
from __future__ import annotations

import functools

import jax
import optax
from flax import nnx
from jax.ad_checkpoint import checkpoint_name

from . import data
from .zoo import Case, model

W = data.WIDTH


def abstract(make):
    """nnx.eval_shape(make) split into (graphdef, params, rest), with the
    params drawn at trained scales (nothing compiled)."""
    graphdef, params, rest = nnx.split(nnx.eval_shape(make), nnx.Param, ...)
    params = jax.tree.map(lambda v: v, data.draw_params(params))
    return graphdef, params, rest


class MLP(nnx.Module):
    """The MLP of the NNX basics guide: Linear, Dropout, BatchNorm, gelu."""
    def __init__(self, din: int, dmid: int, dout: int, *, rngs: nnx.Rngs):
        self.linear1 = nnx.Linear(din, dmid, rngs=rngs)
        self.dropout = nnx.Dropout(rate=0.1, rngs=rngs)
        self.bn = nnx.BatchNorm(dmid, rngs=rngs)
        self.linear2 = nnx.Linear(dmid, dout, rngs=rngs)

    def __call__(self, x):
        x = nnx.gelu(self.dropout(self.bn(self.linear1(x))))
        x = checkpoint_name(x, "mlp_hidden")
        return self.linear2(x)


@model("nnx_mlp", "flax.nnx", names=("mlp_hidden",))
def nnx_mlp():
    """The guide's MLP in training mode (dropout on, BatchNorm on batch
    statistics), split by nnx.split(model, nnx.Param, ...) into params and
    the rest (batch statistics, the Dropout's nnx.Rngs state: a typed
    jax.random.key and its count); loss_fn(params, rest, batch) merges them,
    returns (optax.l2_loss, the updated batch statistics)."""
    graphdef, params, rest = nnx.split(MLP(3, W, 2, rngs=nnx.Rngs(0)), nnx.Param, ...)
    params = data.draw_params(jax.eval_shape(lambda: params))
    x, y = data.normal(data.BATCH, 3), data.normal(data.BATCH, 2, seed=6)

    def loss_fn(params, rest, batch):
        model = nnx.merge(graphdef, params, rest)
        x, y = batch
        loss = optax.l2_loss(model(x), y).mean()
        return loss, nnx.state(model, nnx.BatchStat)
    return Case(loss_fn, (params, rest, (x, y)))


class CNN(nnx.Module):
    """The CNN of the NNX MNIST tutorial (features scaled down)."""
    def __init__(self, *, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(1, 4, kernel_size=(3, 3), rngs=rngs)
        self.conv2 = nnx.Conv(4, 8, kernel_size=(3, 3), rngs=rngs)
        self.avg_pool = functools.partial(nnx.avg_pool, window_shape=(2, 2), strides=(2, 2))
        self.linear1 = nnx.Linear(2 * 2 * 8, W, rngs=rngs)
        self.linear2 = nnx.Linear(W, data.CLASSES, rngs=rngs)

    def __call__(self, x):
        x = self.avg_pool(nnx.relu(self.conv1(x)))
        x = self.avg_pool(nnx.relu(self.conv2(x)))
        x = x.reshape(x.shape[0], -1)  # flatten
        x = checkpoint_name(nnx.relu(self.linear1(x)), "mlp_hidden")
        x = self.linear2(x)
        return x


@model("nnx_cnn", "flax.nnx (MNIST tutorial)", names=("mlp_hidden",))
def nnx_cnn():
    """nnx.Conv, nnx.avg_pool, nnx.Linear; the tutorial's loss_fn returning
    (loss, logits), optax.softmax_cross_entropy_with_integer_labels."""
    graphdef, params, rest = abstract(lambda: CNN(rngs=nnx.Rngs(0)))
    batch = {"image": data.normal(data.BATCH, 8, 8, 1), "label": data.labels(data.BATCH)}

    def loss_fn(params, batch):
        model = nnx.merge(graphdef, params, rest)
        logits = model(batch["image"])
        loss = optax.softmax_cross_entropy_with_integer_labels(logits=logits, labels=batch["label"]).mean()
        return loss, logits
    return Case(loss_fn, (params, batch))
