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
JAX_NAME = {p.name: f.name for p, f in jax_facts.items() if f.name != p.name}
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
    # in this table until their blocks carry JaxFacts (an emitter there overrides these)
    "dot_general": lambda x, y, dimension_numbers, precision, preferred_element_type: lax.dot_general(
        x, y, dimension_numbers, precision=precision, preferred_element_type=preferred_element_type),
}
'''


# primitives declared with JaxFacts bring their emitters along (spec.core.JaxFacts)
EMITTERS_SOURCE += ("import jax\nimport jax.numpy as jnp\nfrom jax.ad_checkpoint import checkpoint_name\n"
                    + "".join(
    f"E[{p.name!r}] = {f.emitter}\n" for p, f in jax_facts.items() if f.emitter))


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
