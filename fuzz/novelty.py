"""Coverage-guided selection: check the drawn programs that take something
not yet checked often enough.

A drawn program costs milliseconds to draw and about a second to check
(oracle.check: every property, both implementations, XLA compiles). Drawn
at random, most programs repeat what was already checked: over 300 ci
draws most rule branches of fuzz/branches.py are taken 1 to 10 times, and
the programs between them find nothing new. So, as AFL keeps the inputs
that reach new edges, a campaign worker (and the differential test)
checks a drawn program only when one of its *features* has been checked
fewer than `quota` times:

* the rule branches it takes (fuzz/branches.py: JAX's rules' code paths);
* the primitives it binds, and those it binds inside sub-programs;
* its transformation stack, layer by layer (vmap with its axes' classes);
* each field of its spelling (how it is written for JAX).

When `patience` draws in a row bring nothing new, the next one is checked
anyway and the quota goes up by one: once every feature has been checked
`quota` times the worker sweeps them all again, so that every feature is
checked about as often as every other, the rare ones included.
Selection is a function of the drawn programs alone: a worker's choices
replay from its seed.
"""
from __future__ import annotations

import collections
import dataclasses

from fuzz.branches import branches_hit
from fuzz.strategies import primitives_in

PATIENCE = 40       # draws in a row with nothing new before one is checked anyway


def _axis_class(a) -> str:
    return "None" if a is None else "negative" if a < 0 else str(a)


def _stack_features(stack) -> set:
    if stack is None:
        return {("stack", "none")}
    out = {("stack", " o ".join(l.kind for l in reversed(stack.layers)))}
    for i, layer in enumerate(stack.layers):
        out.add(("layer", i, layer.kind))
        if layer.argnums is not None:
            out.add(("layer differentiates a subset", i, layer.kind))
        if layer.kind == "vmap":
            out |= {("vmap in_axes", _axis_class(a)) for a in layer.in_axes}
            out |= {("vmap out_axes", _axis_class(a)) for a in layer.out_axes}
    return out


def features(prog, spelling=None, stack=None) -> frozenset:
    """What a checked program exercises (see the module docstring)."""
    out = {("branch",) + k for k in branches_hit(prog)}
    out |= {("primitive", p) for p in primitives_in(prog)}
    out |= {("primitive in a sub-program", p) for p in primitives_in(prog, inside=True)}
    out |= _stack_features(stack)
    if spelling is not None:
        out |= {("spelling", f.name, getattr(spelling, f.name)) for f in dataclasses.fields(spelling)}
    return frozenset(out)


@dataclasses.dataclass
class Novelty:
    """One worker's selection state: how often each feature was checked."""
    quota: int = 1
    patience: int = PATIENCE
    counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    passed_over: int = 0        # draws in a row not checked

    def wanted(self, prog, spelling=None, stack=None) -> bool:
        """Whether to check this drawn program; counts its features if so."""
        feats = features(prog, spelling, stack)
        if not any(self.counts[f] < self.quota for f in feats):
            self.passed_over += 1
            if self.passed_over < self.patience:
                return False
            self.quota += 1
        self.passed_over = 0
        self.counts.update(feats)
        return True
