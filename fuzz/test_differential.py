"""Drawn float32 programs, run by JAX (remat2 and remat3) and checked
against the spec by oracle.check: values, JVP, VJP, vmap, second order,
residual sets, vjp leaves and prevent_cse barriers, and a drawn stack of
JAX transformations (fuzz/stacks.py: grad, vjp, jvp, linearize, vmap with
drawn axes, composed), each program written for JAX in a drawn spelling
(fuzz/spellings.py: checkpoint forms and arguments, jax.numpy, jax.jit).
Of the drawn programs, those that bring a rule branch, primitive, stack
layer or spelling field not yet checked are checked (fuzz/novelty.py),
`profiles.differential_examples()` of them. Each program is checked under
a wall-clock limit (fuzz/watchdog.py): a hang fails the test with its
program. Once one fails, Hypothesis shrinks it checking only what failed
(fuzz/focus.py). In the nightly profile, Hypothesis targets nesting depth
and residual counts (fuzz/targets.py)."""
import pytest
from hypothesis import event, given, settings

pytest.importorskip("jax")   # only the import may skip

from fuzz import focus, profiles, targets  # noqa: E402
from fuzz.novelty import Novelty  # noqa: E402
from fuzz.stacks import checked_programs  # noqa: E402
from fuzz.strategies import inputs, primitives_in  # noqa: E402

# programs drawn per program checked (novelty selects about one in five)
DRAWS_PER_CHECK = 5

_focus = focus.Focus()
_novelty = Novelty()
_state = {"checked": 0, "failed": False}


@settings(max_examples=DRAWS_PER_CHECK * profiles.differential_examples(), report_multiple_bugs=False)
@given(checked_programs())
def test_jax_agrees_with_the_spec(checked):
    prog, spelling, stack = checked
    if not _state["failed"]:        # drawing; once one failed, every shrink step is checked
        if _state["checked"] >= profiles.differential_examples() or not _novelty.wanted(prog, spelling, stack):
            return
        _state["checked"] += 1
    for name in sorted(primitives_in(prog)):
        event(f"primitive: {name}")          # --hypothesis-show-statistics lists them
    event(f"stack: {' o '.join(l.kind for l in reversed(stack.layers)) if stack else None}")
    event(f"spelling: {spelling}")
    try:
        _focus.check(prog, stack=stack, spelling=spelling)
    except BaseException:
        _state["failed"] = True
        raise
    targets.aim(prog, inputs(prog))      # nightly only: depth, residuals, remat2 vs remat3
