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
