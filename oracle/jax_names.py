"""The correspondence between spec primitives and JAX's, gathered from the
primitives' JaxFacts (spec.core.jax_facts, declared in each primitive's
block): JAX's primitive name, the JAX params the spec does not model
together with the only value it accepts for them (anything else is
`Unsupported`), and how to call it through `jax.lax` (for spec -> JAX).
"""
from __future__ import annotations

import functools

import numpy as np

import spec  # noqa: F401  (registers every primitive, with its JaxFacts)
from spec.core import jax_facts
from oracle.errors import Unsupported
from oracle.jax_api.source import emitter_table_source

# spec name -> JAX name where they differ
JAX_NAME = {p.name: f.name for p, f in jax_facts.items() if f.name != p.name}
SPEC_NAME = {v: k for k, v in JAX_NAME.items()}

# JAX params the spec leaves out, with the value they must have
IGNORED_PARAMS = {
    "sharding": None, "out_sharding": None, "out_dtype": None,
    "_split_transpose": False,   # scan (until 0.10): set only by a JAX developer flag
}


# spec primitive name -> fn(*jax_values, **spec_params) calling jax: every
# primitive's emitter (spec.core.JaxFacts, declared in its block), kept as
# source text so that reproducers embed exactly this table (they must run
# with jax and numpy alone).
EMITTERS_SOURCE = ("from jax import lax\nfrom jax._src import ad_util, debugging\nfrom jax._src.lax import lax as lax_internal\n"
                   "import jax\nimport jax.numpy as jnp\nfrom jax.ad_checkpoint import checkpoint_name\nE = {}\n"
                   + "".join(f"E[{p.name!r}] = {f.emitter}\n" for p, f in jax_facts.items() if f.emitter))


def ignored_params(spec_name: str) -> dict:
    """The JAX params the spec leaves out of `spec_name`, with their one accepted value."""
    facts = jax_facts.get(spec.core.primitives.get(spec_name))
    return {**IGNORED_PARAMS, **dict(facts.ignored if facts else ())}


@functools.lru_cache(maxsize=1)
def emitters():
    """spec primitive name -> fn(*jax_values, **spec_params) calling jax.lax
    (one table per process: the prelude probes the release once)."""
    env = {"np": np, "_Unsupported": Unsupported}    # what a call this release lacks raises
    exec(emitter_table_source(EMITTERS_SOURCE), env)
    return env["E"]


def as_dtype(d):
    return None if d is None else np.dtype(d)
