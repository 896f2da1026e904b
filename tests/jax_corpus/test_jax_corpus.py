"""oracle.check on every case of the JAX-derived corpus (tests/jax_corpus/
cases.py): each ends as the case says, on jax 0.10.2 — a Report naming
exactly the expected known divergences and not-applicable properties, or
the expected named error; never an internal error, never a Mismatch.

Where the JAX test asserts how many residuals JAX saves, the spec's
`oracle.expected_residuals` gives that number (JAX's tests are the
independent source)."""
from __future__ import annotations

import re

import pytest

jax = pytest.importorskip("jax")

import oracle  # noqa: E402
from oracle import checker  # noqa: E402

from jax_corpus.cases import CASES  # noqa: E402

pytestmark = pytest.mark.skipif(jax.__version__ != "0.10.2", reason="the expected outcomes are jax 0.10.2's")


def _param(c):
    return pytest.param(c, id=c.name, marks=[pytest.mark.slow] if c.slow else [])


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_case(case):
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
