"""The spec's saved residuals of control-flow programs agree with JAX's.

For every program of tests/jax_control_programs.py, the spec's
`saved_residuals` must equal JAX's recorded list (tests/recordings/
residuals_cond.json, written by tests/record_jax_control_residuals.py)
entry by entry and in JAX's order, after checking that the spec version is
the same program as the JAX one (the recorded `make_jaxpr` equations, cond
branches and while bodies nested). For while loops, `jax.grad`'s recorded
error must be the one spec.grad raises.

No jax import here except in `test_cond_recording_is_fresh_jax`.
"""
from __future__ import annotations

import json
import os

import pytest
from conftest import skip_unless_recorded_release

import spec

from jax_control_programs import BY_NAME, PROGRAMS

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDING = os.path.join(HERE, "recordings", "residuals_cond.json")

with open(RECORDING) as _f:
    REC = json.load(_f)

from recording_format import spec_signature  # noqa: E402

NAMES = [p.name for p in PROGRAMS]


def spec_residuals(p) -> list[list[str]]:
    return [[str(r.type), str(r.source)] for r in spec.saved_residuals(p.trace_spec())]


def test_recording_covers_every_program():
    assert REC["jax_version"] == "0.10.2"
    assert set(REC["residuals"]) | set(REC["errors"]) == set(NAMES), \
        "re-run python tests/record_jax_control_residuals.py"
    assert len(NAMES) >= 10
    assert REC["errors"] == {}


@pytest.mark.parametrize("name", NAMES)
def test_same_program_as_jax(name):
    assert spec_signature(BY_NAME[name].trace_spec()) == REC["jaxprs"][name]


# JAX's checkpoint (remat2 under saved_residuals) names its arguments args[i]
# where the spec's builder names them by the checkpointed function's
# parameters: the argument names are compared after this renaming.
def _jax_arg_names(name, residuals):
    p = BY_NAME[name]
    prog = p.trace_spec()
    if not (prog.eqns and prog.eqns[0].primitive.name == "remat"):
        return residuals
    names = prog.input_names or ()
    out = []
    for t, src in residuals:
        for i, n in enumerate(names):
            if src == f"from the argument {n}":
                src = f"from the argument args[{i}]"
        out.append([t, src])
    return out


# program -> why the spec differs; the spec must differ exactly as _divergent_expectation says
KNOWN_DIVERGENCES = {
    "vmap_cond": (
        "spec modelling gap, not a JAX bug: under a batched predicate JAX inlines each batched "
        "branch with eval_jaxpr, so the branch's scalar literal 2.0 reaches the linearization as a "
        "numpy scalar and stays an inline literal; the spec cannot tell that literal from one "
        "written in user code (a jnp array, which JAX saves 'from a literal') and saves it: one "
        "extra leading ['f32[]', 'from a literal']"),
}


def _divergent_expectation(name, jax_list):
    if name == "vmap_cond":
        return [["f32[]", "from a literal"]] + jax_list
    raise KeyError(name)


# Programs where the spec is known to differ from JAX, kept failing (strict
# xfail) so that a fix shows: name -> what the spec does not model yet.
GAPS: dict = {}


def _gap(name):
    return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=GAPS[name])) if name in GAPS else name


@pytest.mark.parametrize("name", [_gap(n) for n in NAMES if n not in KNOWN_DIVERGENCES])
def test_residuals_match_jax_in_order(name):
    got = _jax_arg_names(name, spec_residuals(BY_NAME[name]))
    assert got == REC["residuals"][name]


@pytest.mark.parametrize("name", sorted(KNOWN_DIVERGENCES))
def test_known_divergence_is_exactly_as_documented(name):
    got = _jax_arg_names(name, spec_residuals(BY_NAME[name]))
    assert got != REC["residuals"][name], f"{name} now agrees with JAX: drop it from KNOWN_DIVERGENCES"
    assert got == _divergent_expectation(name, REC["residuals"][name])


@pytest.mark.parametrize("name", sorted(REC["grad_errors"]))
def test_grad_of_while_raises_jax_error(name):
    want = REC["grad_errors"][name]
    assert want is not None
    with pytest.raises(Exception) as info:
        spec.grad(BY_NAME[name].trace_spec())
    assert f"{type(info.value).__name__}: {info.value}" == want


def test_cond_recording_is_fresh_jax():
    pytest.importorskip("jax")
    skip_unless_recorded_release(REC)
    import record_jax_control_residuals as recorder
    assert recorder.record() == REC, "stale: re-run python tests/record_jax_control_residuals.py"
