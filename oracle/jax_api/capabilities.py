"""What the installed JAX release has, probed once: attributes looked up
(hasattr) and tiny programs traced, never version numbers compared."""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass


@dataclass(frozen=True)
class Capabilities:
    version: str                    # jax.__version__ (reported, never branched on)
    remat3: bool                    # the jax_remat3 flag exists (0.10.2: RematTraced hi-primitives)
    scan_params: frozenset          # the params lax.scan's equation has (`linear` before 0.10, ...)
    cond_params: frozenset          # the params lax.cond's equation has (`linear` in 0.4.25)
    optimize_remat: bool            # custom_vjp.defvjp takes optimize_remat= (not in 0.4.25)


def _eqn_params(fn, *args) -> frozenset:
    import jax
    jaxpr = jax.make_jaxpr(fn)(*args)
    return frozenset(jaxpr.jaxpr.eqns[-1].params)


@functools.lru_cache(maxsize=None)
def capabilities() -> Capabilities:
    """Everything else that differs is either read off the objects JAX hands
    over (internals.py) or probed by the reproducers' own prelude (source.py)."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    # an abstract argument: the probe may run first inside the user's trace
    # (a jnp.zeros there would leave a broadcast_in_dim equation in it)
    x = jax.ShapeDtypeStruct((2,), jnp.float32)
    return Capabilities(
        version=jax.__version__,
        remat3=hasattr(jax.config, "jax_remat3"),
        scan_params=_eqn_params(lambda a: lax.scan(lambda c, y: (c + y, c), a[0], a), x),
        cond_params=_eqn_params(lambda a: lax.cond(a[0] > 0, lambda b: b, lambda b: -b, a), x),
        optimize_remat="optimize_remat" in inspect.signature(jax.custom_vjp.defvjp).parameters,
    )
