"""The correspondence between spec primitives and JAX's, in one table.

For each spec primitive: JAX's primitive name, the JAX params the spec does
not model together with the only value it accepts for them (anything else
is `Unsupported`), and how to call it through `jax.lax` (for spec -> JAX).
"""
from __future__ import annotations

import numpy as np

# spec name -> JAX name where they differ
JAX_NAME = {"call": "jit", "remat": "remat2"}
SPEC_NAME = {v: k for k, v in JAX_NAME.items()}

# JAX params the spec leaves out, with the value they must have
IGNORED_PARAMS = {
    "sharding": None, "out_sharding": None, "out_dtype": None,
}


def emitters():
    """spec primitive name -> fn(*jax_values, **spec_params) calling jax.lax."""
    from jax import lax
    from jax._src import ad_util
    from jax._src.lax import lax as lax_internal

    def unary(fn, with_accuracy=True):
        if with_accuracy:
            return lambda x, accuracy=None: fn(x, accuracy=accuracy)
        return lambda x: fn(x)

    table = {
        "neg": unary(lax.neg, False), "sin": unary(lax.sin), "cos": unary(lax.cos),
        "tanh": unary(lax.tanh), "exp": unary(lax.exp), "log": unary(lax.log),
        "log1p": unary(lax.log1p), "logistic": unary(lax.logistic), "sqrt": unary(lax.sqrt),
        "rsqrt": unary(lax.rsqrt), "square": unary(lax.square, False), "abs": unary(lax.abs, False),
        "integer_pow": lambda x, y: lax.integer_pow(x, y),
        "add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "max": lax.max, "min": lax.min,
        "add_any": ad_util.add_jaxvals,
        "gt": lax.gt, "lt": lax.lt, "ge": lax.ge, "le": lax.le, "eq": lax.eq, "ne": lax.ne,
        "select_n": lambda which, *cases: lax.select_n(which, *cases),
        # bound directly: lax.convert_element_type drops a same-dtype conversion
        "convert_element_type": lambda x, new_dtype, weak_type: lax_internal.convert_element_type_p.bind(
            x, new_dtype=np.dtype(new_dtype), weak_type=weak_type, sharding=None),
        "stop_gradient": lax.stop_gradient,
        "dot_general": lambda x, y, dimension_numbers, precision, preferred_element_type: lax.dot_general(
            x, y, dimension_numbers, precision=precision, preferred_element_type=preferred_element_type),
        "reduce_sum": lambda x, axes: lax_internal.reduce_sum(x, axes),
        "reduce_max": lambda x, axes: lax_internal.reduce_max(x, axes),
        "broadcast_in_dim": lambda x, shape, broadcast_dimensions: lax.broadcast_in_dim(
            x, shape, broadcast_dimensions),
        "reshape": lambda x, new_sizes, dimensions: lax.reshape(x, new_sizes),
        "transpose": lambda x, permutation: lax.transpose(x, permutation),
        "squeeze": lambda x, dimensions: lax.squeeze(x, dimensions),
        "concatenate": lambda *xs, dimension: lax.concatenate(list(xs), dimension),
        "slice": lambda x, start_indices, limit_indices, strides: lax.slice(
            x, start_indices, limit_indices, strides),
        "pad": lambda x, v, padding_config: lax.pad(x, v, padding_config),
    }
    return table


def as_dtype(d):
    return None if d is None else np.dtype(d)
