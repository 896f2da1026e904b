"""What the installed JAX release has, probed once: attributes looked up
(hasattr) and tiny programs traced, never version numbers compared."""
from __future__ import annotations

import contextlib
import contextvars
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
    # a custom_jvp rule traced with every tangent present gets an integer
    # input's tangent typed as the input (0.4.x), not float0 (later)
    custom_jvp_int_tangents_typed: bool
    # jax.checkpoint takes prevent_cse per argument (a tuple of bools, a
    # pytree prefix: jax 0.7.2); before, a bool only (a tuple is no API there)
    per_argument_prevent_cse: bool


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
        custom_jvp_int_tangents_typed=_int_tangent_typed(),
        per_argument_prevent_cse=_per_argument_prevent_cse(),
    )


def _per_argument_prevent_cse() -> bool:
    """Does jax.checkpoint broadcast a prevent_cse tuple over the arguments'
    leaves (a pytree prefix, one flag per leaf on the equation)? From jax
    0.7.2; before, a tuple is passed on as it is (no API)."""
    import jax
    import numpy as np
    leaf = jax.ShapeDtypeStruct((), np.float32)
    # read off remat2's equation: a user's jax_remat3=True binds a
    # hi-primitive without the param (found re-running a remat3 reproducer);
    # jax.checkpoint picks its implementation when called
    remat3 = getattr(jax.config, "jax_remat3", False)
    try:
        if remat3:
            jax.config.update("jax_remat3", False)
        f = jax.checkpoint(lambda d: d["a"] * d["b"], prevent_cse=({"a": False, "b": True},))
        eqn = jax.make_jaxpr(f)({"a": leaf, "b": leaf}).jaxpr.eqns[0]
    except Exception:   # noqa: BLE001 -- a release that rejects the tuple: no per-argument flags
        return False
    finally:
        if remat3:
            jax.config.update("jax_remat3", True)
    return tuple(eqn.params.get("prevent_cse", ())) == (False, True)


def _int_tangent_typed() -> bool:
    """The jaxpr of a custom_jvp rule (its jvp thunk asked with no zero
    tangents) of a function of an int32 input: is that input's tangent an
    int32 input of it?"""
    import jax
    import numpy as np
    from oracle.jax_api import internals

    @jax.custom_jvp
    def f(x, n):
        return x
    f.defjvp(lambda primals, tangents: (primals[0], tangents[0]))
    eqn = jax.make_jaxpr(f)(jax.ShapeDtypeStruct((), np.float32), jax.ShapeDtypeStruct((), np.int32)).jaxpr.eqns[0]
    _, params = internals.canonical_eqn(eqn.primitive.name, dict(eqn.params))
    jaxpr, _, _ = internals.call(params["jvp_jaxpr_fun"], False, False)
    return str(jaxpr.invars[-1].aval.dtype) == "int32"


# XLA:CPU options that make the oracle's small check functions compile
# faster, with the same HLO (which the structural properties read):
#   xla_backend_optimization_level=0: LLVM's -O0 on the emitted kernels
#     (scheduling and vectorisation only, the same HLO); halves compile time.
#   xla_cpu_use_fusion_emitters=False: fusions emitted by the elemental IR
#     emitter XLA:CPU used before its MLIR fusion emitters (the same
#     per-element code, built without the MLIR pipeline); measured on the
#     fuzzer's programs (jax 0.10.2, 2 cores), 47 ms -> 22 ms per compile.
# Options an older jaxlib does not know are left out (it refuses them).
# The code they emit is not bit-exact with XLA's default: an elementwise
# function fused into two kernels (erfc, in a reduce_max and in the
# comparison its JVP makes against the maximum) may round differently in
# each, and a tie mask then matches nothing (0/0: NaN; a pristine nightly
# finding, cf0ec56a2c). So a disagreement seen under them is checked again
# under XLA's defaults before it is reported (`default_compilation`,
# oracle/checker.py).
_FAST_CPU_COMPILE = ({"xla_backend_optimization_level": 0}, {"xla_cpu_use_fusion_emitters": False})


@functools.lru_cache(maxsize=None)
def cpu_compiler_options() -> dict:
    """The subset of _FAST_CPU_COMPILE the installed XLA:CPU accepts, probed
    by compiling a one-equation function with each."""
    import jax
    import numpy as np
    lowered = jax.jit(lambda a: a * 2).lower(jax.ShapeDtypeStruct((2,), np.float32))
    accepted = {}
    for option in _FAST_CPU_COMPILE:
        try:
            lowered.compile(compiler_options=option)
        except Exception:   # noqa: BLE001 -- jaxlib's INVALID_ARGUMENT "No such compile option"
            continue
        accepted.update(option)
    return accepted


_DEFAULT_COMPILATION = contextvars.ContextVar("default_compilation", default=False)


@contextlib.contextmanager
def default_compilation():
    """Within it, `compiler_options` gives XLA's defaults (no options)."""
    token = _DEFAULT_COMPILATION.set(True)
    try:
        yield
    finally:
        _DEFAULT_COMPILATION.reset(token)


def compiler_options(platform: str = "cpu") -> dict:
    """The options the oracle compiles its check functions with on
    `platform`: the fast XLA:CPU ones (`cpu_compiler_options`), except on
    another platform or within `default_compilation`."""
    return {} if platform != "cpu" or _DEFAULT_COMPILATION.get() else cpu_compiler_options()
