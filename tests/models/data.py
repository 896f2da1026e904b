"""Small batches, drawn from a fixed seed (the way a user feeds a check a
batch of real data)."""
from __future__ import annotations

import numpy as np

BATCH = 2
WIDTH = 8
SEQ = 4
VOCAB = 11
CLASSES = 5


def rng(seed: int = 0) -> np.random.RandomState:
    return np.random.RandomState(seed)


def normal(*shape, seed=0) -> np.ndarray:
    return rng(seed).randn(*shape).astype(np.float32)


def labels(n, classes=CLASSES, *, shape=None, seed=1) -> np.ndarray:
    return rng(seed).randint(0, classes, shape or (n,)).astype(np.int32)


def one_hot(y, classes=CLASSES) -> np.ndarray:
    return np.eye(classes, dtype=np.float32)[y]


def as_numpy(tree):
    """Parameters from a library's init, as host arrays (what the check is given)."""
    import jax
    return jax.tree.map(np.asarray, tree)


def prng_key(seed: int = 0) -> np.ndarray:
    """A raw PRNG key, jax.random.PRNGKey(seed) (uint32[2]), as flax.linen's
    docs pass it to `apply(..., rngs={'dropout': key})`."""
    import jax
    return np.asarray(jax.random.PRNGKey(seed))


def draw_params(shapes, seed: int = 0):
    """Parameter values for a pytree of jax.ShapeDtypeStruct (what the
    library's `init` returns, as traced by `jax.eval_shape`: no compilation),
    drawn at the scales trained parameters have: kernels and embeddings
    normal / sqrt(fan_in), biases and means small, scales and variances
    near 1 (positive)."""
    import jax
    r = rng(seed)

    def draw(path, s):
        name = jax.tree_util.keystr(tuple(path)).lower()
        shape = tuple(s.shape)
        if not np.issubdtype(np.dtype(s.dtype), np.floating):     # step counters
            return np.ones(shape, s.dtype)
        n = np.asarray(r.randn(*shape))
        if "scale" in name or "var" in name:
            v = 1.0 + 0.1 * n
        elif "bias" in name or "mean" in name or len(shape) <= 1:
            v = 0.1 * n
        else:
            v = n / np.sqrt(max(1, int(np.prod(shape[:-1]))))
        return v.astype(s.dtype)
    return jax.tree_util.tree_map_with_path(draw, shapes)
