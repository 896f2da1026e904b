"""The differential test's draws (fuzz.stacks.checked_programs: a program,
a spelling, a transformation stack) reach every layer kind, the
compositions vmap o grad, grad o vmap, grad o grad and jvp o grad, vmap
in_axes of every class (0, positive, negative, None, mixed in one vmap)
and out_axes of every class, an AD layer differentiating a subset of its
inputs (closing over the rest) under one differentiating them all, and
every value of every spelling field.
Counted on draws of the same strategy (derandomised), without running
JAX."""
import collections
import dataclasses

from hypothesis import given, settings

from fuzz.stacks import checked_programs
from oracle.spellings import CHECKPOINT_FORMS, SAVE_NOTHING, Spelling
from oracle.stacks import AD_KINDS, KINDS

# the draws are derandomized, so the sample is fixed until what a program
# draws changes; 300 stopped reaching jvp o grad when two primitives' examples
# were added (approx_top_k, vprim), 400 reaches it again: 500 for margin
DRAWS = 500
COMPOSITIONS = {("grad", "vmap"), ("vmap", "grad"), ("grad", "grad"), ("grad", "jvp")}   # (inner, outer)


def _axis_class(a) -> str:
    return "None" if a is None else "0" if a == 0 else "positive" if a > 0 else "negative"


def test_draws_reach_every_layer_axis_class_and_spelling():
    kinds, pairs, in_classes, out_classes, mixed, closed = (collections.Counter() for _ in range(6))
    fields = collections.defaultdict(set)

    @settings(max_examples=DRAWS, derandomize=True, database=None)
    @given(checked_programs())
    def draw(checked):
        _, spelling, stack = checked
        for f in dataclasses.fields(Spelling):
            fields[f.name].add(getattr(spelling, f.name))
        if stack is None:
            return
        layers = stack.layers
        kinds.update(l.kind for l in layers)
        pairs.update((a.kind, b.kind) for a, b in zip(layers, layers[1:]))
        # an AD layer with argnums under an AD layer differentiating what it closes over
        closed.update((a.kind, b.kind) for a, b in zip(layers, layers[1:])
                      if a.argnums is not None and b.kind in AD_KINDS and b.argnums is None)
        for l in layers:
            if l.kind == "vmap":
                classes = {_axis_class(a) for a in l.in_axes}
                in_classes.update(classes)
                out_classes.update(_axis_class(a) for a in l.out_axes)
                mixed[len(classes) > 1] += 1
    draw()
    assert set(kinds) == set(KINDS), dict(kinds)
    assert COMPOSITIONS <= set(pairs), (dict(pairs), dict(kinds))
    assert set(in_classes) == {"0", "positive", "negative", "None"}, dict(in_classes)
    assert set(out_classes) == {"0", "positive", "negative"}, dict(out_classes)
    assert mixed[True], "no vmap with in_axes of two classes"
    assert sum(closed.values()) >= 3, ("an inner AD layer closing over what the outer one differentiates",
                                       dict(closed))
    assert fields["checkpoint"] == set(CHECKPOINT_FORMS) and fields["save_nothing"] == set(SAVE_NOTHING)
    for name in ("default_prevent_cse", "static_argnums", "jnp", "jit"):
        assert fields[name] == {True, False}, (name, fields[name])
