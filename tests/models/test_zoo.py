"""The zoo itself: the blockers table is what is measured, every model
places the checkpoint_names its names policy saves, every model's loss runs
and is differentiable under plain JAX. Tracing only: fast, and independent
of what the spec supports."""
from __future__ import annotations

import functools

import numpy as np
import pytest

for _library in ("flax", "equinox", "haiku", "optax"):   # the models' libraries (pyproject's test extra)
    pytest.importorskip(_library, reason=f"the real-model suite needs {_library} (pip install -e '.[test]')")

from . import zoo
from .blockers import BLOCKERS, measure, trace

MODELS = zoo.load_all()


@functools.cache
def traced(name):
    return trace(MODELS[name].build())


def test_at_least_twelve_models():
    assert len(MODELS) >= 12, sorted(MODELS)


def test_blockers_table_names_only_models():
    assert set(BLOCKERS) <= set(MODELS), set(BLOCKERS) - set(MODELS)


@pytest.mark.parametrize("name", list(MODELS))
def test_blockers_are_measured(name):
    measured = measure(MODELS[name].build(), traced(name))
    assert measured == BLOCKERS.get(name, ()), (
        f"tests/models/blockers.py: {name!r} now stops at {measured!r}, the table says "
        f"{BLOCKERS.get(name, ())!r}: set BLOCKERS[{name!r}] = {measured!r}"
        + (" (or drop the entry)" if not measured else ""))


def _names_in(jaxpr):
    from oracle.from_jax import subjaxprs
    found = set()
    for e in jaxpr.eqns:
        if e.primitive.name == "name":
            found.add(e.params["name"])
        hi = e.params.get("_prim")
        if hi is not None and type(hi).__name__.startswith("CheckpointName"):
            found.add(hi.name)
        for sub in subjaxprs(e):
            found |= _names_in(sub)
    return found


@pytest.mark.parametrize("name", list(MODELS))
def test_names_are_placed(name):
    m = MODELS[name]
    placed = _names_in(traced(name).jaxpr)
    assert set(m.names) <= placed, (m.names, placed)


@pytest.mark.parametrize("name", list(MODELS))
def test_loss_is_a_float_scalar(name):
    """The loss (the first output where it returns (loss, aux)) is a float
    scalar: the model is wired up right, whatever the spec supports."""
    loss = traced(name).out_avals[0]
    assert loss.shape == () and np.issubdtype(loss.dtype, np.floating), traced(name).out_avals


def test_model_modules_left_out_on_this_release():
    """On an older release a module needing a library API of later years is
    left out (zoo.UNAVAILABLE); on jax 0.10.2 none is (load_all raises)."""
    if zoo.UNAVAILABLE:
        pytest.skip(f"left out on this release: {zoo.UNAVAILABLE}")
