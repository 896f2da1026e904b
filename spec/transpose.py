"""Reverse mode: transpose a linear program.

`transpose(prog, linear)` turns a program that is linear in the inputs
marked `linear` into its backward pass: (non-linear inputs, output
cotangents) -> cotangents of the linear inputs. As in JAX's
`backward_pass`: equations that do not depend on linear inputs are replayed
forward first; then the linear equations are visited in reverse, each
primitive's transpose rule maps its output cotangent to input cotangents,
and cotangents of a value read several times are summed with `add_any`.
Cotangents are symbolic zeros (`Zero`) until something flows into them.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from spec.core import (UndefinedPrimal, Zero, bind, building, has_effects, instantiate,
                       transpose_rules)
from spec.ir import Program, Var
from spec.prims_elementwise import add_any
from spec.core import eval_program_traced
from spec.partial_eval import PartialEval, partial_eval


class TransposeError(TypeError):
    pass


def add_tangents_or_zero(a, b):
    """ad.add_tangents: a symbolic zero is the other term; else add_any
    (cotangents accumulate alike)."""
    if isinstance(a, Zero):
        return b
    if isinstance(b, Zero):
        return a
    return add_any(a, b)


def transpose_traced(prog: Program, linear: Sequence[bool], nonlinear_args, cts_out):
    """Emit the backward pass into the current trace; returns the cotangents
    (Tracers or Zeros) of the linear inputs.

    First the program is partially evaluated with the linear inputs unknown
    (as JAX's `_transpose_jaxpr` does with `trace_to_jaxpr_nounits`): the
    non-linear part, including the non-linear outputs of a checkpoint or
    call that also has linear outputs, is replayed forward, and only the
    purely linear rest is transposed."""
    return transpose_split(split_nonlinear(prog, linear), prog, linear, nonlinear_args, cts_out)


def split_nonlinear(prog: Program, linear: Sequence[bool]) -> PartialEval:
    """`prog` split with its linear inputs unknown: the non-linear part
    (known), replayed forward, and the linear rest (staged)."""
    return partial_eval(prog, linear, instantiate=True, linearize=True, literals_are_residuals=False)


def transpose_split(pe: PartialEval, prog: Program, linear: Sequence[bool], nonlinear_args, cts_out):
    """`transpose_traced` of `prog` given its split `pe` (`split_nonlinear`)."""
    n_known = len(prog.outputs) - sum(pe.out_unknowns)
    known_vals = eval_program_traced(_without_hoisted_effects(pe.known, prog, pe.staged), *nonlinear_args)
    res_vals = known_vals[n_known:]
    n_res = len(pe.residuals)
    return _transpose_linear(pe.staged, [False] * n_res + [True] * sum(linear), res_vals, cts_out)


def _without_hoisted_effects(known: Program, prog: Program, staged: Program) -> Program:
    """JAX's backward_pass transposes a checkpoint of the linear program
    whole (ad_checkpoint.remat_transpose), so an effect of its non-linear
    part (a debug print) runs once, inside the transposed checkpoint. The
    split above hoists that part out to replay it: the hoisted copies of
    effectful equations whose outputs nothing the replay returns reads
    are dropped (an output-less print; a cond printing in a branch, whose
    value the staged checkpoint recomputes: JAX prints twice under
    jax.grad of a checkpoint, forward and backward, measured on 0.10.2);
    the program's own non-linear effects stay. Where the staged part has
    no effect, nothing replays one, and a copy is the only one: a print in
    a jit in a checkpoint's body, which transposing the staged checkpoint
    replays through the jit's partial evaluation (a copy of the call), as
    JAX's transposed checkpoint does (found by a pristine campaign on
    0.10.2, 54f2840b6b: JAX then saves what it prints at second order)."""
    if not any(has_effects(e) for e in staged.eqns):
        return known
    own = {id(e) for e in prog.eqns}
    live = {a.id for a in known.outputs if isinstance(a, Var)}
    dropped = set()
    for e in reversed(known.eqns):
        if id(e) not in own and has_effects(e) and not any(v.id in live for v in e.outputs):
            dropped.add(id(e))
        elif id(e) in own or any(v.id in live for v in e.outputs):
            live.update(a.id for a in e.inputs if isinstance(a, Var))
    # dead hoisted code reading a dropped copy's outputs goes with it (a sum
    # of a printing jit's output that only a dropped printing cond's index
    # reads: found by a pristine nightly, b11c33dfcd)
    gone = set()
    for e in known.eqns:
        if id(e) in dropped or (id(e) not in own and not any(v.id in live for v in e.outputs)
                                and any(isinstance(a, Var) and a.id in gone for a in e.inputs)):
            dropped.add(id(e))
            gone.update(v.id for v in e.outputs)
    return known if not dropped else replace(known, eqns=[e for e in known.eqns if id(e) not in dropped])


def _transpose_linear(prog: Program, linear: Sequence[bool], nonlinear_args, cts_out):
    env: dict[int, object] = {}
    linear_vars: set[int] = set()
    it = iter(nonlinear_args)
    for v, lin in zip(prog.inputs, linear):
        if lin:
            linear_vars.add(v.id)
        else:
            env[v.id] = next(it)

    def read(a):
        if isinstance(a, Var):
            return UndefinedPrimal(a.type) if a.id in linear_vars else env[a.id]
        return a.value

    linear_eqns = []
    for e in prog.eqns:          # forward: replay what does not depend on linear inputs
        if any(isinstance(a, Var) and a.id in linear_vars for a in e.inputs):
            linear_eqns.append(e)
            linear_vars.update(v.id for v in e.outputs)
        else:
            outs = bind(e.primitive, *map(read, e.inputs), **e.params)
            for v, o in zip(e.outputs, outs if e.primitive.multiple_results else [outs]):
                env[v.id] = o

    ct_env: dict[int, object] = {}
    for a, ct in zip(prog.outputs, cts_out):
        if isinstance(a, Var) and a.id in linear_vars:
            ct_env[a.id] = add_tangents_or_zero(ct_env.get(a.id, Zero(a.type)), ct)

    for e in reversed(linear_eqns):   # backward
        cts = [ct_env.pop(v.id, Zero(v.type)) for v in e.outputs]
        if all(isinstance(c, Zero) for c in cts) and not has_effects(e):
            continue    # JAX's backward_pass transposes it anyway, to no effect
        rule = transpose_rules.get(e.primitive)
        if rule is None:
            raise TransposeError(f"primitive {e.primitive.name!r} is not linear "
                                 "(it has no transpose rule) but reads a linear value")
        cts_in = rule(cts if e.primitive.multiple_results else cts[0],
                      *map(read, e.inputs), **e.params)
        for a, ct in zip(e.inputs, cts_in):
            if ct is None or not (isinstance(a, Var) and a.id in linear_vars):
                continue
            ct_env[a.id] = add_tangents_or_zero(ct_env.get(a.id, Zero(a.type)), ct)

    return [ct_env.get(v.id, Zero(v.type)) for v, lin in zip(prog.inputs, linear) if lin]


def transpose(prog: Program, linear: Sequence[bool]) -> Program:
    """Backward program: (non-linear inputs..., output cotangents...) ->
    cotangents of the linear inputs (zeros instantiated)."""
    linear = list(linear)
    if len(linear) != len(prog.inputs):
        raise TransposeError(f"linear has {len(linear)} entries for {len(prog.inputs)} inputs")
    with building() as b:
        nonlin = [b.new_input(v.type) for v, lin in zip(prog.inputs, linear) if not lin]
        cts_out = [b.new_input(t) for t in prog.out_types]
        cts = transpose_traced(prog, linear, nonlin, cts_out)
        return b.build(nonlin + cts_out, [instantiate(c) for c in cts])
