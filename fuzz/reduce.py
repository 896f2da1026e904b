"""A failing program made smaller after Hypothesis has shrunk it.

Hypothesis shrinks the *choices* a program was drawn from; a choice that
builds part of a checkpoint's body also feeds the draws after it, so a
shrunk program can keep equations, outputs and inputs the failure does
not need (a campaign's finding under one injected JAX bug kept 24
equations of which a names policy on one value mattered). Here the program
itself is reduced, step by step (delta debugging on the IR), each step
kept only where the reduced program still fails the same way:

- its dead code removed, and its inputs nothing reads; or one dead
  equation alone (a failure may need the rest: before direct
  linearization JAX differentiates dead code, a release campaign's
  finding on 0.4.36, 0fef3f486a, needed a dead scatter and no other);
- one of its outputs dropped (with what only that output needed);
- an equation bypassed: an output replaced by one of the equation's own
  operands of the same type (the equation then dead);
- an equation cut: its outputs made program inputs (the equation then
  dead, and what only it read), at top level, where the inputs may change;
  inside a sub-program, whose inputs stay, an output made a constant;
- a jit or checkpoint inlined: its body in its place; a cond replaced by
  one of its branches, inlined;
- the same steps inside a sub-program (a checkpoint's, a jit's, a scan's
  body, a cond branch), keeping its signature; not inside a custom call's
  body, which must stay the function its rules differentiate; inside a
  while loop's body and condition only the steps that keep their values
  (dead code removed, a jit inlined): a loop whose carry update an
  equation's operand replaced can run forever (a campaign's "hang" was
  such a reduced loop, inside XLA where no alarm reaches it).

A step removes what it made dead (`_newly_dead_removed`), not dead code
that was there before it. Each step makes the program strictly smaller (`size`), so the reduction
ends; it also ends at its time budget. `reduced` is given the check that
says whether a candidate still fails the same way.

>>> import spec
>>> prog = spec.trace(lambda x, y: (spec.ops.sin(spec.ops.cos(x)), spec.ops.exp(y)), spec.f32[3], spec.f32[3])
>>> fails = lambda p: any(e.primitive.name == "sin" for e in p.eqns)
>>> print(reduced(prog, fails, budget_s=10))
{ lambda ; a:f32[3]. let
    b:f32[3] = sin a
  in (b,) }
"""
from __future__ import annotations

import functools
import time

import numpy as np
from collections.abc import Callable, Iterator

from spec.core import has_effects, loops_until_a_value
from spec.ir import Eqn, Literal, Program, Var, map_subprograms, subprograms
from spec.partial_eval import dce
from spec.prims_control import passthroughs
from spec.remat import _clone

INLINED = ("call", "remat")     # a body applied to the inputs: inlining keeps the values


def equation_count(prog: Program) -> int:
    """Equations of `prog`, those of its sub-programs included."""
    return sum(1 + sum(equation_count(sub) for _, sub in subprograms(e.params)) for e in prog.eqns)


def size(prog: Program) -> tuple:
    """What a reduction step must make smaller."""
    return equation_count(prog), len(prog.outputs), len(prog.inputs), len(str(prog))


def reduced(prog: Program, fails: Callable[[Program], bool], *, budget_s: float = 60.0,
            keep_signature: bool = False) -> Program:
    """`prog` reduced while `fails(candidate)` holds, greedily, to a
    fixpoint or until `budget_s` seconds have passed. With `keep_signature`
    its inputs and outputs stay (a transformation stack drawn for it
    refers to them)."""
    deadline = time.monotonic() + budget_s
    improved = True
    while improved and time.monotonic() < deadline:
        improved = False
        for candidate in candidates(prog, keep_signature=keep_signature):
            if time.monotonic() >= deadline:
                break
            candidate = passthroughs_pruned(candidate)
            if size(candidate) < size(prog) and _fails(fails, candidate):
                prog, improved = candidate, True
                break
    return prog


def passthroughs_pruned(prog: Program) -> Program:
    """`prog` with each cond output that every branch returns as the same
    operand replaced by that operand, at any depth, inner conds first: the
    program lax.cond and lax.switch stage ("prune passthrough outputs",
    jax/_src/lax/control_flow/conditionals.py, from jax 0.6.0; spec.cond
    does it too). A reduction step (a branch's equation bypassed) can leave
    such an output, and then JAX's program is not the candidate (found by a
    release campaign on 0.6.2, c86d6c6549: a nested cond reduced to
    passthroughs, whose reproducer JAX saved nothing for)."""
    eqns, env = [], {}
    read = lambda a: env.get(a.id, a) if isinstance(a, Var) else a  # noqa: E731
    for e in prog.eqns:
        params = e.params if _defined_by_rules(e) else map_subprograms(e.params, passthroughs_pruned)
        e = Eqn(e.primitive, [read(a) for a in e.inputs], e.outputs, params, why=e.why,
                residual_outputs=e.residual_outputs)
        if e.primitive.name == "cond":
            e, forwarded = _cond_passthroughs_pruned(e)
            env.update(forwarded)
        eqns.append(e)
    return Program(prog.inputs, eqns, [read(a) for a in prog.outputs], input_names=prog.input_names)


def _cond_passthroughs_pruned(e: Eqn) -> tuple[Eqn, dict]:
    """A cond without the outputs every branch forwards from one operand,
    and {output id: that operand}."""
    branches = e.params["branches"]
    in_fwd = passthroughs(branches)
    if all(f is None for f in in_fwd):
        return e, {}
    keep = [f is None for f in in_fwd]
    pruned = tuple(Program(b.inputs, b.eqns, [o for o, k in zip(b.outputs, keep) if k], input_names=b.input_names)
                   for b in branches)
    operands = e.inputs[1:]
    forwarded = {v.id: operands[f] for v, f in zip(e.outputs, in_fwd) if f is not None}
    return Eqn(e.primitive, e.inputs, [v for v, k in zip(e.outputs, keep) if k], dict(e.params, branches=pruned),
               why=e.why, residual_outputs=e.residual_outputs), forwarded


def _fails(fails, candidate) -> bool:
    try:
        return bool(fails(candidate))
    except Exception:       # a candidate the check cannot take: not the same failure
        return False


def candidates(prog: Program, *, keep_signature: bool = False, keep_values: bool = False) -> Iterator[Program]:
    """The one-step reductions of `prog`, the likely largest first; with
    `keep_values` only those that compute the same outputs."""
    yield dce(prog, prune_inputs=not keep_signature)[0]
    pruned = functools.partial(_newly_dead_removed, was_read=_read(prog), prune_inputs=not keep_signature)
    for k in range(len(prog.eqns) - 1, -1, -1):
        if not any(v.id in _read(prog) for v in prog.eqns[k].outputs) and not has_effects(prog.eqns[k]):
            yield pruned(Program(prog.inputs, prog.eqns[:k] + prog.eqns[k + 1:], prog.outputs,
                                 input_names=prog.input_names))
    if not keep_signature and len(prog.outputs) > 1:
        for i in range(len(prog.outputs)):
            yield pruned(Program(prog.inputs, prog.eqns, prog.outputs[:i] + prog.outputs[i + 1:],
                                 input_names=prog.input_names))
    for k in range(len(prog.eqns) - 1, -1, -1):
        if prog.eqns[k].primitive.name in INLINED:
            yield _inlined(prog, k)
        elif prog.eqns[k].primitive.name == "cond" and not keep_values:
            yield from (pruned(_inlined(prog, k, branch)) for branch in range(len(prog.eqns[k].params["branches"])))
    for k in range(len(prog.eqns) - 1, -1, -1):
        if not keep_values:
            yield from map(pruned, _bypassed(prog, k))
    for k in range(len(prog.eqns) - 1, -1, -1):
        if not keep_signature:
            yield pruned(_cut(prog, k))
        elif not keep_values:
            yield from map(pruned, _made_constant(prog, k))
    for k, e in enumerate(prog.eqns):
        if _defined_by_rules(e):
            continue
        for i, (_, sub) in enumerate(subprograms(e.params)):
            for smaller in candidates(sub, keep_signature=True,
                                      keep_values=keep_values or e.primitive in loops_until_a_value):
                yield _with_subprogram(prog, k, i, smaller)


def _defined_by_rules(e: Eqn) -> bool:
    """Whether `e` (a custom_jvp or custom_vjp call) is defined by rules
    besides its body: its JVP, or fwd and bwd, traced from Python functions
    the reducer cannot shrink along with it. Its body is left whole:
    shrinking it alone gives a function whose rules disagree with it (a
    custom_vjp whose primal is the identity and whose fwd computes sin: a
    nightly finding, ab97f5437e, reduced so, where remat3, running the
    primal and not the fwd rule inside a checkpoint, then differs by
    design)."""
    return any(hasattr(v, "map_programs") for v in e.params.values())


def _substituted(prog: Program, k: int, env: dict, eqns: list) -> Program:
    """`prog` with equation k replaced by `eqns`, and every later read of
    a variable in `env` reading its atom instead."""
    read = lambda a: env.get(a.id, a) if isinstance(a, Var) else a  # noqa: E731
    later = [Eqn(e.primitive, [read(a) for a in e.inputs], e.outputs, e.params, why=e.why,
                 residual_outputs=e.residual_outputs) for e in prog.eqns[k + 1:]]
    return Program(prog.inputs, prog.eqns[:k] + eqns + later, [read(a) for a in prog.outputs],
                   input_names=prog.input_names)


def _read(prog: Program) -> frozenset:
    """The ids of the values `prog`'s equations and outputs read."""
    return frozenset(a.id for a in [x for e in prog.eqns for x in e.inputs] + list(prog.outputs)
                     if isinstance(a, Var))


def _newly_dead_removed(prog: Program, was_read: frozenset, prune_inputs: bool) -> Program:
    """`prog` without the equations a step left dead: nothing reads their
    outputs where something read one before (`was_read`), transitively;
    an equation dead before the step stays, and so does what it reads.
    With `prune_inputs`, inputs nothing reads are dropped."""
    eqns = list(prog.eqns)
    while True:
        read = _read(Program(prog.inputs, eqns, prog.outputs))
        kept = [e for e in eqns if has_effects(e) or any(v.id in read for v in e.outputs)
                or not any(v.id in was_read for v in e.outputs)]
        if len(kept) == len(eqns):
            break
        eqns = kept
    inputs, names = prog.inputs, prog.input_names
    if prune_inputs:
        used = [v.id in read for v in inputs]
        inputs = [v for v, u in zip(inputs, used) if u]
        names = names and tuple(n for n, u in zip(names, used) if u)
    return Program(inputs, eqns, prog.outputs, input_names=names)


def _bypassed(prog: Program, k: int) -> Iterator[Program]:
    """Equation k with one output replaced by an operand of its type."""
    e = prog.eqns[k]
    for v in e.outputs:
        for a in e.inputs:
            if a.type == v.type:
                yield _substituted(prog, k, {v.id: a}, [e])
                break


def _cut(prog: Program, k: int) -> Program:
    """Equation k's outputs read as new program inputs instead."""
    e = prog.eqns[k]
    fresh = [Var(v.type) for v in e.outputs]
    cut = _substituted(prog, k, {v.id: f for v, f in zip(e.outputs, fresh)}, [e])
    names = None if prog.input_names is None else prog.input_names + tuple(f"cut{f.id}" for f in fresh)
    return Program(cut.inputs + fresh, cut.eqns, cut.outputs, input_names=names)


def _made_constant(prog: Program, k: int) -> Iterator[Program]:
    """Equation k with one output replaced by a constant of its type: ones,
    or zeros for an integer or bool (a cond's index: either branch). In a
    sub-program, whose inputs stay, this is what cuts an equation."""
    e = prog.eqns[k]
    for v in e.outputs:
        values = (1, 0) if v.type.dtype.kind in "biu" else (1,)
        for value in values:
            constant = Literal(np.full(v.type.shape, value, v.type.dtype), v.type)
            yield _substituted(prog, k, {v.id: constant}, [e])


def _inlined(prog: Program, k: int, branch: int | None = None) -> Program:
    """Equation k (a jit or a checkpoint) replaced by its body's equations;
    a cond by its `branch`'s, on its operands."""
    e = prog.eqns[k]
    body = e.params["jaxpr"] if branch is None else e.params["branches"][branch]
    env = {v.id: a for v, a in zip(body.inputs, e.inputs if branch is None else e.inputs[1:])}
    eqns = _clone(body.eqns, env)
    outs = [env.get(a.id, a) if isinstance(a, Var) else a for a in body.outputs]
    return _substituted(prog, k, {v.id: a for v, a in zip(e.outputs, outs)}, eqns)


def _with_subprogram(prog: Program, k: int, i: int, sub: Program) -> Program:
    """`prog` with the i-th sub-program of equation k (in `subprograms`
    order) replaced by `sub`."""
    e = prog.eqns[k]
    key, _ = subprograms(e.params)[i]
    params = dict(e.params)
    if isinstance(key, tuple):          # the j-th program of a tuple-valued param (cond's branches)
        name, j = key
        progs = list(params[name])
        progs[j] = sub
        params[name] = type(params[name])(*progs) if hasattr(params[name], "_fields") else tuple(progs)
    else:
        params[key] = sub
    eqn = Eqn(e.primitive, e.inputs, e.outputs, params, why=e.why, residual_outputs=e.residual_outputs)
    return Program(prog.inputs, prog.eqns[:k] + [eqn] + prog.eqns[k + 1:], prog.outputs,
                   input_names=prog.input_names)
