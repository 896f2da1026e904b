"""The model registry: every model module registers its training loss here.

A model is a zero-argument `build()` returning a `Case`: the training loss
as the user writes it, `loss(params, batch[, rng])`, and the concrete
arguments the user would pass (parameters from the library's own `init`,
a small batch). `names` are the `jax.ad_checkpoint.checkpoint_name`s placed
in the model code, the way users place them; the names policy saves only
those.

Shapes are SMALL (batch 2, width 8, sequence 4, vocabulary 11) so that a
whole `oracle.check` (two implementations, every property) takes about a
second.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import jax


@dataclass(frozen=True)
class Case:
    """How the user calls the check: oracle.check(loss, policy, *args, **kwargs)."""
    loss: Callable
    args: tuple
    kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Model:
    name: str
    library: str
    names: tuple[str, ...]          # checkpoint_name()s in the model code
    make: Callable[[], Case]
    doc: str = ""
    slow: bool = False              # every policy's check is `slow` (minutes of compilation)

    def build(self) -> Case:
        return _built(self.name)


MODELS: dict[str, Model] = {}


def model(name: str, library: str, names: tuple[str, ...], slow: bool = False):
    """Register `make() -> Case` as the model `name` (`slow`: its checks
    take over ~30 s each, so even its default-policy check is `slow`)."""
    def register(make):
        if name in MODELS:
            raise ValueError(f"model {name!r} registered twice")
        if not names:
            raise ValueError(f"model {name!r} places no checkpoint_name")
        MODELS[name] = Model(name, library, tuple(names), make, (make.__doc__ or "").strip(), slow)
        return make
    return register


@functools.cache
def _built(name: str) -> Case:
    return MODELS[name].make()


def policy(policy_name: str, m: Model) -> Any:
    """The JAX policy called `policy_name` for model `m` (the names policy
    saves exactly the model's checkpoint_names)."""
    cp = jax.checkpoint_policies
    if policy_name == "names":
        return cp.save_only_these_names(*m.names)
    return POLICIES[policy_name]


POLICIES = {
    "none": None,
    "dots_saveable": jax.checkpoint_policies.dots_saveable,
    "dots_with_no_batch_dims_saveable": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "everything_saveable": jax.checkpoint_policies.everything_saveable,
    "names": "save_only_these_names(<the model's checkpoint_names>)",
}


def require(available: bool, what: str) -> None:
    """A model's build() states a library API it needs (`what`, with the
    release that brought it). On jax 0.10.2's pinned libraries every API is
    there (a missing one fails); on an older release's libraries (the
    Makefile's `test-models`) the model is skipped, saying what it needs."""
    if available:
        return
    import pytest

    from oracle.jax_api.versions import Releases, holds
    if holds(Releases("0.10.2")):
        raise AssertionError(f"the model library lacks {what}")
    pytest.skip(f"the installed model library lacks {what}")


MODULES = ("models_jax", "models_linen", "models_nnx", "models_equinox", "models_haiku", "models_optax")

# module -> why it did not load: on an older JAX release the libraries are
# their releases of that time (the Makefile's `test-models`), and a module
# written for an API they lack yet (flax.nnx before flax 0.8.3) is left out
UNAVAILABLE: dict[str, str] = {}


def load_all() -> dict[str, Model]:
    """Import every model module (each registers its models) and return
    MODELS. On jax 0.10.2, whose library releases the models are written
    for, every module must load; on an older release one importing an API
    its library lacks is listed in UNAVAILABLE instead."""
    import importlib

    from oracle.jax_api.versions import Releases, holds
    for module in MODULES:
        before = set(MODELS)
        try:
            importlib.import_module(f"{__package__}.{module}")
        except ImportError as e:
            if holds(Releases("0.10.2")):
                raise
            UNAVAILABLE[module] = f"{type(e).__name__}: {e}"
            for name in set(MODELS) - before:    # registered before the import failed
                del MODELS[name]
    return MODELS
