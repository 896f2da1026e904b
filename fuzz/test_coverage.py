"""The ci profile's programs exercise every primitive with a sub-program
and every control-flow and custom-rule primitive: scan, cond, custom_jvp,
custom_vjp, checkpoints, names and jit, each inside and around the others.

Counted on the programs the differential test draws (the same strategy,
derandomised), without running JAX: drawing is cheap."""
import collections

from hypothesis import given, settings

from fuzz import profiles
from fuzz.strategies import primitives_in, programs

MUST_APPEAR = {"scan", "cond", "while", "custom_jvp_call", "custom_vjp_call", "remat", "name", "call"}


def test_ci_programs_exercise_every_new_primitive():
    counts = collections.Counter()
    nested = collections.Counter()

    @settings(max_examples=300, derandomize=True, database=None)
    @given(programs(partial_ad=True))
    def draw(prog):
        counts.update(primitives_in(prog))
        nested.update(primitives_in(prog, inside=True))
    draw()
    missing = MUST_APPEAR - set(counts)
    assert not missing, f"never drawn: {sorted(missing)} (drawn: {dict(counts)})"
    # control flow inside a checkpoint or another body, and checkpoints inside bodies
    assert {"scan", "cond", "remat"} <= set(nested), dict(nested)
