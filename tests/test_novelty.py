"""fuzz/novelty.py: which drawn programs a campaign worker (and the
differential test) checks."""
from __future__ import annotations

import numpy as np
import spec
from hypothesis import HealthCheck, given, settings

from fuzz.branches import branches_hit
from fuzz.novelty import Novelty, features
from fuzz.stacks import checked_programs
from oracle.spellings import Spelling
from oracle.stacks import Layer, Stack


def _sin_program():
    return spec.trace(lambda x: spec.ops.sin(x), spec.ArrayType((3,), np.float32))


def _draws(n):
    out = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(checked_programs())
    def draw(c):
        out.append(c)
    draw()
    return out


def test_features_name_primitives_stack_layers_and_spelling():
    prog = _sin_program()
    stack = Stack((Layer("vmap", (-1,), (0,), 2), Layer("grad")))
    feats = features(prog, Spelling(jit=True), stack)
    assert ("primitive", "sin") in feats
    assert ("stack", "grad o vmap") in feats and ("layer", 0, "vmap") in feats
    assert ("vmap in_axes", "negative") in feats and ("vmap out_axes", "0") in feats
    assert ("spelling", "jit", True) in feats
    assert {("branch",) + k for k in branches_hit(prog)} <= feats


def test_a_program_bringing_nothing_new_waits_for_patience():
    novelty = Novelty(patience=3)
    prog = _sin_program()
    assert novelty.wanted(prog)
    assert not novelty.wanted(prog) and not novelty.wanted(prog)
    assert novelty.wanted(prog) and novelty.quota == 2      # the third in a row: checked, quota up
    assert not novelty.wanted(prog)


def test_the_checked_programs_cover_every_feature_drawn():
    draws = _draws(200)
    novelty = Novelty(patience=10 ** 9)
    checked = [c for c in draws if novelty.wanted(*c)]
    drawn = set().union(*(features(*c) for c in draws))
    assert set().union(*(features(*c) for c in checked)) == drawn
    assert len(checked) < len(draws) // 2, (len(checked), len(draws))
