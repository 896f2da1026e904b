"""The spec's `saved_residuals` against JAX's, for programs without
checkpoint (plain `jax.vjp` residuals).

JAX's answers are recorded in tests/recordings/residuals_core.json by
tests/record_jax_residuals.py; the tests here read that file and never
import jax (except `test_recording_is_fresh_jax`, which re-runs the recorder
when jax is installed and checks the file is up to date).

Per program (tests/jax_programs.py):
* test_spec_program_is_the_recorded_jaxpr: the spec version traces to the
  same equations as JAX's jaxpr (primitives, types, literal/constant inputs,
  jit bodies), so a residual disagreement is a disagreement about autodiff,
  not about the program;
* test_residuals_match_as_multiset: same (type, source) pairs, any order;
* test_residuals_match_in_order: same pairs in the same order.

Order: the spec orders residuals as JAX's `_saved_residuals` does (literals,
constants, arguments in argument order, then equation outputs in the order
of the forward program), and for every program here whose residuals agree
as a multiset, they agree in order too, so the order is asserted for all
programs rather than only reported. (The programs that fail the order test
fail it because their multisets already differ; see the multiset test.)

Known differences from jax 0.10.2 are listed in KNOWN_DIFFERENCES below,
each with the exact residuals that differ and the reason; they are asserted
(test_known_differences_are_exactly_as_documented), never skipped.
"""
from __future__ import annotations

import collections
import json
import os

import pytest
from conftest import skip_unless_recorded_release

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

import spec  # noqa: E402
from jax_programs import BY_NAME  # noqa: E402
from recording_format import spec_signature  # noqa: E402

RECORDING_PATH = os.path.join(HERE, "recordings", "residuals_core.json")

with open(RECORDING_PATH) as _f:
    RECORDING = json.load(_f)

NAMES = list(RECORDING["residuals"])


# --------------------------------------------------------------------------
# the spec's side, in the recording's terms

def spec_residuals(name: str) -> list[tuple[str, str]]:
    prog = BY_NAME[name].trace_spec()
    return [(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)]


def recorded_residuals(name: str) -> list[tuple[str, str]]:
    return [tuple(pair) for pair in RECORDING["residuals"][name]]


def _fmt(pairs) -> str:
    return "\n".join(f"    {t} {s}" for t, s in pairs) or "    (none)"


# --------------------------------------------------------------------------
# the recording itself

def test_recording_covers_the_table():
    assert RECORDING.get("jax_version"), "recording lacks jax_version"
    assert set(NAMES) == set(BY_NAME), (
        "tests/recordings/residuals_core.json and tests/jax_programs.py list different "
        f"programs: only recorded {sorted(set(NAMES) - set(BY_NAME))}, "
        f"only in the table {sorted(set(BY_NAME) - set(NAMES))}; "
        "run `python tests/record_jax_residuals.py`")
    assert len(NAMES) >= 14
    assert set(RECORDING["jaxprs"]) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_spec_program_is_the_recorded_jaxpr(name):
    got = spec_signature(BY_NAME[name].trace_spec())
    want = RECORDING["jaxprs"][name]
    assert got == want, (
        f"{name}: the spec version is not the same program as JAX's\n"
        f"  JAX:\n" + "\n".join(f"    {s}" for s in want) +
        f"\n  spec:\n" + "\n".join(f"    {s}" for s in got))


# --------------------------------------------------------------------------
# residuals

# Known differences between the spec and jax 0.10.2, each with the exact
# residuals the spec lacks or adds. They are asserted, never skipped: if JAX
# or the spec changes, the test fails and the entry must be revisited.
KNOWN_DIFFERENCES = {
    "scalar_where": dict(
        only_jax=[("f32[]", "output of jitted function '_where'")], only_spec=[],
        reason="JAX linearizes a jit body with ad.linearize_jaxpr: the zero tangent that "
               "select_n's JVP instantiates for the constant branch is a *known* scalar "
               "there and becomes an output of the known jit, i.e. a residual (its value is "
               "0.0). The spec instantiates that zero as an inline literal inside the call "
               "body, as it does for every literal in a call body, so it saves nothing. The "
               "gradient is the same; the spec's residual set is one scalar smaller. The "
               "spec is not bent to save a constant: saving it is an implementation "
               "accident of jit linearization."),
}


def _expected(name):
    """JAX's recorded list, adjusted by a documented known difference."""
    want = recorded_residuals(name)
    diff = KNOWN_DIFFERENCES.get(name)
    if diff:
        want = [w for w in want if w not in [tuple(x) for x in diff["only_jax"]]] + list(diff["only_spec"])
    return want


@pytest.mark.parametrize("name", sorted(KNOWN_DIFFERENCES))
def test_known_differences_are_exactly_as_documented(name):
    got, want = spec_residuals(name), recorded_residuals(name)
    diff = KNOWN_DIFFERENCES[name]
    assert dict(collections.Counter(want) - collections.Counter(got)) == dict(
        collections.Counter(tuple(x) for x in diff["only_jax"])), diff["reason"]
    assert dict(collections.Counter(got) - collections.Counter(want)) == dict(
        collections.Counter(tuple(x) for x in diff["only_spec"])), diff["reason"]


@pytest.mark.parametrize("name", NAMES)
def test_residuals_match_as_multiset(name):
    got, want = spec_residuals(name), _expected(name)
    missing = collections.Counter(want) - collections.Counter(got)
    extra = collections.Counter(got) - collections.Counter(want)
    assert not missing and not extra, (
        f"{name}: residuals differ\n  JAX ({RECORDING['jax_version']}):\n{_fmt(want)}\n"
        f"  spec:\n{_fmt(got)}\n  only JAX: {dict(missing)}\n  only spec: {dict(extra)}")


@pytest.mark.parametrize("name", NAMES)
def test_residuals_match_in_order(name):
    got, want = spec_residuals(name), _expected(name)
    same_multiset = collections.Counter(got) == collections.Counter(want)
    assert got == want, (
        f"{name}: residual order differs"
        + ("" if same_multiset else " (the multisets differ too: see test_residuals_match_as_multiset)")
        + f"\n  JAX:\n{_fmt(want)}\n  spec:\n{_fmt(got)}")


# --------------------------------------------------------------------------
# the recording is what the installed JAX says

def test_recording_is_fresh_jax():
    pytest.importorskip("jax")     # only the import may skip; any other failure fails
    skip_unless_recorded_release(RECORDING)
    import record_jax_residuals

    fresh = record_jax_residuals.record()
    stale = RECORDING
    hint = "re-record with `python tests/record_jax_residuals.py`"
    assert fresh["jax_version"] == stale["jax_version"], (
        f"recorded with jax {stale['jax_version']}, installed jax is {fresh['jax_version']}; {hint}")
    for key in ("residuals", "jaxprs"):
        assert set(fresh[key]) == set(stale[key]), f"{key}: program names differ; {hint}"
        changed = [n for n in fresh[key] if fresh[key][n] != stale[key][n]]
        assert not changed, (
            f"{key} out of date for {changed}; {hint}\n" + "\n".join(
                f"  {n}:\n    recorded {stale[key][n]}\n    now      {fresh[key][n]}" for n in changed))
    assert record_jax_residuals.dumps(fresh) == record_jax_residuals.dumps(stale), hint
