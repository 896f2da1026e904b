"""haiku models, as haiku's examples write them: examples/mnist.py's MLP
(hk.nets.MLP under hk.transform, its loss with an L2 regulariser) and a
stateful ResNet-style block (hk.transform_with_state, hk.Conv2D,
hk.BatchNorm, hk.max_pool)."""
from __future__ import annotations

from typing import NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.ad_checkpoint import checkpoint_name

from . import data
from .zoo import Case, model

W = data.WIDTH


class Batch(NamedTuple):
    image: np.ndarray   # [B, H, W, C]
    label: np.ndarray   # [B]


def net_fn(images):
    """examples/mnist.py's network, its hidden activations named."""
    mlp = hk.Sequential([
        hk.Flatten(),
        hk.nets.MLP([W, W, data.CLASSES], activation=lambda x: checkpoint_name(jax.nn.relu(x), "mlp_hidden")),
    ])
    return mlp(images)


@model("haiku_mlp", "haiku (examples/mnist.py)", names=("mlp_hidden",))
def haiku_mlp():
    """hk.without_apply_rng(hk.transform(net_fn)) with hk.nets.MLP; the
    example's loss: one-hot log-likelihood plus 1e-4 * L2 of all params."""
    network = hk.without_apply_rng(hk.transform(net_fn))
    batch = Batch(data.normal(data.BATCH, 4, 4, 1), data.labels(data.BATCH))
    params = data.draw_params(jax.eval_shape(network.init, jax.random.PRNGKey(42), batch.image))

    def loss(params: hk.Params, batch: Batch) -> jax.Array:
        batch_size, *_ = batch.image.shape
        logits = network.apply(params, batch.image)
        labels = jax.nn.one_hot(batch.label, data.CLASSES)
        l2_regulariser = 0.5 * sum(jnp.sum(jnp.square(p)) for p in jax.tree.leaves(params))
        log_likelihood = jnp.sum(labels * jax.nn.log_softmax(logits))
        return -log_likelihood / batch_size + 1e-4 * l2_regulariser
    return Case(loss, (params, batch))


def resnet_fn(images, is_training):
    """A ResNet v1 block as hk.nets.ResNet builds it (Conv2D, BatchNorm,
    relu, projection shortcut), after a strided stem and max pooling."""
    bn = lambda: hk.BatchNorm(create_scale=True, create_offset=True, decay_rate=0.9)
    x = hk.Conv2D(4, kernel_shape=3, stride=1, with_bias=False, name="initial_conv")(images)
    x = jax.nn.relu(bn()(x, is_training))
    x = hk.max_pool(x, window_shape=(1, 2, 2, 1), strides=(1, 2, 2, 1), padding="SAME")
    shortcut = bn()(hk.Conv2D(8, kernel_shape=1, stride=1, with_bias=False, name="shortcut_conv")(x),
                    is_training)
    y = hk.Conv2D(8, kernel_shape=3, stride=1, with_bias=False, name="conv_0")(x)
    y = checkpoint_name(jax.nn.relu(bn()(y, is_training)), "conv_out")
    y = hk.Conv2D(8, kernel_shape=3, stride=1, with_bias=False, name="conv_1")(y)
    y = bn()(y, is_training)
    x = jax.nn.relu(shortcut + y)
    x = jnp.mean(x, axis=(1, 2))
    return hk.Linear(data.CLASSES)(x)


@model("haiku_resnet", "haiku (hk.transform_with_state)", names=("conv_out",))
def haiku_resnet():
    """hk.transform_with_state: Conv2D, BatchNorm in training mode (its state
    updated and returned), hk.max_pool; softmax cross-entropy on one-hot
    labels, loss(params, state, batch) -> (loss, new_state) as haiku's
    imagenet example's loss_fn returns it."""
    net = hk.without_apply_rng(hk.transform_with_state(resnet_fn))
    batch = Batch(data.normal(data.BATCH, 8, 8, 3), data.labels(data.BATCH))
    params, state = jax.eval_shape(lambda k: net.init(k, batch.image, is_training=True), jax.random.PRNGKey(0))
    params, state = data.draw_params(params), data.draw_params(state, seed=1)

    def loss_fn(params, state, batch):
        logits, state = net.apply(params, state, batch.image, is_training=True)
        labels = jax.nn.one_hot(batch.label, data.CLASSES)
        loss = -jnp.mean(jnp.sum(labels * jax.nn.log_softmax(logits), axis=-1))
        return loss, state
    return Case(loss_fn, (params, state, batch))


# --- a transformer LM: hk.MultiHeadAttention, hk.remat, hk.dropout ------------

class TransformerBlock(hk.Module):
    """A pre-LN decoder block as haiku's examples/transformer writes it:
    hk.LayerNorm, hk.MultiHeadAttention under a causal mask, hk.dropout with
    hk.next_rng_key(), an exact-gelu MLP (jax.nn.gelu(approximate=False))."""
    def __init__(self, num_heads, dropout_rate, name=None):
        super().__init__(name=name)
        self.num_heads = num_heads
        self.dropout_rate = dropout_rate

    def __call__(self, h, mask):
        d = h.shape[-1]
        ln = lambda x: hk.LayerNorm(axis=-1, create_scale=True, create_offset=True)(x)
        attn = hk.MultiHeadAttention(num_heads=self.num_heads, key_size=d // self.num_heads, model_size=d,
                                     w_init=hk.initializers.VarianceScaling(2.0))
        a = attn(ln(h), ln(h), ln(h), mask=mask)
        h = h + hk.dropout(hk.next_rng_key(), self.dropout_rate, a)
        m = checkpoint_name(jax.nn.gelu(hk.Linear(2 * d)(ln(h)), approximate=False), "mlp_hidden")
        return h + hk.dropout(hk.next_rng_key(), self.dropout_rate, hk.Linear(d)(m))


def transformer_lm_fn(tokens):
    """hk.Embed, learned positions (hk.get_parameter), two blocks each under
    hk.remat, a final hk.LayerNorm and an unembedding hk.Linear."""
    seq_len = tokens.shape[-1]
    x = hk.Embed(vocab_size=data.VOCAB, embed_dim=W)(tokens)
    x = x + hk.get_parameter("positional_embeddings", [seq_len, W], init=hk.initializers.TruncatedNormal(0.02))
    mask = jnp.tril(jnp.ones((1, 1, seq_len, seq_len), bool))
    for i in range(2):
        block = TransformerBlock(num_heads=2, dropout_rate=0.1, name=f"block_{i}")
        x = hk.remat(block)(x, mask)
    x = hk.LayerNorm(axis=-1, create_scale=True, create_offset=True)(x)
    return hk.Linear(data.VOCAB)(x)


@model("haiku_transformer", "haiku (hk.MultiHeadAttention, hk.remat)", names=("mlp_hidden",), slow=True)
def haiku_transformer():
    """hk.transform (with an rng for dropout): apply(params, rng, tokens);
    the next-token loss with a padding mask (jnp.where over bool),
    optax.softmax_cross_entropy_with_integer_labels; rng a raw uint32 key."""
    network = hk.transform(transformer_lm_fn)
    seq = np.array([[3, 5, 7, 2, 6], [4, 9, 1, 0, 0]], np.int32)
    params = data.draw_params(jax.eval_shape(network.init, jax.random.PRNGKey(0), seq[:, :-1]))

    def loss_fn(params, rng, batch):
        inputs, targets = batch[:, :-1], batch[:, 1:]
        logits = network.apply(params, rng, inputs)
        mask = targets != 0
        xent = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
        return jnp.sum(jnp.where(mask, xent, 0.0)) / jnp.sum(mask)
    return Case(loss_fn, (params, data.prng_key(4), seq))


# --- an LSTM acoustic model with CTC: hk.LSTM, hk.dynamic_unroll, optax.ctc_loss --

def ctc_net_fn(frames):
    """One hk.LSTM unrolled with
    hk.dynamic_unroll (time-major, a lax.scan), hk.BatchApply(hk.Linear) to
    per-frame logits over the blank + labels."""
    batch = frames.shape[0]
    core = hk.LSTM(W)
    outs, _ = hk.dynamic_unroll(core, jnp.swapaxes(frames, 0, 1), core.initial_state(batch))
    outs = checkpoint_name(jnp.swapaxes(outs, 0, 1), "lstm_out")
    return hk.BatchApply(hk.Linear(data.CLASSES))(outs)


@model("haiku_lstm_ctc", "haiku (hk.LSTM, hk.dynamic_unroll) + optax.ctc_loss", names=("lstm_out",),
       slow=True)
def haiku_lstm_ctc():
    """Frames [B, T, F] with paddings, labels with paddings; optax.ctc_loss
    (its alignment recursion a lax.scan of logaddexp), averaged over the
    label lengths."""
    network = hk.without_apply_rng(hk.transform(ctc_net_fn))
    T = 6
    frames = data.normal(data.BATCH, T, 3)
    logit_paddings = np.array([[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1]], np.float32)
    labels = np.array([[1, 2, 2], [3, 1, 0]], np.int32)
    label_paddings = np.array([[0, 0, 0], [0, 0, 1]], np.float32)
    params = data.draw_params(jax.eval_shape(network.init, jax.random.PRNGKey(0), frames))

    def loss_fn(params, batch):
        logits = network.apply(params, batch["frames"])
        per_seq = optax.ctc_loss(logits, batch["logit_paddings"], batch["labels"], batch["label_paddings"])
        return jnp.mean(per_seq / jnp.maximum(jnp.sum(1.0 - batch["label_paddings"], axis=-1), 1.0))
    return Case(loss_fn, (params, {"frames": frames, "logit_paddings": logit_paddings, "labels": labels,
                                   "label_paddings": label_paddings}))
