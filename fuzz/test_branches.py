"""Rule-branch coverage as a measured target (fuzz/branches.py): the
differential test's strategy, drawn as under the current profile
(derandomised in ci), takes every branch of JAX's rules that
fuzz/branches.py declares; and JAX agrees with the spec on a set of
those drawn programs that together take every branch (a greedy cover),
so each branch is run through JAX in every `pytest fuzz/`, not only
drawn.

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
from fuzz.strategies import programs

# draws of the differential strategy counted (ci: 60 examples -> 1000 draws)
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
    n = min(MAX_DRAWS, max(1000, DRAWS_PER_EXAMPLE * settings.default.max_examples // 3))
    out = _draw(programs(partial_ad=True), n)
    hit = set().union(*(keys for _, keys in out))
    example_prims = {p.name for p in spec.core.examples}
    for target in sorted({b.target for b in BRANCHES if b.key not in hit} & example_prims):
        out += _draw(programs(partial_ad=True, example_prims=(target,)), EXAMPLE_DRAWS)
    return tuple(out)


def cover(progs) -> list:
    """A greedy set cover: programs that together take every branch that
    any of `progs` takes, the one taking most not yet taken first (the
    smallest among equals)."""
    left = set().union(*(keys for _, keys in progs))
    chosen = []
    while left:
        prog, keys = max(progs, key=lambda pk: (len(pk[1] & left), -len(pk[0].eqns)))
        chosen.append(prog)
        left -= keys
    return chosen


def test_every_branch_is_drawn():
    hit = set().union(*(keys for _, keys in drawn()))
    missing = [b.key for b in BRANCHES if b.key not in hit]
    assert not missing, f"{len(missing)} of {len(BRANCHES)} branches never drawn: {missing}"


def test_jax_agrees_on_programs_covering_every_branch():
    pytest.importorskip("jax")
    for prog in cover(list(drawn())):
        properties.oracle_agrees(prog)
