"""Models from JAX's own examples: jax/examples/mnist_classifier_fromscratch.py
(an MLP in plain jax.numpy) and jax/examples/resnet50.py (its stax ConvBlock,
BatchNorm, max and average pooling)."""
from __future__ import annotations

import jax.numpy as jnp
import numpy.random as npr
from jax.ad_checkpoint import checkpoint_name
from jax.example_libraries import stax
from jax.scipy.special import logsumexp

from . import data
from .zoo import Case, model


# --- jax/examples/mnist_classifier_fromscratch.py ---------------------------

def init_random_params(scale, layer_sizes, rng=npr.RandomState(0)):
    return [(scale * rng.randn(m, n).astype("float32"), scale * rng.randn(n).astype("float32"))
            for m, n, in zip(layer_sizes[:-1], layer_sizes[1:])]


def predict(params, inputs):
    activations = inputs
    for w, b in params[:-1]:
        outputs = jnp.dot(activations, w) + b
        activations = checkpoint_name(jnp.tanh(outputs), "hidden")
    final_w, final_b = params[-1]
    logits = jnp.dot(activations, final_w) + final_b
    return logits - logsumexp(logits, axis=1, keepdims=True)


def mnist_loss(params, batch):
    inputs, targets = batch
    preds = predict(params, inputs)
    return -jnp.mean(jnp.sum(preds * targets, axis=1))


@model("jax_mlp", "jax (examples/mnist_classifier_fromscratch.py)", names=("hidden",))
def jax_mlp():
    """The from-scratch MNIST MLP: tanh layers, log-softmax via logsumexp,
    one-hot targets; the hidden activations are named."""
    params = init_random_params(0.1, [12, data.WIDTH, data.WIDTH, data.CLASSES])
    batch = (data.normal(data.BATCH, 12), data.one_hot(data.labels(data.BATCH)))
    return Case(mnist_loss, (params, batch))


# --- jax/examples/resnet50.py (stax) -----------------------------------------

def Named(name):
    """A stax layer naming its input for checkpoint policies (the way a stax
    user adds checkpoint_name: a layer is an (init_fun, apply_fun) pair)."""
    return (lambda rng, input_shape: (input_shape, ()),
            lambda params, inputs, **kwargs: checkpoint_name(inputs, name))


def ConvBlock(kernel_size, filters, strides=(2, 2)):
    ks = kernel_size
    filters1, filters2, filters3 = filters
    Main = stax.serial(
        stax.Conv(filters1, (1, 1), strides), stax.BatchNorm(), stax.Relu,
        stax.Conv(filters2, (ks, ks), padding="SAME"), stax.BatchNorm(), stax.Relu, Named("conv_out"),
        stax.Conv(filters3, (1, 1)), stax.BatchNorm())
    Shortcut = stax.serial(stax.Conv(filters3, (1, 1), strides), stax.BatchNorm())
    return stax.serial(stax.FanOut(2), stax.parallel(Main, Shortcut), stax.FanInSum, stax.Relu)


def TinyResNet(num_classes):
    """resnet50.py's ResNet50, cut to its stem and one ConvBlock (the block
    with the projection shortcut; XLA:CPU compiles each convolution's
    derivatives separately, so every conv costs the check seconds)."""
    return stax.serial(
        stax.GeneralConv(("NHWC", "HWIO", "NHWC"), 4, (3, 3), (1, 1), "SAME"),
        stax.BatchNorm(), stax.Relu, stax.MaxPool((2, 2), strides=(2, 2)),
        ConvBlock(3, [4, 4, 8], strides=(1, 1)),
        stax.AvgPool((4, 4)), stax.Flatten, stax.Dense(num_classes), stax.LogSoftmax)


@model("stax_resnet", "jax.example_libraries.stax (examples/resnet50.py)", names=("conv_out",))
def stax_resnet():
    """jax/examples/resnet50.py's stem and ConvBlock (stax Conv, BatchNorm,
    MaxPool, AvgPool, FanOut/FanInSum) and its loss -sum(logits * targets)."""
    import jax
    init_fun, predict_fun = TinyResNet(data.CLASSES)
    _, params = jax.eval_shape(lambda key: init_fun(key, (data.BATCH, 8, 8, 3)), jax.random.PRNGKey(0))

    def loss(params, batch):
        inputs, targets = batch
        logits = predict_fun(params, inputs)
        return -jnp.sum(logits * targets)
    batch = (data.normal(data.BATCH, 8, 8, 3), data.one_hot(data.labels(data.BATCH)))
    return Case(loss, (data.draw_params(params), batch))
