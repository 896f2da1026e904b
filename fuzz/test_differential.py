"""Drawn float32 programs, run by JAX (remat2 and remat3) and checked
against the spec by oracle.check: values, JVP, VJP, vmap, second order,
residual sets, vjp leaves and prevent_cse barriers, and a drawn stack of
JAX transformations (fuzz/stacks.py: grad, vjp, jvp, linearize, vmap with
drawn axes, composed), each program written for JAX in a drawn spelling
(fuzz/spellings.py: checkpoint forms and arguments, jax.numpy, jax.jit)."""
import pytest
from hypothesis import event, given, settings, strategies as st

pytest.importorskip("jax")   # only the import may skip

from fuzz import profiles, properties  # noqa: E402
from fuzz.spellings import spellings  # noqa: E402
from fuzz.stacks import stacks  # noqa: E402
from fuzz.strategies import primitives_in, programs  # noqa: E402


@st.composite
def checked_programs(draw):
    """A drawn program, how it is written for JAX, and the transformation
    stack it is checked under."""
    prog = draw(programs(partial_ad=True))
    return prog, draw(spellings()), draw(stacks(prog))


@settings(max_examples=profiles.differential_examples())
@given(checked_programs())
def test_jax_agrees_with_the_spec(checked):
    prog, spelling, stack = checked
    for name in sorted(primitives_in(prog)):
        event(f"primitive: {name}")          # --hypothesis-show-statistics lists them
    event(f"stack: {' o '.join(l.kind for l in reversed(stack.layers)) if stack else None}")
    event(f"spelling: {spelling}")
    properties.oracle_agrees(prog, stack=stack, spelling=spelling)
