"""The spec's saved residuals of programs with `scan` agree with JAX's.

For every program of tests/jax_scan_programs.py, the spec's
`saved_residuals` must equal JAX's recorded list (tests/recordings/
residuals_scan.json, written by tests/record_jax_scan_residuals.py) entry
by entry, in JAX's order; and the spec's version of each program must be
the same program as JAX's (the recorded `make_jaxpr` equations, with scan,
checkpoint and jit bodies). No jax import here except in the freshness
test, which re-runs the recorder (skipped without jax).
"""
from __future__ import annotations

import json
import os

import pytest
from conftest import skip_unless_recorded_release

import spec
from jax_scan_programs import BY_NAME, PROGRAMS
from recording_format import spec_signature

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "recordings", "residuals_scan.json")) as _f:
    REC = json.load(_f)

NAMES = [p.name for p in PROGRAMS]

# Programs where the spec is known to differ from JAX, kept failing (strict
# xfail) so that a fix shows: name -> what the spec does not model yet.
GAPS: dict = {}


def _gap(name):
    return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=GAPS[name])) if name in GAPS else name


def spec_residuals(p) -> list[list[str]]:
    return [[str(r.type), str(r.source)] for r in spec.saved_residuals(p.trace_spec())]


def test_recording_covers_every_program():
    assert REC["jax_version"] == "0.10.2"
    assert set(REC["residuals"]) | set(REC["errors"]) == set(NAMES), \
        "re-run python tests/record_jax_scan_residuals.py"
    assert REC["errors"] == {}
    assert len(NAMES) >= 15


@pytest.mark.parametrize("name", NAMES)
def test_same_program_as_jax(name):
    assert spec_signature(BY_NAME[name].trace_spec()) == REC["jaxprs"][name]


@pytest.mark.parametrize("name", [_gap(n) for n in NAMES])
def test_residuals_match_jax_in_order(name):
    assert spec_residuals(BY_NAME[name]) == REC["residuals"][name]


def test_residuals_are_stacked_hoisted_or_forwarded():
    """The three fates of a scan's residual, in JAX's recording: stacked over
    the iterations ("output of scan", leading axis = length), hoisted out of
    the loop (loop-invariant, "output of sin"), forwarded (the scan's own
    input, "from the argument w"); inside a checkpoint, outputs of the
    closed_call that runs the known half."""
    rec = REC["residuals"]
    assert ["f32[4,3]", "output of scan"] in rec["scan_plain"]
    assert ["f32[3,3]", "from the argument w"] in rec["scan_plain"]
    assert ["f32[3,3]", "output of sin"] in rec["scan_loop_invariant"]
    assert any(s == "output of closed_call" for _, s in rec["checkpoint_around_scan_dots"])
    assert ["f32<host>[4,3]", "output of scan"] in rec["scan_layers_offload"] or any(
        t.startswith("f32<host>") for t, _ in rec["scan_layers_offload"])


def test_scan_recording_is_fresh_jax():
    pytest.importorskip("jax")
    skip_unless_recorded_release(REC)
    import record_jax_scan_residuals as recorder
    assert recorder.record() == REC, "stale: re-run python tests/record_jax_scan_residuals.py"
