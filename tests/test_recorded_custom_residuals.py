"""The spec's saved residuals of programs with custom derivatives agree with JAX's.

For every program of tests/jax_custom_programs.py, the spec's
`saved_residuals` must equal JAX's recorded list (tests/recordings/
residuals_custom.json, written by tests/record_jax_custom_residuals.py)
entry by entry, in JAX's order; before that, the spec version is checked
to be the same program as JAX's (the recorded `make_jaxpr` equations, with
custom-call, checkpoint and jit bodies). No order normalisation and no
known divergences are needed.

No jax import here except in `test_custom_recording_is_fresh_jax`.
"""
from __future__ import annotations

import json
import os

import pytest
from conftest import skip_unless_recorded_release

HERE = os.path.dirname(os.path.abspath(__file__))

import spec  # noqa: E402

from jax_custom_programs import BY_NAME, PROGRAMS  # noqa: E402

RECORDING = os.path.join(HERE, "recordings", "residuals_custom.json")

with open(RECORDING) as _f:
    REC = json.load(_f)

from recording_format import spec_signature  # noqa: E402

NAMES = [p.name for p in PROGRAMS]


def spec_residuals(p) -> list[list[str]]:
    return [[str(r.type), str(r.source)] for r in spec.saved_residuals(p.trace_spec())]


def test_recording_covers_every_program():
    assert REC["jax_version"] == "0.10.2"
    assert set(REC["residuals"]) | set(REC["errors"]) == set(NAMES), \
        "re-run python tests/record_jax_custom_residuals.py"
    assert len(NAMES) >= 10
    assert REC["errors"] == {}


@pytest.mark.parametrize("name", NAMES)
def test_same_program_as_jax(name):
    assert spec_signature(BY_NAME[name].trace_spec()) == REC["jaxprs"][name]


@pytest.mark.parametrize("name", NAMES)
def test_residuals_match_jax_in_order(name):
    assert spec_residuals(BY_NAME[name]) == REC["residuals"][name]


def test_custom_vjp_residuals_follow_the_policy():
    """A custom_vjp's fwd residuals are ordinary values inside a checkpoint:
    nothing_saveable recomputes them, save_only_these_names saves the named
    one, everything_saveable saves them all (JAX and spec alike)."""
    rec = REC["residuals"]
    assert rec["custom_vjp_ckpt_none"] == [["f32[3]", "from the argument args[0]"]]
    assert rec["custom_vjp_named_ckpt_save_r"] == [["f32[3]", "from the argument args[0]"], ["f32[3]", "named 'r'"]]
    assert len(rec["custom_vjp_ckpt_everything"]) == 3


def test_custom_recording_is_fresh_jax():
    pytest.importorskip("jax")
    skip_unless_recorded_release(REC)
    import record_jax_custom_residuals as recorder
    assert recorder.record() == REC, "stale: re-run python tests/record_jax_custom_residuals.py"
