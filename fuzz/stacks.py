"""Drawn transformation stacks (oracle.stacks) for a drawn program: one to
three layers among grad, vjp, jvp, linearize (outermost) and vmap with
drawn in_axes (0, 1, -1, None, mixed per input), out_axes and batch size,
each AD layer differentiating every input or a drawn subset (argnums: it
closes over the rest, which an outer layer may differentiate),
so that vmap of grad, grad of vmap, grad of grad, jvp of grad, ... reach
JAX through its public transformations. Every choice is a small integer
drawn from Hypothesis: stacks shrink (to fewer layers, to axis 0) and
replay from the seed.

What a program cannot take is never drawn: forward mode through a
custom_vjp function, reverse mode through a while loop (JAX raises for
both, as the spec does), more than one AD layer over a custom_vjp."""
from __future__ import annotations

from hypothesis import strategies as st

from oracle import stacks as S

from fuzz.spellings import spellings
from fuzz.strategies import has_custom_vjp, has_while, programs

# the first entry is what a layer shrinks to (and Hypothesis draws most)
KIND_ORDER = ("grad", "vmap", "vjp", "jvp", "linearize")
AXES = (0, 1, -1, None)          # in_axes entries, in shrinking order
OUT_AXES = (0, 1, -1)
MAX_LAYERS = 3


def _allowed(prog, depth_ad: int, below: str | None) -> list[str]:
    """The kinds a layer over `below` (None: the first layer) may take, the
    most informative first: a composition of two different transformations,
    then the same one again (Hypothesis draws the first entries most)."""
    others = [k for k in KIND_ORDER if k != below]
    kinds = others[:1] + [below] + others[1:] if below else others
    if has_custom_vjp(prog):            # no forward mode; one AD layer at most
        kinds = [k for k in kinds if k not in S.FORWARD_KINDS]
        if depth_ad >= 1:
            kinds = ["vmap"]
    if has_while(prog):                 # no reverse mode, at any level
        kinds = [k for k in kinds if k not in S.REVERSE_KINDS]
    return kinds


def _axis(draw, ndim: int, choices) -> int | None:
    """An axis among `choices` that is valid for a batched array of ndim + 1 dims."""
    valid = [a for a in choices if a is None or -(ndim + 1) <= a <= ndim]
    return draw(st.sampled_from(valid))


@st.composite
def _vmap_layer(draw, level: S.Level) -> S.Layer:
    in_axes = [_axis(draw, t.ndim, AXES) for t in level.in_types]
    if all(a is None for a in in_axes):
        in_axes[draw(st.integers(0, len(in_axes) - 1))] = 0
    out_axes = [_axis(draw, t.ndim, OUT_AXES) for t in level.out_types]
    return S.Layer("vmap", tuple(in_axes), tuple(out_axes), draw(st.sampled_from([2, 3])))


@st.composite
def _argnums(draw, level: S.Level, closing: bool = False) -> tuple | None:
    """None (every differentiated input; what it shrinks to), or, 1 in 3
    where there are two or more (always, `closing`), a proper subset: the
    layer closes over the rest, which an outer AD layer may differentiate."""
    d = level.diff_positions
    if len(d) < 2 or not closing and draw(st.integers(0, 2)) < 2:
        return None
    return tuple(sorted(draw(st.lists(st.sampled_from(d), min_size=1, max_size=len(d) - 1, unique=True))))


@st.composite
def stacks(draw, prog, kinds: tuple | None = None):
    """A Stack that applies to `prog` (oracle.stacks.levels accepts it), or
    None where none does (key-typed values). `kinds`: the layers' kinds,
    innermost first, the first one closing over some of its inputs (a
    composition fuzz/test_compositions.py runs through JAX when the
    plain draws miss it); None where they do not apply."""
    if kinds is not None:
        return draw(_stack_of(prog, kinds))
    level = S.base_level(prog)
    layers: list = []
    for i in range(MAX_LAYERS):
        if i > 0 and (layers[-1].kind == "linearize" or draw(st.integers(0, 2)) == 0):   # one more? (2 in 3)
            break
        kinds = _allowed(prog, sum(l.kind in S.AD_KINDS for l in layers), layers[-1].kind if layers else None)
        kind = draw(st.sampled_from(kinds))
        layer = draw(_vmap_layer(level)) if kind == "vmap" else S.Layer(kind, argnums=draw(_argnums(level)))
        if S.applicable(level, layer) is not None:
            break
        layers.append(layer)
        level = S.next_level(level, layer)
    return S.Stack(tuple(layers)) if layers else None


@st.composite
def _stack_of(draw, prog, kinds: tuple):
    level, layers = S.base_level(prog), []
    for i, kind in enumerate(kinds):
        argnums = draw(_argnums(level, closing=True)) if i == 0 else None    # the outer ones differentiate all
        layer = draw(_vmap_layer(level)) if kind == "vmap" else S.Layer(kind, argnums=argnums)
        if S.applicable(level, layer) is not None or i == 0 and layer.argnums is None:
            return None
        layers.append(layer)
        level = S.next_level(level, layer)
    return S.Stack(tuple(layers))


@st.composite
def checked_programs(draw, stack_kinds: tuple | None = None, **program_options):
    """(program, spelling, stack): a drawn program (`programs(partial_ad=True,
    **program_options)`), how it is written for JAX, and the transformation
    stack it is checked under: what the differential test and the campaign
    check (fuzz.properties.oracle_agrees)."""
    prog = draw(programs(partial_ad=True, **program_options))
    return prog, draw(spellings()), draw(stacks(prog, stack_kinds))
