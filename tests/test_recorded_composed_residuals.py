"""The spec's saved residuals of *transformed* checkpointed programs agree
with JAX's: vmap of a checkpointed function, grad of one (the residuals of
differentiating the gradient) and vmap of grad.

For every program of tests/jax_composed_programs.py, `spec.saved_residuals`
of the spec's transformed program (built with spec.vmap / spec.grad) must
equal JAX's recorded list (tests/recordings/residuals_composed.json, written
by tests/record_jax_composed_residuals.py) entry by entry and IN JAX'S
ORDER. No program is order-normalised.

Before comparing residuals, each spec program is checked to be the same
program as JAX's transformed function (`make_jaxpr` equations, checkpoint
and jit bodies nested), with one documented normalisation of JAX's side:

* dead code: `make_jaxpr(jax.grad(f))` keeps the equations that computed
  f's value (grad drops it); `spec.grad` removes them, so the spec is
  compared with JAX's jaxpr after `pe.dce_jaxpr` ("jaxprs_dce"). For the
  vmap programs nothing is dead (checked below).
* nothing else: the reduce_precision equations JAX's remat partial
  evaluation adds (ad_checkpoint._insert_reduce_precision) are the spec's
  too (spec/remat.py `_round_residuals`), equation for equation.

No jax import here except in `test_composed_recording_is_fresh_jax`, which
re-runs the recorder in-process (skipped when jax is not installed).
"""
from __future__ import annotations

import json
import os

import pytest
from conftest import skip_unless_recorded_release

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

import spec  # noqa: E402

from jax_composed_programs import BY_NAME, PROGRAMS  # noqa: E402
from recording_format import spec_signature  # noqa: E402

RECORDING = os.path.join(HERE, "recordings", "residuals_composed.json")

with open(RECORDING) as _f:
    REC = json.load(_f)

NAMES = [p.name for p in PROGRAMS]


def jax_signature(name: str) -> list[str]:
    """JAX's equations, dead code removed."""
    return list(REC["jaxprs_dce"][name])


def spec_residuals(p) -> list[list[str]]:
    res = spec.saved_residuals(p.trace_spec())
    return [[str(r.type), str(r.source)] for r in res]


# --------------------------------------------------------------------------

def test_recording_covers_every_program():
    assert REC["jax_version"] == "0.10.2"
    recorded = set(REC["residuals"]) | set(REC["errors"])
    assert recorded == set(NAMES), "re-run python tests/record_jax_composed_residuals.py"
    assert set(REC["jaxprs"]) == set(REC["jaxprs_dce"]) == set(NAMES)
    assert len(NAMES) >= 10
    assert sum(not p.is_grad for p in PROGRAMS) >= 8          # vmap only
    assert sum(p.is_grad for p in PROGRAMS) >= 8              # grad, vmap of grad


def test_no_recorded_errors():
    assert REC["errors"] == {}


@pytest.mark.parametrize("name", [p.name for p in PROGRAMS if not p.is_grad])
def test_vmap_programs_have_no_dead_code(name):
    assert REC["jaxprs_dce"][name] == REC["jaxprs"][name]


@pytest.mark.parametrize("name", NAMES)
def test_reduce_precision_only_at_top_level(name):
    """The normalisation drops whole top-level lines only."""
    for line in REC["jaxprs_dce"][name]:
        if not line.startswith("reduce_precision "):
            assert "reduce_precision" not in line


@pytest.mark.parametrize("name", NAMES)
def test_same_program_as_jax(name):
    p = BY_NAME[name]
    assert spec_signature(p.trace_spec()) == jax_signature(name)


@pytest.mark.parametrize("name", NAMES)
def test_residuals_match_jax_in_order(name):
    if name in REC["errors"]:
        pytest.fail(f"JAX raised on {name}: {REC['errors'][name]}")
    assert spec_residuals(BY_NAME[name]) == REC["residuals"][name]


def test_vmap_gives_the_dot_batch_dims():
    """dots_with_no_batch_dims_saveable saves x @ W when only x is batched
    (the batch axis folds into the dot's free dims) and not when both are
    (the dot gets a batch dimension): in JAX and in the spec."""
    names = ("vmap_dots_no_batch_x_only", "vmap_dots_no_batch_both")
    for source in (REC["residuals"], {n: spec_residuals(BY_NAME[n]) for n in names}):
        assert ["f32[5,2,4]", "output of dot_general"] in source["vmap_dots_no_batch_x_only"]
        assert not any(s == "output of dot_general" for _, s in source["vmap_dots_no_batch_both"])


def test_composed_recording_is_fresh_jax():
    pytest.importorskip("jax")
    skip_unless_recorded_release(REC)
    import record_jax_composed_residuals as recorder
    fresh = recorder.record()
    assert fresh == REC, "the recording is stale: re-run python tests/record_jax_composed_residuals.py"
