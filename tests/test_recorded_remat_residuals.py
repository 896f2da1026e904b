"""The spec's saved residuals of checkpointed programs agree with JAX's.

For every program of tests/jax_remat_programs.py, the spec's
`saved_residuals` must equal JAX's recorded list (tests/recordings/
residuals_remat.json, written by tests/record_jax_remat_residuals.py)
entry by entry and IN JAX'S ORDER: type, then provenance.

Order normalisation: none. Every recorded list is compared in JAX's exact
order (jax's `_saved_residuals` lists literals, constants, arguments, then
equation outputs in the order of the forward program), so no program needs
an order-normalising exception. Should one ever be needed, it goes in
ORDER_NORMALISED below with the reason JAX's order is an implementation
accident there, and only that program's lists are compared sorted.

Known divergences (KNOWN_DIVERGENCES) are not skipped: the test asserts
that the spec differs from JAX exactly in the documented way.

Before comparing residuals, each program's spec version is checked to be
the same program as the JAX version (the recorded `make_jaxpr` equations,
with checkpoint and jit bodies), so a disagreement is never just two
different programs.

No jax import here except in `test_remat_recording_is_fresh_jax`, which
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

from jax_remat_programs import BY_NAME, PROGRAMS  # noqa: E402
from recording_format import spec_signature  # noqa: E402

RECORDING = os.path.join(HERE, "recordings", "residuals_remat.json")

with open(RECORDING) as _f:
    REC = json.load(_f)

# program -> why JAX's order there is an implementation accident (compared sorted)
ORDER_NORMALISED: dict[str, str] = {}

# program -> reason; the spec must differ from JAX exactly as `expected_spec` says
KNOWN_DIVERGENCES = {
    "save_anything_except_these_names": (
        "jax 0.10.2 defines save_anything_except_these_names as `lambda *_, **__: True`, "
        "a stub that saves everything, the excluded names too (JAX's list equals the "
        "everything_saveable_name_and_operand recording). The spec implements the "
        "documented meaning: save anything except values named 'h'. The program names "
        "h = sin(x) and also reads sin(x) unnamed, so sin(x) is saved either way and the "
        "only difference is that the spec's list lacks \"f32[3] named 'h'\" (the name "
        "equation is recomputed from the saved sin(x))."),
}


def _divergent_expectation(name: str, jax_list: list[list[str]]) -> list[list[str]]:
    """What the spec must give for a KNOWN_DIVERGENCES program, derived from JAX's list."""
    if name == "save_anything_except_these_names":
        assert ["f32[3]", "named 'h'"] in jax_list            # JAX (stub) saves the excluded name
        return [r for r in jax_list if r != ["f32[3]", "named 'h'"]]
    raise KeyError(name)


def spec_residuals(p) -> list[list[str]]:
    res = spec.saved_residuals(p.trace_spec())
    return [[str(r.type), str(r.source)] for r in res]


# --------------------------------------------------------------------------

NAMES = [p.name for p in PROGRAMS]


def test_recording_covers_every_program():
    assert REC["jax_version"] == "0.10.2"
    recorded = set(REC["residuals"]) | set(REC["errors"])
    assert recorded == set(NAMES), "re-run python tests/record_jax_remat_residuals.py"
    assert len(NAMES) >= 27


def test_no_recorded_errors():
    # offloading policies work on CPU with jax 0.10.2; if a JAX version ever
    # raises, the recorder writes the error here and this test shows it.
    assert REC["errors"] == {}


@pytest.mark.parametrize("name", NAMES)
def test_same_program_as_jax(name):
    p = BY_NAME[name]
    assert spec_signature(p.trace_spec()) == REC["jaxprs"][name]


@pytest.mark.parametrize("name", [n for n in NAMES if n not in KNOWN_DIVERGENCES])
def test_residuals_match_jax_in_order(name):
    if name in REC["errors"]:
        pytest.fail(f"JAX raised on {name}: {REC['errors'][name]}")
    got, want = spec_residuals(BY_NAME[name]), REC["residuals"][name]
    if name in ORDER_NORMALISED:
        got, want = sorted(got), sorted(want)
    assert got == want


@pytest.mark.parametrize("name", sorted(KNOWN_DIVERGENCES))
def test_known_divergence_is_exactly_as_documented(name):
    jax_list = REC["residuals"][name]
    got = spec_residuals(BY_NAME[name])
    assert got != jax_list, f"{name}: the spec now agrees with JAX; drop it from KNOWN_DIVERGENCES"
    assert got == _divergent_expectation(name, jax_list)


def test_jax_save_anything_except_these_names_is_the_stub():
    """The divergence is JAX's stub: its answer equals everything_saveable's."""
    rec = REC["residuals"]
    assert rec["save_anything_except_these_names"] == rec["everything_saveable_name_and_operand"]


def test_dots_with_no_batch_dims_distinguishes_batched_dots():
    """The policy saves the unbatched dot and not the batched one, in JAX
    and in the spec."""
    for source in (REC["residuals"], {n: spec_residuals(BY_NAME[n]) for n in
                                      ("dots_no_batch_unbatched", "dots_no_batch_batched")}):
        assert ["f32[2,4]", "output of dot_general"] in source["dots_no_batch_unbatched"]
        assert not any(s == "output of dot_general" for _, s in source["dots_no_batch_batched"])


def test_remat_recording_is_fresh_jax():
    pytest.importorskip("jax")
    skip_unless_recorded_release(REC)
    import record_jax_remat_residuals as recorder
    fresh = recorder.record()
    assert fresh == REC, "the recording is stale: re-run python tests/record_jax_remat_residuals.py"
