"""The ci profile's programs exercise every primitive with a sub-program
and every control-flow and custom-rule primitive: scan, cond, custom_jvp,
custom_vjp, checkpoints, names and jit, each inside and around the others;
and every primitive that has a registered Example (`spec.core.examples`,
read when this module is collected: primitives registered later are
included), inside checkpoints, scan bodies and cond branches too.

Counted on the programs the differential test draws (the same strategy,
derandomised), without running JAX: drawing is cheap. Random draws alone
cannot promise every one of a hundred-odd primitives (Hypothesis repeats
choices), so each registered primitive also gets its own draws
(`programs(example_prims=...)`), checked by the spec properties."""
import collections

import numpy as np
import pytest
from hypothesis import given, settings

import spec
from fuzz import profiles, properties
from fuzz.strategies import NOT_DRAWN, drawable_examples, policies, primitives_in, programs, unbindable_primitives
from spec.ir import subprograms

MUST_APPEAR = {"scan", "cond", "while", "custom_jvp_call", "custom_vjp_call", "remat", "name", "call"}
# every primitive with an example, except those not drawn yet (NOT_DRAWN says
# why) and those the installed JAX release cannot bind (none on 0.10.2:
# tests/test_release_examples.py)
EXAMPLE_PRIMITIVES = sorted({p.name for p in spec.core.examples} - set(NOT_DRAWN) - set(unbindable_primitives()))


def _inside(prog, out=None, within=()):
    """(body kind, primitive) for every equation in a sub-program of `prog`
    (a checkpoint's, a scan's, a cond's...), at any depth."""
    out = collections.Counter() if out is None else out
    for e in prog.eqns:
        for kind in within:
            out[(kind, e.primitive.name)] += 1
        for _, body in subprograms(e.params):
            _inside(body, out, within + (e.primitive.name,))
    return out


def test_ci_programs_exercise_every_new_primitive():
    counts = collections.Counter()
    nested = collections.Counter()

    @settings(max_examples=300, derandomize=True, database=None)
    @given(programs(partial_ad=True))
    def draw(prog):
        counts.update(primitives_in(prog))
        nested.update(primitives_in(prog, inside=True))
        _inside(prog, within_counts)
    within_counts = collections.Counter()
    draw()
    missing = MUST_APPEAR - set(counts)
    assert not missing, f"never drawn: {sorted(missing)} (drawn: {dict(counts)})"
    # control flow inside a checkpoint or another body, and checkpoints inside bodies
    assert {"scan", "cond", "remat"} <= set(nested), dict(nested)
    # example steps inside each kind of body (their inputs passed in, their side outputs out)
    for body in ("remat", "scan", "cond"):
        assert any(within_counts[(body, p)] for p in EXAMPLE_PRIMITIVES), f"no example inside a {body}"


def test_every_example_primitive_is_drawable():
    """Each registered primitive has an example the strategies can draw:
    in float32 programs with partial AD (the differential test's), and in
    float64 ones (the spec properties')."""
    for dtype, partial in ((np.float32, True), (np.float64, True)):
        missing = set(EXAMPLE_PRIMITIVES) - set(drawable_examples(dtype, partial_ad=partial))
        assert not missing, f"no drawable example at {np.dtype(dtype)}: {sorted(missing)}"


@pytest.mark.parametrize("prim", EXAMPLE_PRIMITIVES)
def test_ci_draws_every_example_primitive(prim):
    """Programs whose example steps are all `prim`'s (one at least), in
    float64, checked by the spec properties that apply: finite differences
    where no stop_gradient is needed, VJP and remat invariance where the
    example has both modes of AD, vmap always."""
    full_ad = prim in drawable_examples(np.float64)
    no_sg = prim in drawable_examples(np.float64, partial_ad=not full_ad, stop_gradient=False)
    seen = collections.Counter()

    @settings(max_examples=max(1, settings.default.max_examples // 60), derandomize=True, database=None)
    @given(programs(dtype=np.float64, example_prims=(prim,), partial_ad=not full_ad, stop_gradient=not no_sg),
           policies())
    def check(prog, policy):
        seen.update(primitives_in(prog) | primitives_in(prog, inside=True))
        properties.vmap_matches_loop(prog)
        if full_ad:
            properties.vjp_is_transpose_of_jvp(prog)
            properties.remat_is_invariant(prog, policy)
            if no_sg:
                properties.jvp_matches_finite_differences(prog)
    check()
    assert seen[prim], f"{prim} never drawn"


def test_step_primitives_are_exactly_what_the_step_kinds_bind():
    """STEP_PRIMITIVES (whose examples example steps leave out) is the set
    of primitives programs without example steps bind, besides the
    structural ones (checkpoints, names, calls, control flow, custom rules):
    each the installed JAX can bind is drawn, and nothing else is."""
    from fuzz.strategies import STEP_PRIMITIVES
    structural = {"remat", "name", "call", "cond", "while", "scan", "custom_jvp_call", "custom_vjp_call"}
    seen = collections.Counter()

    @settings(max_examples=1000, derandomize=True, database=None)
    @given(programs(example_weight=0, partial_ad=True))
    def draw(prog):
        seen.update(primitives_in(prog) | primitives_in(prog, inside=True))
    draw()
    bindable = set(STEP_PRIMITIVES) - set(unbindable_primitives())    # all of them on jax 0.10.2
    assert set(seen) - structural == bindable, (
        sorted(set(seen) - structural - bindable), sorted(bindable - set(seen)))
