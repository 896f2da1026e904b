"""flax.nnx models, as the NNX docs write them, trained through the
functional API (nnx.split into params and the rest, nnx.merge inside the
loss) so that the loss is a function of the params pytree."""
from __future__ import annotations

import functools

import jax
import flax
import optax
from flax import nnx
from jax.ad_checkpoint import checkpoint_name

from . import data
from . import zoo
from .zoo import Case, model

# From flax 0.11 an NNX module is a pytree of its arrays; before, a module is
# one opaque leaf, which jax transformations take only through nnx.split
_FLAX_0_11 = tuple(int(p) for p in flax.__version__.split(".")[:2]) >= (0, 11)
_NNX_MODULES_ARE_PYTREES = not isinstance(jax.tree.leaves(nnx.Linear(1, 1, rngs=nnx.Rngs(0)))[0], nnx.Module)

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


# --- scan over layers: nnx.vmap-created blocks, nnx.scan(nnx.remat(...)) -------

class Block(nnx.Module):
    """A pre-LN decoder block: nnx.MultiHeadAttention (its q/k/v named through
    attention_fn) under a causal mask, nnx.Dropout, a gelu MLP."""
    def __init__(self, dim: int, heads: int, *, rngs: nnx.Rngs):
        self.ln1 = nnx.LayerNorm(dim, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=heads, in_features=dim, decode=False,
                                           attention_fn=named_attention, rngs=rngs)
        self.ln2 = nnx.LayerNorm(dim, rngs=rngs)
        self.fc1 = nnx.Linear(dim, 2 * dim, rngs=rngs)
        self.fc2 = nnx.Linear(2 * dim, dim, rngs=rngs)
        self.dropout = nnx.Dropout(0.1, rngs=rngs)

    def __call__(self, x, mask):
        x = x + self.dropout(self.attn(self.ln1(x), mask=mask))
        h = checkpoint_name(nnx.gelu(self.fc1(self.ln2(x))), "mlp_hidden")
        return x + self.dropout(self.fc2(h))


def named_attention(query, key, value, **kwargs):
    return nnx.dot_product_attention(checkpoint_name(query, "query"), checkpoint_name(key, "key"),
                                     checkpoint_name(value, "value"), **kwargs)


class ScanLM(nnx.Module):
    """The linen-to-NNX guide's scan over layers: the blocks made by
    nnx.split_rngs + nnx.vmap (stacked params and dropout streams), run by
    nnx.scan over nnx.remat(Block.__call__); nnx.Embed with a tied head."""
    def __init__(self, vocab: int, dim: int, heads: int, num_layers: int, *, rngs: nnx.Rngs):
        self.embed = nnx.Embed(vocab, dim, rngs=rngs)

        @nnx.split_rngs(splits=num_layers)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def create_block(rngs: nnx.Rngs):
            return Block(dim, heads, rngs=rngs)
        self.blocks = create_block(rngs)
        self.ln_f = nnx.LayerNorm(dim, rngs=rngs)

    def __call__(self, tokens):
        x = self.embed(tokens)
        mask = nnx.make_causal_mask(tokens)

        @nnx.scan(in_axes=(nnx.Carry, 0, None), out_axes=nnx.Carry)
        @nnx.remat
        def forward(x, block, mask):
            return block(x, mask)
        x = forward(x, self.blocks, mask)
        return self.embed.attend(self.ln_f(x))


@model("nnx_scan_lm", "flax.nnx (scan over layers)", names=("query", "key", "value", "mlp_hidden"))
def nnx_scan_lm():
    """A 2-layer causal LM: nnx.scan over nnx.remat'd blocks made with
    nnx.vmap (dropout on, its per-layer key streams part of the state);
    nnx.split(model, nnx.Param, ...), loss(params, rest, tokens) merges them
    and returns next-token optax.softmax_cross_entropy_with_integer_labels."""
    zoo.require(_FLAX_0_11, "nnx.scan over nnx.vmap-made blocks that carry Dropout's rng state (flax 0.11)")
    graphdef, params, rest = nnx.split(ScanLM(data.VOCAB, W, 2, 2, rngs=nnx.Rngs(0)), nnx.Param, ...)
    params = data.draw_params(jax.eval_shape(lambda: params))
    seq = data.rng(9).randint(0, data.VOCAB, (data.BATCH, data.SEQ + 1)).astype("int32")

    def loss(params, rest, tokens):
        model = nnx.merge(graphdef, params, rest)
        logits = model(tokens[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()
    return Case(loss, (params, rest, seq))


# --- the model itself as the argument (NNX modules are pytrees) ----------------

class ConvBN(nnx.Module):
    """nnx.Conv, nnx.BatchNorm (training mode), nnx.Dropout, nnx.max_pool,
    nnx.Linear."""
    def __init__(self, *, rngs: nnx.Rngs):
        self.conv = nnx.Conv(1, 4, kernel_size=(3, 3), rngs=rngs)
        self.bn = nnx.BatchNorm(4, momentum=0.9, rngs=rngs)
        self.dropout = nnx.Dropout(0.25, rngs=rngs)
        self.linear = nnx.Linear(4 * 4 * 4, data.CLASSES, rngs=rngs)

    def __call__(self, x):
        x = checkpoint_name(nnx.relu(self.bn(self.conv(x))), "conv_out")
        x = nnx.max_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = self.dropout(x.reshape(x.shape[0], -1))
        return self.linear(x)


@model("nnx_module_arg", "flax.nnx (the module as a pytree argument)", names=("conv_out",))
def nnx_module_arg():
    """The module passed whole, as jax.grad(loss_fn)(model, batch) takes it
    (NNX modules are pytrees: params, batch statistics, the Dropout's key
    and count are its leaves); one-hot labels, optax.softmax_cross_entropy
    with optax.smooth_labels; returns (loss, logits)."""
    zoo.require(_NNX_MODULES_ARE_PYTREES, "NNX modules as pytrees, which jax.grad takes whole (flax 0.11)")
    state = data.draw_params(jax.eval_shape(lambda: nnx.state(ConvBN(rngs=nnx.Rngs(0)), nnx.Param)))
    model_ = ConvBN(rngs=nnx.Rngs(0))
    nnx.update(model_, jax.tree.map(jax.numpy.asarray, state))
    batch = {"image": data.normal(data.BATCH, 8, 8, 1), "label": data.labels(data.BATCH)}

    def loss_fn(model, batch):
        logits = model(batch["image"])
        labels = optax.smooth_labels(jax.nn.one_hot(batch["label"], data.CLASSES), 0.1)
        return optax.softmax_cross_entropy(logits, labels).mean(), logits
    return Case(loss_fn, (model_, batch))
