"""Rule-branch coverage as a measured target (fuzz/branches.py): the
differential test's strategy, drawn as under the current profile
(derandomised in ci), takes every branch of JAX's rules that
fuzz/branches.py declares; and JAX agrees with the spec on a set of
those drawn programs that together take every branch, each branch
counted where a property that runs its rule agreed (a greedy cover with
the verdicts fed back), so each branch is run through JAX in every
`pytest fuzz/`, not only drawn.

Branches of primitives that only example steps draw (`spec.core.examples`)
that those draws miss are also counted on programs whose example steps
are that primitive's, as fuzz/test_coverage.py does for every example
primitive."""
import functools

import pytest
import spec
from hypothesis import HealthCheck, given, settings

from fuzz import properties
from fuzz.branches import BRANCHES, branches_hit
from fuzz.strategies import has_custom_vjp, programs
from oracle import stacks as S

# draws of the differential strategy counted (ci: 60 examples -> 1500 draws:
# with ragged_dot_general's examples, 1000 reached neither a jit inside a
# checkpoint inside a jit nor a batched dot under dots_with_no_batch_dims
# (1 and 3 of 1000 before), 1500 reach them 2 and 10 times)
DRAWS_PER_EXAMPLE = 50
MAX_DRAWS = 3000
EXAMPLE_DRAWS = 25      # per example primitive that a branch targets


def _draw(strategy, n):
    out = []

    @settings(max_examples=n, derandomize=settings.default.derandomize, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def draw(prog):
        out.append((prog, frozenset(branches_hit(prog))))
    draw()
    return out


@functools.lru_cache(maxsize=None)
def drawn() -> tuple:
    """(program, keys of the branches it takes) for the drawn programs."""
    n = min(MAX_DRAWS, max(1500, DRAWS_PER_EXAMPLE * settings.default.max_examples // 3))
    out = _draw(programs(partial_ad=True), n)
    hit = set().union(*(keys for _, keys in out))
    example_prims = {p.name for p in spec.core.examples}
    for target in sorted({b.target for b in BRANCHES if b.key not in hit} & example_prims):
        out += _draw(programs(partial_ad=True, example_prims=(target,)), EXAMPLE_DRAWS)
    return tuple(out)


def test_every_branch_is_drawn():
    hit = set().union(*(keys for _, keys in drawn()))
    missing = [b.key for b in BRANCHES if b.key not in hit]
    assert not missing, f"{len(missing)} of {len(BRANCHES)} branches never drawn: {missing}"


def _linearized(prog):
    """The stack `linearize` where it applies to `prog` (not through a
    custom_vjp function), else None."""
    layer = S.Layer("linearize")
    if has_custom_vjp(prog) or S.applicable(S.base_level(prog), layer) is not None:
        return None
    return S.Stack((layer,))


def _verdicts(prog) -> set:
    """The properties that came out agreeing on `prog`, checked as the
    differential test checks a program, with the stack `linearize` (its
    linear function, called on its own, has the barriers of the tangents),
    whose properties P are named "P:linearize". Agreeing: `ok`, or JAX and
    the spec both raised the same error (a policy combination JAX refuses,
    as the spec does); not a known divergence (JAX raised before the rule
    ran, say)."""
    report = properties.oracle_agrees(prog, stack=_linearized(prog))
    return {f"{r.property}:linearize" if r.property.startswith("stack") else r.property
            for r in report.results
            if r.status == "ok" or r.status == "not applicable" and r.detail.startswith("both raise")}


def test_jax_agrees_on_programs_covering_every_branch():
    """JAX agrees with the spec on drawn programs that together take every
    drawn branch (`_verdicts`). A branch counts as covered only where a
    property that runs its rule agreed on a program taking it
    (`Branch.properties`): where a known divergence decided it, or the
    property skipped the program, the next program taking it is checked
    (the greedy cover alone left dot_general's transpose unchecked so, and
    a mutant of it survived)."""
    pytest.importorskip("jax")
    by_key = {b.key: b for b in BRANCHES}
    progs = list(drawn())
    left = set().union(*(keys for _, keys in progs))
    while left:
        candidates = [(p, k) for p, k in progs if k & left]
        if not candidates:
            break
        prog, keys = max(candidates, key=lambda pk: (len(pk[1] & left), -len(pk[0].eqns)))
        progs = [(p, k) for p, k in progs if p is not prog]
        agreed = _verdicts(prog)
        left -= {k for k in keys & left if set(by_key[k].properties) & agreed}
    assert not left, f"branches no drawn program ran through JAX agreeing: {sorted(left)}"
