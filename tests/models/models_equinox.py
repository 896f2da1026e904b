"""equinox models, as equinox's docs write them (the MLP of the
quick-start, the RNN of examples/train_rnn with an LSTMCell), with the
model split by eqx.partition/eqx.filter into its arrays and the rest."""
from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jax.ad_checkpoint import checkpoint_name

from . import data
from .zoo import Case, model

W = data.WIDTH


def abstract(make):
    """eqx.filter_eval_shape(make) with its arrays drawn at trained scales."""
    shapes = eqx.filter_eval_shape(make)
    arrays, static = eqx.partition(shapes, lambda x: isinstance(x, jax.ShapeDtypeStruct))
    return eqx.combine(data.draw_params(arrays), static)


def named_relu(x):
    return checkpoint_name(jax.nn.relu(x), "mlp_hidden")


@model("equinox_mlp", "equinox", names=("mlp_hidden",))
def equinox_mlp():
    """eqx.nn.MLP (its activation naming the hidden layers), vmapped over the
    batch; the quick-start's mean squared error; params = eqx.filter(model,
    eqx.is_array)."""
    model_ = abstract(lambda: eqx.nn.MLP(in_size=3, out_size=2, width_size=W, depth=2,
                                         activation=named_relu, key=jax.random.PRNGKey(0)))
    params, static = eqx.filter(model_, eqx.is_array), eqx.filter(model_, eqx.is_array, inverse=True)

    def loss(params, batch):
        model = eqx.combine(params, static)
        x, y = batch
        pred_y = jax.vmap(model)(x)
        return jnp.mean((y - pred_y) ** 2)
    return Case(loss, (params, (data.normal(data.BATCH, 3), data.normal(data.BATCH, 2, seed=7))))


class RNN(eqx.Module):
    """examples/train_rnn.py's RNN, with an eqx.nn.LSTMCell (its hidden state named)."""
    hidden_size: int
    cell: eqx.Module
    linear: eqx.nn.Linear
    bias: jax.Array

    def __init__(self, in_size, out_size, hidden_size, *, key):
        ckey, lkey = jax.random.split(key)
        self.hidden_size = hidden_size
        self.cell = eqx.nn.LSTMCell(in_size, hidden_size, key=ckey)
        self.linear = eqx.nn.Linear(hidden_size, out_size, use_bias=False, key=lkey)
        self.bias = jnp.zeros(out_size)

    def __call__(self, input):
        hidden = (jnp.zeros((self.hidden_size,)), jnp.zeros((self.hidden_size,)))

        def f(carry, inp):
            h, c = self.cell(inp, carry)
            return (checkpoint_name(h, "hidden"), c), None
        (out, _), _ = lax.scan(f, hidden, input)
        # sigmoid because we're performing binary classification
        return jax.nn.sigmoid(self.linear(out) + self.bias)


@model("equinox_lstm", "equinox (examples/train_rnn)", names=("hidden",))
def equinox_lstm():
    """eqx.nn.LSTMCell under lax.scan, vmapped over the batch; the example's
    binary cross-entropy; eqx.partition(model, eqx.is_inexact_array)."""
    model_ = abstract(lambda: RNN(in_size=2, out_size=1, hidden_size=W, key=jax.random.PRNGKey(0)))
    params, static = eqx.partition(model_, eqx.is_inexact_array)
    x = data.normal(data.BATCH, data.SEQ, 2)
    y = data.labels(data.BATCH, 2, shape=(data.BATCH, 1)).astype("float32")

    def compute_loss(params, x, y):
        model = eqx.combine(params, static)
        pred_y = jax.vmap(model)(x)
        # Trains with respect to binary cross-entropy
        return -jnp.mean(y * jnp.log(pred_y) + (1 - y) * jnp.log(1 - pred_y))
    return Case(compute_loss, (params, x, y))
