"""What the installed JAX release has, probed once: attributes looked up
(hasattr) and tiny programs traced, never version numbers compared."""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass


@dataclass(frozen=True)
class Capabilities:
    version: str                    # jax.__version__ (reported, never branched on)
    remat3: bool                    # the jax_remat3 flag exists (0.10: RematTraced hi-primitives)
    direct_linearize_flag: bool     # the jax_use_direct_linearize flag exists
    accuracy_ops: frozenset         # lax functions taking accuracy= (0.6: transcendental ops)
    private_reductions: frozenset   # lax_internal.reduce_* spelled _reduce_* (before 0.6)
    convert_sharding: bool          # convert_element_type_p takes a sharding param
    scan_params: frozenset          # the params lax.scan's equation has
    cond_params: frozenset          # the params lax.cond's equation has
    jit_name: str                   # "jit" (0.7+) or "pjit"
    custom_vjp_name: str            # "custom_vjp_call" (0.6+) or "custom_vjp_call_jaxpr"
    wrap_init_debug_info: bool      # lu.wrap_init takes debug_info= (0.5+)
    policy_dataclasses: bool        # built-in policies are dataclasses (DotsSaveable, ...; 0.8+)
    top_k_axis: bool                # lax.top_k takes axis= (0.7+; before: the last axis)


# the transcendental ops whose emitters pass accuracy= (spec JaxFacts)
_ACCURACY_CANDIDATES = ("sin", "cos", "tan", "tanh", "exp", "exp2", "expm1", "log", "log1p", "logistic",
                        "sqrt", "rsqrt", "cbrt")
_REDUCTIONS = ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or")


def _takes(fn, param: str) -> bool:
    try:
        return param in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _eqn_params(fn, *args) -> frozenset:
    import jax
    jaxpr = jax.make_jaxpr(fn)(*args)
    return frozenset(jaxpr.jaxpr.eqns[-1].params)


@functools.lru_cache(maxsize=None)
def capabilities() -> Capabilities:
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax._src import ad_checkpoint
    from jax._src import linear_util as lu
    from jax._src.lax import lax as lax_internal
    x = jnp.zeros(2, jnp.float32)
    jit_eqn = jax.make_jaxpr(lambda a: jax.jit(lambda b: b)(a))(x).jaxpr.eqns[0]
    convert = jax.make_jaxpr(lambda a: lax.convert_element_type(a, jnp.int32))(x).jaxpr.eqns[0]

    @jax.custom_vjp
    def ident(a):
        return a
    ident.defvjp(lambda a: (a, None), lambda _, g: (g,))
    vjp_eqn = jax.make_jaxpr(ident)(x).jaxpr.eqns[0]
    return Capabilities(
        version=jax.__version__,
        remat3=hasattr(jax.config, "jax_remat3"),
        direct_linearize_flag=hasattr(jax.config, "jax_use_direct_linearize"),
        accuracy_ops=frozenset(n for n in _ACCURACY_CANDIDATES if _takes(getattr(lax, n), "accuracy")),
        private_reductions=frozenset(n for n in _REDUCTIONS if not hasattr(lax_internal, n)
                                     and hasattr(lax_internal, "_" + n)),
        convert_sharding="sharding" in convert.params,
        scan_params=_eqn_params(lambda a: lax.scan(lambda c, y: (c + y, c), a[0], a), x),
        cond_params=_eqn_params(lambda a: lax.cond(a[0] > 0, lambda b: b, lambda b: -b, a), x),
        jit_name=jit_eqn.primitive.name,
        custom_vjp_name=vjp_eqn.primitive.name,
        wrap_init_debug_info=_takes(lu.wrap_init, "debug_info"),
        policy_dataclasses=hasattr(ad_checkpoint, "DotsSaveable"),
        top_k_axis=_takes(lax.top_k, "axis"),
    )
