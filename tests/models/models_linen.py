"""flax.linen models, written as flax's examples and docs write them
(examples/mnist, examples/imagenet, examples/lm1b, the nn.scan/nn.remat
"scan over layers" guide, nn.RNN), with optax losses. Names
(checkpoint_name) sit where users place them: attention q/k/v (through
`attention_fn`, or on the split c_attn projection) and MLP activations."""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import linen as nn
from jax.ad_checkpoint import checkpoint_name

from . import data
from .zoo import Case, model

ModuleDef = Any
W = data.WIDTH


def named_attention(query, key, value, **kwargs):
    """An `attention_fn` for nn.MultiHeadDotProductAttention / nn.SelfAttention
    that names the projected q, k, v for checkpoint policies."""
    query = checkpoint_name(query, "query")
    key = checkpoint_name(key, "key")
    value = checkpoint_name(value, "value")
    return nn.dot_product_attention(query, key, value, **kwargs)


def init(module, *args, **kwargs):
    """The variables module.init makes (their structure, traced with
    jax.eval_shape: nothing compiled), with values drawn at trained scales."""
    return data.draw_params(jax.eval_shape(lambda key: module.init(key, *args, **kwargs),
                                           jax.random.PRNGKey(0)))


# --- MLP with integer-label cross-entropy --------------------------------------

class MLP(nn.Module):
    features: Sequence[int]

    @nn.compact
    def __call__(self, x):
        for feat in self.features[:-1]:
            x = nn.relu(nn.Dense(feat)(x))
            x = checkpoint_name(x, "mlp_hidden")
        return nn.Dense(self.features[-1])(x)


@model("linen_mlp", "flax.linen", names=("mlp_hidden",))
def linen_mlp():
    """nn.Dense + nn.relu MLP; optax.softmax_cross_entropy_with_integer_labels."""
    net = MLP([W, W, data.CLASSES])
    x, y = data.normal(data.BATCH, 6), data.labels(data.BATCH)
    variables = init(net, x)

    def loss(params, batch):
        x, y = batch
        logits = net.apply({"params": params}, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
    return Case(loss, (variables["params"], (x, y)))


# --- examples/mnist CNN, with max pooling -------------------------------------

class CNN(nn.Module):
    """flax examples/mnist's CNN (features scaled down; max pooling)."""
    @nn.compact
    def __call__(self, x):
        x = nn.Conv(features=4, kernel_size=(3, 3))(x)
        x = nn.relu(x)
        x = checkpoint_name(x, "conv_out")
        x = nn.max_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = nn.Conv(features=8, kernel_size=(3, 3))(x)
        x = nn.relu(x)
        x = checkpoint_name(x, "conv_out")
        x = nn.max_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))  # flatten
        x = nn.Dense(features=W)(x)
        x = nn.relu(x)
        x = nn.Dense(features=data.CLASSES)(x)
        return x


@model("linen_cnn", "flax.linen (examples/mnist)", names=("conv_out",))
def linen_cnn():
    """examples/mnist: nn.Conv, nn.max_pool, nn.Dense; its loss
    optax.softmax_cross_entropy on jax.nn.one_hot labels."""
    net = CNN()
    images, labels = data.normal(data.BATCH, 8, 8, 1), data.labels(data.BATCH)
    params = init(net, images)["params"]

    def loss_fn(params, batch):
        logits = net.apply({"params": params}, batch["image"])
        one_hot = jax.nn.one_hot(batch["label"], data.CLASSES)
        return jnp.mean(optax.softmax_cross_entropy(logits=logits, labels=one_hot))
    return Case(loss_fn, (params, {"image": images, "label": labels}))


# --- examples/imagenet ResNet (ResNetBlock, nn.BatchNorm) --------------------

class ResNetBlock(nn.Module):
    """examples/imagenet/models.py's ResNetBlock (a conv output named)."""
    filters: int
    conv: ModuleDef
    norm: ModuleDef
    act: Callable
    strides: tuple[int, int] = (1, 1)

    @nn.compact
    def __call__(self, x):
        residual = x
        y = self.conv(self.filters, (3, 3), self.strides)(x)
        y = self.norm()(y)
        y = self.act(y)
        y = checkpoint_name(y, "conv_out")
        y = self.conv(self.filters, (3, 3))(y)
        y = self.norm(scale_init=nn.initializers.zeros_init())(y)
        if residual.shape != y.shape:
            residual = self.conv(self.filters, (1, 1), self.strides, name="conv_proj")(residual)
            residual = self.norm(name="norm_proj")(residual)
        return self.act(residual + y)


class ResNet(nn.Module):
    """examples/imagenet/models.py's ResNet (no pmap: no axis_name)."""
    stage_sizes: Sequence[int]
    block_cls: ModuleDef
    num_classes: int
    num_filters: int = 64
    dtype: Any = jnp.float32
    act: Callable = nn.relu
    conv: ModuleDef = nn.Conv

    @nn.compact
    def __call__(self, x, train: bool = True):
        conv = functools.partial(self.conv, use_bias=False, dtype=self.dtype)
        norm = functools.partial(nn.BatchNorm, use_running_average=not train, momentum=0.9,
                                 epsilon=1e-5, dtype=self.dtype)
        x = conv(self.num_filters, (7, 7), (2, 2), padding=[(3, 3), (3, 3)], name="conv_init")(x)
        x = norm(name="bn_init")(x)
        x = nn.relu(x)
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
        for i, block_size in enumerate(self.stage_sizes):
            for j in range(block_size):
                strides = (2, 2) if i > 0 and j == 0 else (1, 1)
                x = self.block_cls(self.num_filters * 2**i, strides=strides, conv=conv, norm=norm,
                                   act=self.act)(x)
        x = jnp.mean(x, axis=(1, 2))
        x = nn.Dense(self.num_classes, dtype=self.dtype)(x)
        x = jnp.asarray(x, self.dtype)
        return x


@model("linen_resnet", "flax.linen (examples/imagenet)", names=("conv_out",))
def linen_resnet():
    """examples/imagenet: ResNet of ResNetBlocks with nn.BatchNorm in training
    mode (mutable batch_stats), train.py's loss_fn: cross-entropy + weight
    decay, returning (loss, (new_model_state, logits))."""
    net = ResNet(stage_sizes=[1, 1], block_cls=ResNetBlock, num_classes=data.CLASSES, num_filters=4)
    images, labels = data.normal(data.BATCH, 8, 8, 3), data.labels(data.BATCH)
    variables = init(net, images, train=False)
    params = variables["params"]

    def loss_fn(params, batch_stats, batch):
        logits, new_model_state = net.apply({"params": params, "batch_stats": batch_stats},
                                            batch["image"], mutable=["batch_stats"])
        one_hot_labels = jax.nn.one_hot(batch["label"], data.CLASSES)
        loss = jnp.mean(optax.softmax_cross_entropy(logits=logits, labels=one_hot_labels))
        weight_penalty_params = jax.tree_util.tree_leaves(params)
        weight_decay = 0.0001
        weight_l2 = sum(jnp.sum(x**2) for x in weight_penalty_params if x.ndim > 1)
        weight_penalty = weight_decay * 0.5 * weight_l2
        loss = loss + weight_penalty
        return loss, (new_model_state, logits)
    return Case(loss_fn, (params, variables["batch_stats"], {"image": images, "label": labels}))


# --- LSTM: nn.RNN(nn.LSTMCell) -------------------------------------------------

class LSTMClassifier(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, x):                          # x: (batch, time, features)
        h = nn.RNN(nn.LSTMCell(self.hidden))(x)
        h = checkpoint_name(h, "lstm_out")
        return nn.Dense(1)(h[:, -1])[..., 0]


@model("linen_lstm", "flax.linen (nn.RNN)", names=("lstm_out",))
def linen_lstm():
    """nn.RNN over nn.LSTMCell (a scan), last step to a logit;
    optax.sigmoid_binary_cross_entropy."""
    net = LSTMClassifier(W)
    x = data.normal(data.BATCH, data.SEQ, 3)
    y = data.labels(data.BATCH, 2).astype(np.float32)
    params = init(net, x)["params"]

    def loss(params, batch):
        x, y = batch
        logits = net.apply({"params": params}, x)
        return optax.sigmoid_binary_cross_entropy(logits, y).mean()
    return Case(loss, (params, (x, y)))


# --- BERT-style encoder layer --------------------------------------------------

class BertLayer(nn.Module):
    """Post-LN encoder layer: nn.SelfAttention with a padding mask, dropout,
    GELU MLP, nn.LayerNorm."""
    heads: int
    mlp_dim: int
    dropout_rate: float = 0.1

    @nn.compact
    def __call__(self, x, mask, deterministic: bool):
        attn = nn.SelfAttention(num_heads=self.heads, dropout_rate=self.dropout_rate,
                                attention_fn=named_attention, name="attention")(
            x, mask=mask, deterministic=deterministic)
        attn = nn.Dropout(self.dropout_rate)(attn, deterministic=deterministic)
        x = nn.LayerNorm(epsilon=1e-12)(x + attn)
        h = nn.Dense(self.mlp_dim, name="intermediate")(x)
        h = checkpoint_name(nn.gelu(h), "mlp_hidden")
        h = nn.Dense(x.shape[-1], name="output")(h)
        h = nn.Dropout(self.dropout_rate)(h, deterministic=deterministic)
        return nn.LayerNorm(epsilon=1e-12)(x + h)


class BertMLM(nn.Module):
    vocab: int
    hidden: int
    max_len: int

    @nn.compact
    def __call__(self, tokens, deterministic: bool = True):
        word_embeddings = nn.Embed(self.vocab, self.hidden, name="word_embeddings")
        position_embeddings = self.param("position_embeddings", nn.initializers.normal(0.02),
                                         (self.max_len, self.hidden))
        x = word_embeddings(tokens) + position_embeddings[None, :tokens.shape[1]]
        x = nn.LayerNorm(epsilon=1e-12)(x)
        x = nn.Dropout(0.1)(x, deterministic=deterministic)
        mask = nn.make_attention_mask(tokens > 0, tokens > 0)     # token 0 is [PAD]
        x = BertLayer(heads=2, mlp_dim=2 * self.hidden)(x, mask, deterministic)
        return word_embeddings.attend(x)                          # tied MLM head


@model("linen_bert_layer", "flax.linen", names=("query", "key", "value", "mlp_hidden"))
def linen_bert_layer():
    """Token + position embeddings, one BERT encoder layer (nn.SelfAttention
    with a padding mask, dropout on), tied MLM head; masked-LM loss with
    optax.softmax_cross_entropy_with_integer_labels over the masked positions.
    loss(params, batch, dropout_rng)."""
    net = BertMLM(data.VOCAB, W, max_len=data.SEQ)
    tokens = np.array([[3, 5, 7, 2], [4, 9, 1, 0]], np.int32)      # the second padded
    targets = np.array([[3, 6, 7, 2], [8, 9, 1, 0]], np.int32)
    weights = np.array([[0, 1, 0, 0], [1, 0, 0, 0]], np.float32)   # the masked positions
    params = init(net, tokens)["params"]

    def loss(params, batch, dropout_rng):
        logits = net.apply({"params": params}, batch["tokens"], deterministic=False,
                           rngs={"dropout": dropout_rng})
        xent = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"])
        return jnp.sum(xent * batch["weights"]) / jnp.sum(batch["weights"])
    return Case(loss, (params, {"tokens": tokens, "targets": targets, "weights": weights},
                       data.prng_key(1)))


# --- GPT-2-style decoder ---------------------------------------------------------

class CausalSelfAttention(nn.Module):
    n_head: int
    dropout: float

    @nn.compact
    def __call__(self, x, deterministic: bool):
        B, T, C = x.shape
        qkv = nn.Dense(3 * C, name="c_attn")(x)
        q, k, v = jnp.split(qkv, 3, axis=-1)
        q = checkpoint_name(q.reshape(B, T, self.n_head, C // self.n_head), "query")
        k = checkpoint_name(k.reshape(B, T, self.n_head, C // self.n_head), "key")
        v = checkpoint_name(v.reshape(B, T, self.n_head, C // self.n_head), "value")
        mask = nn.make_causal_mask(jnp.ones((B, T)), dtype=bool)
        y = nn.dot_product_attention(q, k, v, mask=mask, dropout_rate=self.dropout,
                                     deterministic=deterministic,
                                     dropout_rng=None if deterministic else self.make_rng("dropout"))
        y = y.reshape(B, T, C)
        y = nn.Dense(C, name="c_proj")(y)
        return nn.Dropout(self.dropout)(y, deterministic=deterministic)


class GPTMLP(nn.Module):
    dropout: float

    @nn.compact
    def __call__(self, x, deterministic: bool):
        C = x.shape[-1]
        h = nn.Dense(4 * C, name="c_fc")(x)
        h = checkpoint_name(nn.gelu(h, approximate=True), "mlp_hidden")
        h = nn.Dense(C, name="c_proj")(h)
        return nn.Dropout(self.dropout)(h, deterministic=deterministic)


class GPTBlock(nn.Module):
    n_head: int
    dropout: float

    @nn.compact
    def __call__(self, x, deterministic: bool):
        x = x + CausalSelfAttention(self.n_head, self.dropout, name="attn")(
            nn.LayerNorm(epsilon=1e-5, name="ln_1")(x), deterministic)
        x = x + GPTMLP(self.dropout, name="mlp")(nn.LayerNorm(epsilon=1e-5, name="ln_2")(x), deterministic)
        return x


class GPT(nn.Module):
    vocab_size: int
    block_size: int
    n_layer: int
    n_head: int
    n_embd: int
    dropout: float = 0.1

    @nn.compact
    def __call__(self, idx, deterministic: bool = True):
        B, T = idx.shape
        wte = nn.Embed(self.vocab_size, self.n_embd, name="wte")
        wpe = nn.Embed(self.block_size, self.n_embd, name="wpe")
        pos = jnp.arange(0, T)[None]
        x = wte(idx) + wpe(pos)
        x = nn.Dropout(self.dropout)(x, deterministic=deterministic)
        for i in range(self.n_layer):
            x = GPTBlock(self.n_head, self.dropout, name=f"h_{i}")(x, deterministic)
        x = nn.LayerNorm(epsilon=1e-5, name="ln_f")(x)
        return wte.attend(x)                                      # weight tying


@model("linen_gpt2", "flax.linen", names=("query", "key", "value", "mlp_hidden"))
def linen_gpt2():
    """A GPT-2 decoder (nanoGPT's layout): token + position nn.Embed, pre-LN
    blocks with a fused c_attn projection split into q/k/v, causal mask,
    attention/residual/embedding dropout, tied LM head; next-token
    optax.softmax_cross_entropy_with_integer_labels. loss(params, batch, rng)."""
    net = GPT(vocab_size=data.VOCAB, block_size=data.SEQ, n_layer=1, n_head=2, n_embd=W)
    seq = data.rng(4).randint(0, data.VOCAB, (data.BATCH, data.SEQ + 1)).astype(np.int32)
    idx, targets = seq[:, :-1], seq[:, 1:]
    params = init(net, idx)["params"]

    def loss(params, batch, rng):
        logits = net.apply({"params": params}, batch["idx"], deterministic=False, rngs={"dropout": rng})
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"]).mean()
    return Case(loss, (params, {"idx": idx, "targets": targets}, data.prng_key(2)))


# --- examples/lm1b transformer LM --------------------------------------------------

def sinusoidal_init(max_len, min_scale=1.0, max_scale=10000.0):
    """examples/lm1b/models.py's 1D sinusoidal position embedding initializer."""
    def init(key, shape, dtype=np.float32):
        d_feature = shape[-1]
        pe = np.zeros((max_len, d_feature), dtype=np.float32)
        position = np.arange(0, max_len)[:, np.newaxis]
        scale_factor = -np.log(max_scale / min_scale) / (d_feature // 2 - 1)
        div_term = min_scale * np.exp(np.arange(0, d_feature // 2) * scale_factor)
        pe[:, : d_feature // 2] = np.sin(position * div_term)
        pe[:, d_feature // 2: 2 * (d_feature // 2)] = np.cos(position * div_term)
        return jnp.array(pe[np.newaxis, :, :])  # [1, max_len, d_feature]
    return init


class AddPositionEmbs(nn.Module):
    max_len: int

    @nn.compact
    def __call__(self, inputs):
        length = inputs.shape[1]
        pos_embedding = sinusoidal_init(max_len=self.max_len)(None, (1, self.max_len, inputs.shape[-1]))
        return inputs + pos_embedding[:, :length, :]


class MlpBlock(nn.Module):
    mlp_dim: int
    dropout_rate: float

    @nn.compact
    def __call__(self, inputs, deterministic=True):
        x = nn.Dense(self.mlp_dim, kernel_init=nn.initializers.xavier_uniform(),
                     bias_init=nn.initializers.normal(stddev=1e-6))(inputs)
        x = nn.relu(x)
        x = checkpoint_name(x, "mlp_hidden")
        x = nn.Dropout(rate=self.dropout_rate)(x, deterministic=deterministic)
        output = nn.Dense(inputs.shape[-1], kernel_init=nn.initializers.xavier_uniform(),
                          bias_init=nn.initializers.normal(stddev=1e-6))(x)
        return nn.Dropout(rate=self.dropout_rate)(output, deterministic=deterministic)


class DecoderBlock(nn.Module):
    num_heads: int
    mlp_dim: int
    dropout_rate: float
    attention_dropout_rate: float

    @nn.compact
    def __call__(self, inputs, decoder_mask=None, deterministic=True):
        x = nn.LayerNorm()(inputs)
        x = nn.MultiHeadDotProductAttention(
            num_heads=self.num_heads, kernel_init=nn.initializers.xavier_uniform(),
            bias_init=nn.initializers.normal(stddev=1e-6), use_bias=False, broadcast_dropout=False,
            dropout_rate=self.attention_dropout_rate, deterministic=deterministic,
            attention_fn=named_attention)(x, mask=decoder_mask)
        x = nn.Dropout(rate=self.dropout_rate)(x, deterministic=deterministic)
        x = x + inputs
        z = nn.LayerNorm()(x)
        z = MlpBlock(self.mlp_dim, self.dropout_rate)(z, deterministic=deterministic)
        return x + z


def shift_right(x, axis=1):
    """Shift the input to the right by padding on axis 1 (lm1b)."""
    pad_widths = [(0, 0)] * len(x.shape)
    pad_widths[axis] = (1, 0)
    padded = jnp.pad(x, pad_widths, mode="constant", constant_values=x.dtype.type(0))
    return padded[:, :-1]


class TransformerLM(nn.Module):
    """examples/lm1b/models.py's TransformerLM (Decoder with shifted inputs,
    sinusoidal positions, pre-LN blocks, padding + causal mask)."""
    vocab_size: int
    emb_dim: int
    num_heads: int
    num_layers: int
    mlp_dim: int
    max_len: int
    dropout_rate: float = 0.0
    attention_dropout_rate: float = 0.0

    @nn.compact
    def __call__(self, inputs, train=False):
        decoder_mask = nn.combine_masks(nn.make_attention_mask(inputs > 0, inputs > 0, dtype=jnp.float32),
                                        nn.make_causal_mask(inputs, dtype=jnp.float32))
        y = shift_right(inputs)
        y = nn.Embed(self.vocab_size, self.emb_dim,
                     embedding_init=nn.initializers.normal(stddev=1.0))(y.astype("int32"))
        y = AddPositionEmbs(self.max_len)(y)
        y = nn.Dropout(rate=self.dropout_rate)(y, deterministic=not train)
        for lyr in range(self.num_layers):
            y = DecoderBlock(self.num_heads, self.mlp_dim, self.dropout_rate, self.attention_dropout_rate,
                             name=f"encoderdecoderblock_{lyr}")(y, decoder_mask=decoder_mask,
                                                                deterministic=not train)
        y = nn.LayerNorm(name="encoderdecoder_norm")(y)
        return nn.Dense(self.vocab_size, kernel_init=nn.initializers.xavier_uniform(),
                        bias_init=nn.initializers.normal(stddev=1e-6), name="logitdense")(y)


@model("linen_transformer_lm", "flax.linen (examples/lm1b)", names=("query", "key", "value", "mlp_hidden"))
def linen_transformer_lm():
    """examples/lm1b: TransformerLM with nn.MultiHeadDotProductAttention
    (dropout rates 0, as configured for evaluation-free small runs), and the
    weighted label-smoothed cross-entropy of train.py written with
    optax.smooth_labels + optax.softmax_cross_entropy."""
    net = TransformerLM(vocab_size=data.VOCAB, emb_dim=W, num_heads=2, num_layers=1, mlp_dim=2 * W,
                        max_len=data.SEQ)
    inputs = np.array([[3, 5, 7, 2], [4, 9, 1, 0]], np.int32)
    params = init(net, inputs)["params"]

    def loss_fn(params, inputs, label_smoothing=0.1):
        logits = net.apply({"params": params}, inputs, train=True)
        weights = jnp.where(inputs > 0, 1, 0).astype(jnp.float32)
        soft_targets = optax.smooth_labels(jax.nn.one_hot(inputs, data.VOCAB), label_smoothing)
        loss = optax.softmax_cross_entropy(logits, soft_targets) * weights
        return loss.sum() / weights.sum()
    return Case(loss_fn, (params, inputs))


# --- scan over layers: nn.scan(nn.remat(Block)) --------------------------------

class ScannedBlock(nn.Module):
    mlp_dim: int

    @nn.compact
    def __call__(self, x, _):
        h = nn.LayerNorm()(x)
        h = nn.Dense(self.mlp_dim)(h)
        h = checkpoint_name(nn.gelu(h), "mlp_hidden")
        h = nn.Dense(x.shape[-1])(h)
        return x + h, None


class ScannedStack(nn.Module):
    num_layers: int
    mlp_dim: int

    @nn.compact
    def __call__(self, x):
        Stack = nn.scan(nn.remat(ScannedBlock, prevent_cse=False),
                        variable_axes={"params": 0}, split_rngs={"params": True},
                        length=self.num_layers)
        x, _ = Stack(self.mlp_dim, name="layers")(x, None)
        return nn.Dense(1)(x)


@model("linen_scan_remat", "flax.linen (nn.scan + nn.remat)", names=("mlp_hidden",))
def linen_scan_remat():
    """flax's "scan over layers" idiom: a layer stack as nn.scan over
    nn.remat(Block, prevent_cse=False) with stacked params; optax.l2_loss."""
    net = ScannedStack(num_layers=3, mlp_dim=2 * W)
    x, y = data.normal(data.BATCH, W), data.normal(data.BATCH, 1, seed=5)
    params = init(net, x)["params"]

    def loss(params, batch):
        x, y = batch
        return optax.l2_loss(net.apply({"params": params}, x), y).mean()
    return Case(loss, (params, (x, y)))


# --- mixture of experts: top-k routing ---------------------------------------------

class MoEMLP(nn.Module):
    """A Switch/GShard-style MoE feed-forward layer: a router, top-k expert
    choice (jax.lax.top_k), the experts as one stacked kernel (einsum with an
    expert batch dimension), and the load-balancing loss sown as an
    intermediate."""
    num_experts: int
    top_k: int
    mlp_dim: int

    @nn.compact
    def __call__(self, x):
        B, T, D = x.shape
        E = self.num_experts
        tokens = x.reshape(-1, D)
        router_logits = nn.Dense(E, use_bias=False, name="router")(tokens)
        router_probs = jax.nn.softmax(router_logits, axis=-1)
        top_p, top_idx = jax.lax.top_k(router_probs, self.top_k)
        top_p = top_p / jnp.sum(top_p, axis=-1, keepdims=True)
        combine = jnp.sum(jax.nn.one_hot(top_idx, E) * top_p[..., None], axis=1)        # [N, E]
        wi = self.param("wi", nn.initializers.lecun_normal(), (E, D, self.mlp_dim))
        wo = self.param("wo", nn.initializers.lecun_normal(), (E, self.mlp_dim, D))
        h = checkpoint_name(nn.gelu(jnp.einsum("nd,edf->enf", tokens, wi)), "expert_hidden")
        y = jnp.einsum("enf,efd->end", h, wo)
        out = jnp.einsum("end,ne->nd", y, combine)
        density = jnp.mean(jax.nn.one_hot(top_idx[:, 0], E), axis=0)
        density_proxy = jnp.mean(router_probs, axis=0)
        self.sow("intermediates", "aux_loss", jnp.mean(density * density_proxy) * E**2)
        return out.reshape(B, T, D)


class MoELM(nn.Module):
    vocab: int
    dim: int

    @nn.compact
    def __call__(self, tokens):
        embed = nn.Embed(self.vocab, self.dim, name="embed")
        x = embed(tokens)
        x = x + MoEMLP(num_experts=4, top_k=2, mlp_dim=2 * self.dim, name="moe")(nn.LayerNorm()(x))
        return embed.attend(nn.LayerNorm()(x))


@model("linen_moe", "flax.linen", names=("expert_hidden",))
def linen_moe():
    """A token-level LM with a top-2-of-4 mixture-of-experts layer; the loss
    is integer-label cross-entropy plus 0.01 x the sown load-balancing loss
    (apply(..., mutable=['intermediates']))."""
    net = MoELM(data.VOCAB, W)
    seq = data.rng(8).randint(0, data.VOCAB, (data.BATCH, data.SEQ + 1)).astype(np.int32)
    params = init(net, seq[:, :-1])["params"]

    def loss(params, batch):
        logits, state = net.apply({"params": params}, batch["inputs"], mutable=["intermediates"])
        aux = sum(jax.tree.leaves(state["intermediates"]))
        xent = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"]).mean()
        return xent + 0.01 * aux
    return Case(loss, (params, {"inputs": seq[:, :-1], "targets": seq[:, 1:]}))


# --- cross-replica BatchNorm: nn.BatchNorm(axis_name=...) under jax.vmap ---------

class SyncBNClassifier(nn.Module):
    """A per-example classifier whose nn.BatchNorm averages its statistics
    across the batch with lax.pmean over `axis_name` (flax's cross-device
    BatchNorm), run under jax.vmap(..., axis_name=...) as flax's tests do."""
    axis_name: str | None = None

    @nn.compact
    def __call__(self, x):                          # x: (features,): one example
        x = nn.Dense(W)(x)
        x = nn.BatchNorm(use_running_average=False, axis_name=self.axis_name, momentum=0.9)(x)
        x = checkpoint_name(nn.relu(x), "bn_hidden")
        return nn.Dense(data.CLASSES)(x)


@model("linen_sync_batchnorm", "flax.linen (nn.BatchNorm axis_name, jax.vmap)", names=("bn_hidden",))
def linen_sync_batchnorm():
    """nn.BatchNorm(axis_name='batch') applied per example under
    jax.vmap(axis_name='batch'): the batch statistics are lax.pmean's
    (psum + div under vmap); mutable batch_stats (unbatched: out_axes None);
    integer-label cross-entropy."""
    x, y = data.normal(data.BATCH + 1, 6), data.labels(data.BATCH + 1)
    variables = init(SyncBNClassifier(), x[0])      # same structure, no axis to bind
    net = SyncBNClassifier(axis_name="batch")

    def loss(params, batch_stats, batch):
        def per_example(x):
            return net.apply({"params": params, "batch_stats": batch_stats}, x, mutable=["batch_stats"])
        logits, new_state = jax.vmap(per_example, axis_name="batch", out_axes=(0, None))(batch["x"])
        xent = optax.softmax_cross_entropy_with_integer_labels(logits, batch["y"]).mean()
        return xent, new_state
    return Case(loss, (variables["params"], variables["batch_stats"], {"x": x, "y": y}))


# --- examples/vae: reparameterisation with a typed key -------------------------

class VAEEncoder(nn.Module):
    """examples/vae/models.py's Encoder (widths scaled down)."""
    latents: int

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(2 * W, name="fc1")(x)
        x = checkpoint_name(nn.relu(x), "mlp_hidden")
        mean_x = nn.Dense(self.latents, name="fc2_mean")(x)
        logvar_x = nn.Dense(self.latents, name="fc2_logvar")(x)
        return mean_x, logvar_x


class VAEDecoder(nn.Module):
    features: int

    @nn.compact
    def __call__(self, z):
        z = nn.Dense(2 * W, name="fc1")(z)
        z = checkpoint_name(nn.relu(z), "mlp_hidden")
        return nn.Dense(self.features, name="fc2")(z)


class VAE(nn.Module):
    """examples/vae/models.py's VAE (setup-style submodules)."""
    latents: int
    features: int

    def setup(self):
        self.encoder = VAEEncoder(self.latents)
        self.decoder = VAEDecoder(self.features)

    def __call__(self, x, z_rng):
        mean, logvar = self.encoder(x)
        z = reparameterize(z_rng, mean, logvar)
        recon_x = self.decoder(z)
        return recon_x, mean, logvar


def reparameterize(rng, mean, logvar):
    std = jnp.exp(0.5 * logvar)
    eps = jax.random.normal(rng, logvar.shape)
    return mean + eps * std


@jax.vmap
def vae_kl_divergence(mean, logvar):
    return -0.5 * jnp.sum(1 + logvar - jnp.square(mean) - jnp.exp(logvar))


@jax.vmap
def binary_cross_entropy_with_logits(logits, labels):
    logits = nn.log_sigmoid(logits)
    return -jnp.sum(labels * logits + (1.0 - labels) * jnp.log(-jnp.expm1(logits)))


@model("linen_vae", "flax.linen (examples/vae)", names=("mlp_hidden",))
def linen_vae():
    """examples/vae: the encoder's mean and log-variance, z = mean + eps *
    exp(logvar / 2) with eps = jax.random.normal(z_rng) (z_rng a typed
    jax.random.key), the decoder; train.py's loss_fn: the jax.vmap'd
    binary cross-entropy (log_sigmoid, expm1) plus the jax.vmap'd KL."""
    net = VAE(latents=3, features=12)
    images = (data.rng(3).rand(data.BATCH, 12) > 0.5).astype(np.float32)
    params = init(net, images, jax.random.key(0))["params"]

    def loss_fn(params, batch, z_rng):
        recon_x, mean, logvar = net.apply({"params": params}, batch, z_rng)
        bce_loss = binary_cross_entropy_with_logits(recon_x, batch).mean()
        kld_loss = vae_kl_divergence(mean, logvar).mean()
        return bce_loss + kld_loss
    return Case(loss_fn, (params, images, jax.random.key(3)))


# --- examples/seq2seq: nn.RNN encoder/decoder, categorical sampling ------------

class DecoderLSTMCell(nn.RNNCellBase):
    """examples/seq2seq/models.py's DecoderLSTMCell (its LSTM state named)."""
    features: int
    teacher_force: bool
    vocab_size: int

    @nn.compact
    def __call__(self, carry, x):
        lstm_state, last_prediction = carry
        if not self.teacher_force:
            x = last_prediction
        lstm_state, y = nn.LSTMCell(self.features)(lstm_state, x)
        y = checkpoint_name(y, "lstm_out")
        logits = nn.Dense(features=self.vocab_size)(y)
        categorical_rng = self.make_rng("lstm")
        predicted_token = jax.random.categorical(categorical_rng, logits)
        prediction = jax.nn.one_hot(predicted_token, self.vocab_size, dtype=jnp.float32)
        return (lstm_state, prediction), (logits, prediction)

    @property
    def num_feature_axes(self) -> int:
        return 1


class Seq2seq(nn.Module):
    """examples/seq2seq/models.py's Seq2seq: nn.RNN(LSTMCell, return_carry)
    encoder with seq_lengths, nn.RNN(DecoderLSTMCell) decoder."""
    teacher_force: bool
    hidden_size: int
    vocab_size: int
    eos_id: int = 1

    @nn.compact
    def __call__(self, encoder_inputs, decoder_inputs):
        encoder = nn.RNN(nn.LSTMCell(self.hidden_size), return_carry=True, name="encoder")
        decoder = nn.RNN(DecoderLSTMCell(decoder_inputs.shape[-1], self.teacher_force, self.vocab_size),
                         split_rngs={"params": False, "lstm": True}, name="decoder")
        seq_lengths = self.get_seq_lengths(encoder_inputs)
        encoder_state, _ = encoder(encoder_inputs, seq_lengths=seq_lengths)
        logits, predictions = decoder(decoder_inputs[:, :-1],
                                      initial_carry=(encoder_state, decoder_inputs[:, 0]))
        return logits, predictions

    def get_seq_lengths(self, inputs):
        inputs = jnp.argmax(inputs, axis=-1)
        return jnp.argmax(inputs == self.eos_id, axis=-1)


def get_sequence_lengths(sequence_batch, eos_id):
    """examples/seq2seq/train.py: the length of each sequence, up to its EOS."""
    eos_row = sequence_batch[:, :, eos_id]
    eos_idx = jnp.argmax(eos_row, axis=-1)
    return jnp.where(eos_row[jnp.arange(eos_row.shape[0]), eos_idx], eos_idx + 1,
                     sequence_batch.shape[1])


def mask_sequences(sequence_batch, lengths):
    return sequence_batch * (lengths[:, np.newaxis] > np.arange(sequence_batch.shape[1])[np.newaxis])


@model("linen_seq2seq", "flax.linen (examples/seq2seq)", names=("lstm_out",), slow=True)
def linen_seq2seq():
    """examples/seq2seq: one-hot query and answer, train.py's loss_fn with
    the lstm rng jax.random.fold_in(lstm_rng, step) (a raw uint32 key and an
    int step), teacher_force=False (the decoder feeds back its
    jax.random.categorical samples), the masked cross-entropy
    (nn.log_softmax, lengths up to EOS); returns (loss, logits)."""
    vocab, eos_id = 6, 1
    net = Seq2seq(teacher_force=False, hidden_size=W, vocab_size=vocab, eos_id=eos_id)
    query = jax.nn.one_hot(np.array([[2, 3, 1, 0], [4, 1, 0, 0]]), vocab)
    answer = jax.nn.one_hot(np.array([[5, 2, 1, 0], [5, 3, 4, 1]]), vocab)
    batch = {"query": np.asarray(query), "answer": np.asarray(answer)}
    params = data.draw_params(jax.eval_shape(
        lambda: net.init({"params": jax.random.key(0), "lstm": jax.random.key(1)},
                         batch["query"], batch["answer"])["params"]))

    def loss_fn(params, batch, lstm_rng, step):
        labels = batch["answer"][:, 1:]
        lstm_key = jax.random.fold_in(lstm_rng, step)
        logits, _ = net.apply({"params": params}, batch["query"], batch["answer"], rngs={"lstm": lstm_key})
        xe = jnp.sum(nn.log_softmax(logits) * labels, axis=-1)
        loss = -jnp.mean(mask_sequences(xe, get_sequence_lengths(labels, eos_id)))
        return loss, logits
    return Case(loss_fn, (params, batch, data.prng_key(5), np.int32(7)))


# --- examples/sst2: word dropout, bidirectional LSTM, masked attention ----------

def sequence_mask(lengths, max_length):
    return jnp.arange(max_length)[None] < lengths[:, None]


@jax.vmap
def flip_sequences(inputs, lengths):
    """examples/sst2/models.py: flip each sequence's first `length` steps."""
    max_length = inputs.shape[0]
    return jnp.flip(jnp.roll(inputs, max_length - lengths, axis=0), axis=0)


class WordDropout(nn.Module):
    dropout_rate: float
    unk_idx: int

    @nn.compact
    def __call__(self, inputs, deterministic: bool):
        if deterministic or self.dropout_rate == 0.0:
            return inputs
        rng = self.make_rng("dropout")
        mask = jax.random.bernoulli(rng, p=self.dropout_rate, shape=inputs.shape)
        return jnp.where(mask, jnp.array([self.unk_idx]), inputs)


class SimpleLSTM(nn.Module):
    """examples/sst2's SimpleLSTM: nn.transforms.scan over
    nn.OptimizedLSTMCell, params broadcast."""
    hidden_size: int

    @functools.partial(nn.transforms.scan, variable_broadcast="params", in_axes=1, out_axes=1,
                       split_rngs={"params": False})
    @nn.compact
    def __call__(self, carry, x):
        carry, y = nn.OptimizedLSTMCell(self.hidden_size)(carry, x)
        return carry, checkpoint_name(y, "lstm_out")

    def initialize_carry(self, input_shape):
        return nn.OptimizedLSTMCell(self.hidden_size, parent=None).initialize_carry(
            jax.random.key(0), input_shape)


class TextClassifier(nn.Module):
    """examples/sst2's TextClassifier, condensed: Embedder (word dropout,
    embedding lookup, dropout), SimpleBiLSTM (flip_sequences), the
    KeysOnlyMlpAttention (jnp.where(mask, scores, -inf), softmax) and a
    tanh MLP to one logit."""
    vocab_size: int
    hidden_size: int

    @nn.compact
    def __call__(self, token_ids, lengths, deterministic: bool):
        token_ids = WordDropout(0.2, unk_idx=1)(token_ids, deterministic)
        embedding = self.param("embedding", nn.initializers.normal(0.1), (self.vocab_size, self.hidden_size))
        x = nn.Dropout(0.1)(embedding[token_ids], deterministic=deterministic)
        fwd, bwd = SimpleLSTM(self.hidden_size), SimpleLSTM(self.hidden_size)
        _, forward_outputs = fwd(fwd.initialize_carry(x[:, 0].shape), x)
        reversed_inputs = flip_sequences(x, lengths)
        _, backward_outputs = bwd(bwd.initialize_carry(reversed_inputs[:, 0].shape), reversed_inputs)
        encoded = jnp.concatenate([forward_outputs, flip_sequences(backward_outputs, lengths)], -1)
        mask = sequence_mask(lengths, token_ids.shape[1])
        energy = nn.tanh(nn.Dense(self.hidden_size, name="keys", use_bias=False)(encoded))
        scores = nn.Dense(1, name="energy", use_bias=False)(energy).squeeze(-1)
        scores = jnp.where(mask, scores, -jnp.inf)
        attention = nn.softmax(scores, axis=-1)
        context = (jnp.expand_dims(attention, 1) @ encoded).squeeze(1)
        hidden = nn.tanh(nn.Dense(self.hidden_size)(context))
        return nn.Dense(1)(hidden)[..., 0]


@model("linen_sst2", "flax.linen (examples/sst2)", names=("lstm_out",), slow=True)
def linen_sst2():
    """examples/sst2: token ids and lengths, word dropout (jax.random.bernoulli
    + jnp.where on int ids), a bidirectional nn.transforms.scan LSTM with
    jnp.roll-based flips, masked attention pooling, and train.py's
    optax.sigmoid_binary_cross_entropy; rngs={'dropout': key}."""
    net = TextClassifier(vocab_size=data.VOCAB, hidden_size=W)
    token_ids = np.array([[3, 5, 7, 2], [4, 9, 0, 0]], np.int32)
    lengths = np.array([4, 2], np.int32)
    labels = np.array([1.0, 0.0], np.float32)
    params = data.draw_params(jax.eval_shape(
        lambda: net.init(jax.random.key(0), token_ids, lengths, deterministic=True)["params"]))

    def loss_fn(params, batch, rng):
        logits = net.apply({"params": params}, batch["token_ids"], batch["length"], deterministic=False,
                           rngs={"dropout": rng})
        return jnp.mean(optax.sigmoid_binary_cross_entropy(logits=logits, labels=batch["label"]))
    return Case(loss_fn, (params, {"token_ids": token_ids, "length": lengths, "label": labels},
                          jax.random.key(11)))
