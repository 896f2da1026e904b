"""Models from JAX's own examples: jax/examples/mnist_classifier_fromscratch.py
(an MLP in plain jax.numpy) and jax/examples/resnet50.py (its stax ConvBlock,
BatchNorm, max and average pooling), jax/examples/mnist_vae.py, and a
decoder in plain jax.numpy (NamedTuple params, lax.fori_loop over layers,
jax.nn.dot_product_attention)."""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpy.random as npr
from jax import lax, random
from jax.ad_checkpoint import checkpoint_name
from jax.example_libraries import stax
from jax.scipy.special import logsumexp

from . import data
from . import zoo
from .zoo import Case, model

W = data.WIDTH


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


# --- jax/examples/mnist_vae.py: stax encoder/decoder, Gaussian sample ----------

def gaussian_kl(mu, sigmasq):
    """KL divergence from a diagonal Gaussian to the standard Gaussian."""
    return -0.5 * jnp.sum(1. + jnp.log(sigmasq) - mu**2. - sigmasq)


def gaussian_sample(rng, mu, sigmasq):
    """Sample a diagonal Gaussian."""
    return mu + jnp.sqrt(sigmasq) * random.normal(rng, mu.shape)


def bernoulli_logpdf(logits, x):
    """Bernoulli log pdf of data x given logits."""
    return -jnp.sum(jnp.logaddexp(0., jnp.where(x, -1., 1.) * logits))


def named(name):
    """A stax layer placing checkpoint_name(x, name)."""
    return stax.elementwise(lambda x: checkpoint_name(x, name))


@model("jax_mnist_vae", "jax (examples/mnist_vae.py)", names=("hidden",))
def jax_mnist_vae():
    """The example's encoder (stax.serial, FanOut, parallel, Softplus) and
    decoder, its elbo(rng, params, images) and the loss of its body_fun:
    -elbo / batch_size, with the images binarised by random.bernoulli
    (bool) and the elbo key from random.split(random.fold_in(rng, i))."""
    encoder_init, encode = stax.serial(
        stax.Dense(W), stax.Relu, named("hidden"), stax.Dense(W), stax.Relu,
        stax.FanOut(2), stax.parallel(stax.Dense(3), stax.serial(stax.Dense(3), stax.Softplus)))
    decoder_init, decode = stax.serial(stax.Dense(W), stax.Relu, named("hidden"), stax.Dense(12))
    _, enc_shapes = jax.eval_shape(lambda k: encoder_init(k, (data.BATCH, 12)), random.PRNGKey(0))
    _, dec_shapes = jax.eval_shape(lambda k: decoder_init(k, (data.BATCH, 3)), random.PRNGKey(1))
    params = (data.draw_params(enc_shapes), data.draw_params(dec_shapes, seed=1))
    train_images = data.rng(2).rand(data.BATCH, 12).astype("float32")

    def elbo(rng, params, images):
        enc_params, dec_params = params
        mu_z, sigmasq_z = encode(enc_params, images)
        logits_x = decode(dec_params, gaussian_sample(rng, mu_z, sigmasq_z))
        return bernoulli_logpdf(logits_x, images) - gaussian_kl(mu_z, sigmasq_z)

    def loss(params, rng, i, images):
        elbo_rng, data_rng = random.split(random.fold_in(rng, i))
        batch = random.bernoulli(data_rng, images)
        return -elbo(elbo_rng, params, batch) / data.BATCH
    return Case(loss, (params, data.prng_key(0), 3, train_images))


# --- a decoder in plain jax.numpy: NamedTuple params, lax.fori_loop over layers --

class Layer(NamedTuple):
    ln: jax.Array          # [L, D] RMSNorm scales
    wqkv: jax.Array        # [L, D, 3, H, K]
    wo: jax.Array          # [L, H, K, D]
    w1: jax.Array          # [L, D, F]
    w2: jax.Array          # [L, F, D]


class Params(NamedTuple):
    embed: jax.Array       # [V, D]
    layers: Layer


def rms_norm(x, scale, eps=1e-6):
    """x / rms(x) * scale, the rms by jnp.linalg.norm."""
    rms = jnp.linalg.norm(x, axis=-1, keepdims=True) / jnp.sqrt(x.shape[-1])
    return x / (rms + eps) * scale


def decoder_layer(x, layer, mask):
    """Pre-norm attention (jax.nn.dot_product_attention, a bool mask) and an
    exact-gelu MLP, einsum projections."""
    h = rms_norm(x, layer.ln)
    q, k, v = jnp.unstack(jnp.einsum("btd,dchk->cbthk", h, layer.wqkv), axis=0)
    q, k, v = (checkpoint_name(t, n) for t, n in ((q, "query"), (k, "key"), (v, "value")))
    a = jax.nn.dot_product_attention(q, k, v, mask=mask, implementation="xla")
    x = x + jnp.einsum("bthk,hkd->btd", a, layer.wo)
    h = checkpoint_name(jax.nn.gelu(rms_norm(x, layer.ln) @ layer.w1, approximate=False), "mlp_hidden")
    return x + h @ layer.w2


@model("jax_fori_decoder", "jax (plain jax.numpy, lax.fori_loop)", names=("query", "key", "value", "mlp_hidden"))
def jax_fori_decoder():
    """Params a NamedTuple of stacked per-layer weights, the layers run by
    lax.fori_loop (indexing the stack with the loop counter: a scan), a
    causal & padding bool mask, the loss by jax.nn.log_softmax and
    jnp.take_along_axis over int targets, weighted by a bool mask."""
    zoo.require(hasattr(jnp, "unstack"), "jnp.unstack (jax 0.4.27)")
    L, D, H, F, V = 2, W, 2, 2 * W, data.VOCAB
    r = data.rng(12)
    n = lambda *s: (r.randn(*s) / np.sqrt(s[-2] if len(s) > 1 else 1)).astype(np.float32)
    params = Params(embed=n(V, D), layers=Layer(ln=1 + 0.1 * n(L, D), wqkv=n(L, D, 3, H, D // H),
                                                wo=n(L, H, D // H, D), w1=n(L, D, F), w2=n(L, F, D)))
    tokens = np.array([[3, 5, 7, 2, 6], [4, 9, 1, 0, 0]], np.int32)

    def loss(params, tokens, pad):
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        T = inputs.shape[1]
        mask = jnp.tril(jnp.ones((T, T), bool))[None, None] & ~pad[:, None, None, :-1]
        x = params.embed[inputs]
        x = lax.fori_loop(0, L, lambda i, x: decoder_layer(x, jax.tree.map(lambda w: w[i], params.layers), mask), x)
        logp = jax.nn.log_softmax(x @ params.embed.T)
        nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
        weights = ~pad[:, 1:]
        return jnp.sum(jnp.where(weights, nll, 0.0)) / jnp.sum(weights)
    return Case(loss, (params, tokens, tokens == 0))
