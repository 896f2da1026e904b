"""The correspondence between spec primitives and JAX's, in one table.

For each spec primitive: JAX's primitive name, the JAX params the spec does
not model together with the only value it accepts for them (anything else
is `Unsupported`), and how to call it through `jax.lax` (for spec -> JAX).
"""
from __future__ import annotations

import numpy as np

import spec  # noqa: F401  (registers every primitive, with its JaxFacts)
from spec.core import jax_facts

# spec name -> JAX name where they differ
JAX_NAME = {"call": "jit", "remat": "remat2",
            **{p.name: f.name for p, f in jax_facts.items() if f.name != p.name}}
SPEC_NAME = {v: k for k, v in JAX_NAME.items()}

# JAX params the spec leaves out, with the value they must have
IGNORED_PARAMS = {
    "sharding": None, "out_sharding": None, "out_dtype": None,
}


# spec primitive name -> fn(*jax_values, **spec_params) calling jax.lax.
# Kept as source text so that reproducers can embed exactly this table
# (they must run with jax and numpy alone).
EMITTERS_SOURCE = '''from jax import lax
from jax._src import ad_util
from jax._src.lax import lax as lax_internal
E = {
    **{n: (lambda fn: lambda x, accuracy=None: fn(x, accuracy=accuracy))(getattr(lax, n))
       for n in ("sin", "cos", "tanh", "exp", "log", "log1p", "logistic", "sqrt", "rsqrt")},
    "neg": lax.neg, "square": lax.square, "abs": lax.abs,
    "integer_pow": lambda x, y: lax.integer_pow(x, y),
    **{n: getattr(lax, n) for n in ("add", "sub", "mul", "div", "max", "min", "gt", "lt", "ge", "le", "eq", "ne")},
    "add_any": ad_util.add_jaxvals,
    "select_n": lambda which, *cases: lax.select_n(which, *cases),
    "stop_gradient": lax.stop_gradient,
    # bound directly: lax.convert_element_type drops a same-dtype conversion
    "convert_element_type": lambda x, new_dtype, weak_type: lax_internal.convert_element_type_p.bind(
        x, new_dtype=np.dtype(new_dtype), weak_type=weak_type, sharding=None),
    "dot_general": lambda x, y, dimension_numbers, precision, preferred_element_type: lax.dot_general(
        x, y, dimension_numbers, precision=precision, preferred_element_type=preferred_element_type),
    "reduce_sum": lambda x, axes: lax_internal.reduce_sum(x, axes),
    "reduce_max": lambda x, axes: lax_internal.reduce_max(x, axes),
    "broadcast_in_dim": lambda x, shape, broadcast_dimensions: lax.broadcast_in_dim(x, shape, broadcast_dimensions),
    "reshape": lambda x, new_sizes, dimensions: lax.reshape(x, new_sizes),
    "transpose": lambda x, permutation: lax.transpose(x, permutation),
    "squeeze": lambda x, dimensions: lax.squeeze(x, dimensions),
    "concatenate": lambda *xs, dimension: lax.concatenate(list(xs), dimension),
    "slice": lambda x, start_indices, limit_indices, strides: lax.slice(x, start_indices, limit_indices, strides),
    "pad": lambda x, v, padding_config: lax.pad(x, v, padding_config),
}
'''


# primitives declared with JaxFacts bring their emitters along (spec.core.JaxFacts)
EMITTERS_SOURCE += "import jax\nimport jax.numpy as jnp\n" + "".join(
    f"E[{p.name!r}] = {f.emitter}\n" for p, f in jax_facts.items())


def ignored_params(spec_name: str) -> dict:
    """The JAX params the spec leaves out of `spec_name`, with their one accepted value."""
    facts = jax_facts.get(spec.core.primitives.get(spec_name))
    return {**IGNORED_PARAMS, **dict(facts.ignored if facts else ())}


def emitters():
    """spec primitive name -> fn(*jax_values, **spec_params) calling jax.lax."""
    env = {"np": np}
    exec(EMITTERS_SOURCE, env)
    return env["E"]


def as_dtype(d):
    return None if d is None else np.dtype(d)
