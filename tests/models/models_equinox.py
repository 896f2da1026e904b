"""equinox models, as equinox's docs write them (the MLP of the
quick-start, the RNN of examples/train_rnn with an LSTMCell), with the
model split by eqx.partition/eqx.filter into its arrays and the rest."""
from __future__ import annotations

import inspect

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
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


# --- docs/examples/mnist.ipynb: the model itself as the argument ---------------

class CNN(eqx.Module):
    """docs/examples/mnist.ipynb's CNN (a list of layers and functions),
    sizes scaled down, an eqx.nn.AvgPool2d added after the max pooling."""
    layers: list

    def __init__(self, key):
        key1, key2, key3 = jax.random.split(key, 3)
        self.layers = [
            eqx.nn.Conv2d(1, 3, kernel_size=3, key=key1),
            eqx.nn.MaxPool2d(kernel_size=2),
            jax.nn.relu,
            eqx.nn.AvgPool2d(kernel_size=2, stride=2),
            jnp.ravel,
            eqx.nn.Linear(3 * 2 * 2, W, key=key2),
            jax.nn.sigmoid,
            named_relu,
            eqx.nn.Linear(W, data.CLASSES, key=key3),
            jax.nn.log_softmax,
        ]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


@model("equinox_cnn", "equinox (docs/examples/mnist)", names=("mlp_hidden",))
def equinox_cnn():
    """The example's loss(model, x, y) with the model passed whole, as
    eqx.filter_value_and_grad(loss)(model, x, y) takes it (its leaves are
    arrays, jax.nn functions and the pools' Python scalars and operations);
    cross_entropy with jnp.take_along_axis over int labels."""
    model_ = abstract(lambda: CNN(jax.random.PRNGKey(0)))
    x, y = data.normal(data.BATCH, 1, 7, 7), data.labels(data.BATCH)

    def loss(model, x, y):
        pred_y = jax.vmap(model)(x)
        return cross_entropy(y, pred_y)

    def cross_entropy(y, pred_y):
        pred_y = jnp.take_along_axis(pred_y, jnp.expand_dims(y, 1), axis=1)
        return -jnp.mean(pred_y)
    return Case(loss, (model_, x, y))


# --- docs/examples/stateful.ipynb: BatchNorm and SpectralNorm with eqx.nn.State --

# equinox >= 0.11.11 asks for BatchNorm's statistics mode; earlier releases
# (the era of jax 0.4.36: tests/models/README.md's release table) have only
# batch statistics, which mode="batch" selects.
BATCH_STATISTICS = {"mode": "batch"} if "mode" in inspect.signature(eqx.nn.BatchNorm.__init__).parameters else {}


class StatefulModel(eqx.Module):
    """docs/examples/stateful.ipynb's Model (widths scaled down)."""
    norm1: eqx.nn.BatchNorm
    spectral_linear: eqx.nn.SpectralNorm
    norm2: eqx.nn.BatchNorm
    linear1: eqx.nn.Linear
    linear2: eqx.nn.Linear

    def __init__(self, key):
        key1, key2, key3, key4 = jax.random.split(key, 4)
        self.norm1 = eqx.nn.BatchNorm(input_size=3, axis_name="batch", **BATCH_STATISTICS)
        self.spectral_linear = eqx.nn.SpectralNorm(
            layer=eqx.nn.Linear(in_features=3, out_features=W, key=key1), weight_name="weight", key=key2)
        self.norm2 = eqx.nn.BatchNorm(input_size=W, axis_name="batch", **BATCH_STATISTICS)
        self.linear1 = eqx.nn.Linear(in_features=W, out_features=W, key=key3)
        self.linear2 = eqx.nn.Linear(in_features=W, out_features=3, key=key4)

    def __call__(self, x, state):
        x, state = self.norm1(x, state)
        x, state = self.spectral_linear(x, state)
        x = jax.nn.relu(x)
        x, state = self.norm2(x, state)
        x = named_relu(self.linear1(x))
        x = self.linear2(x)
        return x, state


@model("equinox_stateful", "equinox (docs/examples/stateful)", names=("mlp_hidden",))
def equinox_stateful():
    """eqx.nn.make_with_state(Model): BatchNorm (axis_name='batch', lax.pmean
    under jax.vmap(axis_name='batch')) and SpectralNorm (a power iteration
    under lax.stop_gradient), the example's compute_loss(model, state, xs,
    ys) -> (loss, state) with the model and its eqx.nn.State passed whole."""
    model_, state = eqx.nn.make_with_state(StatefulModel)(jax.random.PRNGKey(5678))
    arrays, static = eqx.partition(model_, eqx.is_inexact_array)
    model_ = eqx.combine(data.draw_params(jax.eval_shape(lambda: arrays)), static)
    xs = data.normal(4, 3)
    ys = jnp.sin(xs) + 1

    def compute_loss(model, state, xs, ys):
        batch_model = jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))
        pred_ys, state = batch_model(xs, state)
        loss = jnp.mean((pred_ys - ys) ** 2)
        return loss, state
    return Case(compute_loss, (model_, state, xs, np.asarray(ys)))


# --- docs/examples/bert.ipynb: attention with dropout keys ------------------------

class AttentionBlock(eqx.Module):
    """docs/examples/bert.ipynb's AttentionBlock: eqx.nn.MultiheadAttention
    (attention dropout), eqx.nn.Dropout, eqx.nn.LayerNorm; the mask from the
    padding ids."""
    attention: eqx.nn.MultiheadAttention
    layernorm: eqx.nn.LayerNorm
    dropout: eqx.nn.Dropout
    num_heads: int = eqx.field(static=True)

    def __init__(self, hidden_size, num_heads, dropout_rate, attention_dropout_rate, key):
        self.num_heads = num_heads
        self.attention = eqx.nn.MultiheadAttention(
            num_heads=num_heads, query_size=hidden_size, use_query_bias=True, use_key_bias=True,
            use_value_bias=True, use_output_bias=True, dropout_p=attention_dropout_rate, key=key)
        self.layernorm = eqx.nn.LayerNorm(shape=hidden_size)
        self.dropout = eqx.nn.Dropout(dropout_rate)

    def __call__(self, inputs, mask, enable_dropout=False, key=None):
        if mask is not None:
            mask = self.make_self_attention_mask(mask)
        attention_key, dropout_key = (None, None) if key is None else jax.random.split(key)
        attention_output = self.attention(query=inputs, key_=inputs, value=inputs, mask=mask,
                                          inference=not enable_dropout, key=attention_key)
        result = self.dropout(attention_output, inference=not enable_dropout, key=dropout_key)
        result = result + inputs
        return jax.vmap(self.layernorm)(result)

    def make_self_attention_mask(self, mask):
        mask = jnp.multiply(jnp.expand_dims(mask, axis=-1), jnp.expand_dims(mask, axis=-2))
        mask = jnp.expand_dims(mask, axis=-3)
        mask = jnp.repeat(mask, repeats=self.num_heads, axis=-3)
        return mask.astype(jnp.float32)


class BertClassifier(eqx.Module):
    """The bert example's embedder (token, segment, position eqx.nn.Embedding,
    LayerNorm, Dropout), one AttentionBlock, a gelu feed-forward block
    (named), the [CLS] pooler (tanh) and a classifier head."""
    token_embedder: eqx.nn.Embedding
    segment_embedder: eqx.nn.Embedding
    position_embedder: eqx.nn.Embedding
    layernorm: eqx.nn.LayerNorm
    attention: AttentionBlock
    mlp: eqx.nn.Linear
    output: eqx.nn.Linear
    ff_layernorm: eqx.nn.LayerNorm
    pooler: eqx.nn.Linear
    classifier: eqx.nn.Linear
    dropout: eqx.nn.Dropout

    def __init__(self, vocab, max_length, hidden, key):
        keys = jax.random.split(key, 8)
        self.token_embedder = eqx.nn.Embedding(vocab, hidden, key=keys[0])
        self.segment_embedder = eqx.nn.Embedding(2, hidden, key=keys[1])
        self.position_embedder = eqx.nn.Embedding(max_length, hidden, key=keys[2])
        self.layernorm = eqx.nn.LayerNorm(shape=hidden)
        self.attention = AttentionBlock(hidden, 2, 0.1, 0.1, key=keys[3])
        self.mlp = eqx.nn.Linear(hidden, 2 * hidden, key=keys[4])
        self.output = eqx.nn.Linear(2 * hidden, hidden, key=keys[5])
        self.ff_layernorm = eqx.nn.LayerNorm(shape=hidden)
        self.pooler = eqx.nn.Linear(hidden, hidden, key=keys[6])
        self.classifier = eqx.nn.Linear(hidden, 2, key=keys[7])
        self.dropout = eqx.nn.Dropout(0.1)

    def __call__(self, inputs, *, enable_dropout, key):
        emb_key, att_key, ff_key = jax.random.split(key, 3)
        token_ids, segment_ids = inputs["token_ids"], inputs["segment_ids"]
        position_ids = jnp.arange(token_ids.shape[-1])
        x = (jax.vmap(self.token_embedder)(token_ids) + jax.vmap(self.segment_embedder)(segment_ids)
             + jax.vmap(self.position_embedder)(position_ids))
        x = self.dropout(jax.vmap(self.layernorm)(x), inference=not enable_dropout, key=emb_key)
        x = self.attention(x, (token_ids != 0).astype(jnp.int32), enable_dropout=enable_dropout, key=att_key)
        hidden = checkpoint_name(jax.nn.gelu(jax.vmap(self.mlp)(x)), "mlp_hidden")
        output = self.dropout(jax.vmap(self.output)(hidden), inference=not enable_dropout, key=ff_key)
        x = jax.vmap(self.ff_layernorm)(output + x)
        return self.classifier(jnp.tanh(self.pooler(x[0])))


@model("equinox_bert", "equinox (docs/examples/bert)", names=("mlp_hidden",))
def equinox_bert():
    """The bert example's training loss: the classifier vmapped over the batch
    with one dropout key per example (jax.random.split of a typed key),
    optax.softmax_cross_entropy_with_integer_labels; params and static by
    eqx.partition(model, eqx.is_array), loss(params, static-free batch, key)."""
    model_ = abstract(lambda: BertClassifier(data.VOCAB, data.SEQ, W, jax.random.PRNGKey(0)))
    params, static = eqx.partition(model_, eqx.is_array)
    batch = {"token_ids": np.array([[3, 5, 7, 2], [4, 9, 1, 0]], np.int32),
             "segment_ids": np.array([[0, 0, 1, 1], [0, 1, 1, 0]], np.int32),
             "label": np.array([1, 0], np.int32)}

    def compute_loss(params, inputs, key):
        model = eqx.combine(params, static)
        batch_size = inputs["token_ids"].shape[0]
        batched_keys = jax.random.split(key, num=batch_size)
        logits = jax.vmap(lambda x, k: model(x, enable_dropout=True, key=k))(inputs, batched_keys)
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits=logits, labels=inputs["label"]))
    return Case(compute_loss, (params, batch, jax.random.key(7)))
