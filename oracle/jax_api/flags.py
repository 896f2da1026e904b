"""The remat implementations a release has, selecting one, and the flags
that reports and reproducers carry."""
from __future__ import annotations

import contextlib

from oracle.errors import InvalidArgument
from oracle.jax_api.capabilities import capabilities

IMPLEMENTATIONS = ("remat2", "remat3")
# the JAX flags that change what remat does, reported where the release has them
_FLAGS = ("jax_remat3", "jax_use_direct_linearize", "jax_threefry_partitionable")


def implementations() -> tuple:
    """The implementations the installed release has: remat2 always, remat3
    where the jax_remat3 flag exists (jax 0.10)."""
    return IMPLEMENTATIONS if capabilities().remat3 else ("remat2",)


def unavailable(impl: str) -> str | None:
    """Why `impl` cannot be checked on the installed release, or None."""
    if impl == "remat3" and not capabilities().remat3:
        return f"jax {capabilities().version} has no remat3 (no jax_remat3 flag)"
    return None


def flags() -> dict:
    """The remat-relevant flags of the installed release, with their values."""
    import jax
    return {f: bool(getattr(jax.config, f)) for f in _FLAGS if hasattr(jax.config, f)}


def environment() -> dict:
    import jax
    import jaxlib
    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "backend": jax.default_backend(), **flags()}


def enable_x64(on: bool = True):
    """A context with jax_enable_x64 set to `on`: jax.enable_x64 where the
    release has it, else (0.4.25 to 0.6) jax.experimental.enable_x64 /
    disable_x64."""
    import jax
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(on)
    from jax import experimental
    return experimental.enable_x64() if on else experimental.disable_x64()


@contextlib.contextmanager
def implementation(name: str):
    """Select remat2 or remat3 for the duration (remat2 is the only one,
    and needs no switch, where jax_remat3 does not exist)."""
    import jax
    if name not in IMPLEMENTATIONS:
        raise InvalidArgument(f"unknown implementation {name!r}; supported: {IMPLEMENTATIONS}")
    if not capabilities().remat3:
        if name == "remat3":
            raise InvalidArgument(unavailable(name))
        yield
        return
    old = jax.config.jax_remat3
    # jax's tracing caches are not keyed on jax_remat3: clear them on a switch
    if old != (name == "remat3"):
        jax.clear_caches()
    jax.config.update("jax_remat3", name == "remat3")
    try:
        yield
    finally:
        if jax.config.jax_remat3 != old:
            jax.clear_caches()
        jax.config.update("jax_remat3", old)


def flag_settings_source(impl: str) -> str:
    """The jax.config lines a reproducer for `impl` starts with. remat2 is
    the only implementation before jax 0.10.2 (no jax_remat3 flag): its
    reproducer selects it only where the flag exists, so that it runs on
    every release."""
    if impl == "remat3":
        return "jax.config.update('jax_remat3', True)\n"
    return ("if hasattr(jax.config, 'jax_remat3'):   # remat2: the only implementation before jax 0.10.2\n"
            "    jax.config.update('jax_remat3', False)\n")
