"""Drawn float32 programs, run by JAX (remat2 and remat3) and checked
against the spec by oracle.check: values, JVP, VJP, vmap, second order,
residual sets, vjp leaves and prevent_cse barriers, and a drawn stack of
JAX transformations (fuzz/stacks.py: grad, vjp, jvp, linearize, vmap with
drawn axes, composed), each program written for JAX in a drawn spelling
(fuzz/spellings.py: checkpoint forms and arguments, jax.numpy, jax.jit).
Each program is checked under a wall-clock limit (fuzz/watchdog.py): a hang
fails the test with its program. Once one fails, Hypothesis shrinks it
checking only what failed (fuzz/focus.py). In the nightly profile,
Hypothesis targets nesting depth and residual counts (fuzz/targets.py)."""
import pytest
from hypothesis import event, given, settings

pytest.importorskip("jax")   # only the import may skip

from fuzz import focus, profiles, targets  # noqa: E402
from fuzz.stacks import checked_programs  # noqa: E402
from fuzz.strategies import inputs, primitives_in  # noqa: E402


_focus = focus.Focus()


@settings(max_examples=profiles.differential_examples(), report_multiple_bugs=False)
@given(checked_programs())
def test_jax_agrees_with_the_spec(checked):
    prog, spelling, stack = checked
    for name in sorted(primitives_in(prog)):
        event(f"primitive: {name}")          # --hypothesis-show-statistics lists them
    event(f"stack: {' o '.join(l.kind for l in reversed(stack.layers)) if stack else None}")
    event(f"spelling: {spelling}")
    _focus.check(prog, stack=stack, spelling=spelling)
    targets.aim(prog, inputs(prog))      # nightly only: depth, residuals, remat2 vs remat3
