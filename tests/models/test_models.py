"""Every model of the zoo, checked whole: oracle.check(loss, policy, *args)
under each policy of zoo.POLICIES, on remat2 and remat3 (oracle.check does
both; remat2 alone on a release without jax_remat3).

A (model, policy) passes when every (property, implementation) status is
one of oracle's statuses (ok, known divergence, not applicable, not
compared, not checked) and at least one implementation was checked. A
model that blockers.BLOCKERS lists is a strict xfail raising
oracle.Unsupported, and the Unsupported must name a primitive its entry
lists. A Mismatch is never expected: it fails the test, with the oracle's
report (the pytest plugin prints it; --oracle-repro-dir saves a
reproducer).
"""
from __future__ import annotations

import pytest

for _library in ("flax", "equinox", "haiku", "optax"):   # the models' libraries (pyproject's test extra)
    pytest.importorskip(_library, reason=f"the real-model suite needs {_library} (pip install -e '.[test]')")

import oracle
from oracle import jax_api
from oracle.checker import STATUSES

from . import zoo
from .blockers import BLOCKERS, stops_at

MODELS = zoo.load_all()

# The default run checks each model under one policy, rotating through
# zoo.POLICIES so that every policy is checked by default on about a fifth
# of the models; the other (model, policy) pairs are marked slow (see
# conftest.py: the whole matrix is minutes of XLA compilation).
DEFAULT_POLICY = {name: list(zoo.POLICIES)[i % len(zoo.POLICIES)] for i, name in enumerate(MODELS)}


def cases():
    for name, m in MODELS.items():
        missing = BLOCKERS.get(name, ())
        marks = []
        if missing:
            also = f" (also missing: {', '.join(missing[1:])})" if len(missing) > 1 else ""
            marks.append(pytest.mark.xfail(strict=True, raises=oracle.Unsupported,
                                           reason=f"stops at {missing[0]}{also}"))
        for policy_name in zoo.POLICIES:
            slow = [] if policy_name == DEFAULT_POLICY[name] and not m.slow else [pytest.mark.slow]
            yield pytest.param(name, policy_name, marks=marks + slow, id=f"{name}-{policy_name}")


@pytest.mark.parametrize("model_name, policy_name", list(cases()))
def test_model(model_name, policy_name, oracle_check):
    m = MODELS[model_name]
    case = m.build()
    try:
        report = oracle_check(case.loss, zoo.policy(policy_name, m), *case.args, **case.kwargs)
    except oracle.Unsupported as e:
        missing = BLOCKERS.get(model_name, ())
        prim = stops_at(str(e))
        if prim not in missing:
            pytest.fail(f"{model_name} stops at {prim!r}, which tests/models/blockers.py does not list "
                        f"for it (it lists {missing}): update the table from `python -m models.blockers`."
                        f"\n{e}", pytrace=False)
        raise
    bad = [(r.property, r.implementation, r.status) for r in report.results if r.status not in STATUSES]
    assert not bad, bad
    checked = {r.implementation for r in report.results if r.status != "not checked"}
    assert checked == set(jax_api.implementations()), f"only {sorted(checked)} checked:\n{report}"
