"""Drawn spellings (oracle.spellings): per program, how it is written for
JAX — checkpoint call, decorator or jax.remat; a policy that saves nothing
as given, omitted, None or nothing_saveable; prevent_cse=True written or
left to JAX's default; static_argnums; jax.numpy calls; an outer jax.jit.
Each field is one Hypothesis choice that shrinks to the canonical
spelling (oracle.spellings.CANONICAL)."""
from __future__ import annotations

from hypothesis import strategies as st

from oracle.spellings import CHECKPOINT_FORMS, SAVE_NOTHING, Spelling


@st.composite
def spellings(draw):
    return Spelling(checkpoint=draw(st.sampled_from(CHECKPOINT_FORMS)),
                    save_nothing=draw(st.sampled_from(SAVE_NOTHING)),
                    default_prevent_cse=not draw(st.booleans()),
                    static_argnums=draw(st.booleans()),
                    jnp=draw(st.booleans()),
                    jit=draw(st.booleans()))
