"""oracle.check on every case of the JAX-derived corpus (fuzz/corpus.py),
the programs every campaign checks first.

On jax 0.10.2 each ends exactly as the case says: a Report naming exactly
the expected known divergences and not-applicable properties, or the
expected named error; never an internal error, never a Mismatch. On
another JAX (a release, a JAX developer's tree) each ends as a campaign
requires (`corpus.seed_outcome`): no Mismatch, no error but what the case
expects or a named refusal.

Where the JAX test asserts how many residuals JAX saves, the spec's
`oracle.expected_residuals` gives that number (JAX's tests are the
independent source).

Cases over two seconds each are `slow`, skipped unless asked for:

    RUN_SLOW_JAX_CORPUS=1 pytest fuzz/test_corpus.py
"""
from __future__ import annotations

import os
import re

import pytest

jax = pytest.importorskip("jax")

import oracle  # noqa: E402
from oracle import checker  # noqa: E402

from fuzz.corpus import CASES, seed_outcome  # noqa: E402

RECORDED = "0.10.2"         # the release whose outcomes the cases state
SLOW = os.environ.get("RUN_SLOW_JAX_CORPUS", "") not in ("", "0")


def _param(c):
    marks = [pytest.mark.slow, pytest.mark.skipif(not SLOW, reason="slow corpus case (RUN_SLOW_JAX_CORPUS=1)")]
    return pytest.param(c, id=c.name, marks=marks if c.slow else [])


def _exact_outcome(case):
    expect = case.expect
    if expect.error is not None:
        with pytest.raises(expect.error) as info:
            case.check()
        assert re.search(expect.pattern, str(info.value)), str(info.value)[:400]
        return
    report = case.check()
    statuses = {r.status for r in report.results}
    assert statuses <= set(checker.STATUSES)
    assert {n for n, _, _ in report.known_divergences} == set(expect.divergences), str(report)
    assert {r.property for r in report.results if r.status == "not applicable"} == set(expect.not_applicable), \
        str(report)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_case(case):
    if jax.__version__ == RECORDED:
        _exact_outcome(case)
    else:
        seed_outcome(case)


@pytest.mark.parametrize("case", [_param(c) for c in CASES if c.residuals is not None])
def test_residual_count_stated_by_jax_test(case):
    with checker.implementation("remat2"):
        spec_residuals = oracle.expected_residuals(case.fn, case.policy, *case.args,
                                                   static_argnums=case.static_argnums,
                                                   static_argnames=case.static_argnames, **case.kwargs)
    assert len(spec_residuals) == case.residuals, spec_residuals


def test_corpus_size_and_sources():
    """At least 60 cases, each naming the JAX test it comes from."""
    assert len(CASES) >= 60
    assert all(c.source.startswith("tests/") and ".py::" in c.source for c in CASES)
