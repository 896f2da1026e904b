"""Reverse-mode AD composed from the pieces:

    linearize = jvp, then partial_eval (primals known, tangents unknown)
    vjp       = linearize, then transpose the linear (staged) program
    grad      = vjp with output cotangent 1.0, as one program

The residuals of `linearize` are what a backward pass reads from the
forward pass: `saved_residuals` reports them with their provenance.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from spec.core import (building, eval_program_traced, is_differentiable,
                       jaxpr_trace_rules, linearizes_in_order, zeros_like_type)
from spec.evaluate import evaluate
from spec.ir import ArrayType, Program, Var, float0
from spec.jvp import LINEARIZATION_ERROR, jvp_program
from spec.partial_eval import Residual, partial_eval
from spec.transpose import transpose
from spec.semantics import semantics
from spec.partial_eval import dce


@dataclass
class Linearized:
    """forward:  primals -> primal outputs + residuals
    linear:   residuals + tangents (of float inputs) -> tangents (of float outputs)
    forward_traced: `forward` with its dead code, as a trace binds it"""
    forward: Program
    linear: Program
    residuals: list[Residual]
    diff_inputs: list[bool]      # which inputs have a tangent
    diff_outputs: list[bool]     # which outputs have a tangent
    forward_traced: Program | None = None


def linearize(prog: Program, diff: Sequence[bool] | None = None) -> Linearized:
    """Linearize `prog` at symbolic primals (program to programs).

    `diff[i]` (default: every float input) says which inputs are
    differentiated; the others are held constant (a zero tangent), as the
    arguments a JAX function closes over rather than differentiates
    (`jax.vjp(lambda d: f(d, w), x)`, `jax.grad(f, argnums)`): no tangent
    equation reads a value for their sake, so they change which values are
    residuals and the order of the rest."""
    diff_in = _diff_inputs(prog, diff)
    diff_out = [is_differentiable(t) for t in prog.out_types]
    jp, out_nz = _jvp_in_order(prog, diff_in)
    n_in, n_tan = len(prog.inputs), sum(diff_in)
    n_out, n_tan_out = len(prog.outputs), sum(out_nz)
    pe = partial_eval(jp, [False] * n_in + [True] * n_tan,
                      instantiate=[False] * n_out + [True] * n_tan_out,
                      linearize=True)
    if any(pe.out_unknowns[:n_out]):
        # ad.linearize_from_jvp's check, word for word: a JVP rule whose
        # primal outputs depend on tangents (reduce_window's) has no linearization
        raise ValueError(LINEARIZATION_ERROR)
    # the forward program returns the primal outputs and the residuals (a
    # tangent output computed from primals alone reaches the linear program
    # as a residual)
    n_res = len(pe.residuals)
    forward, forward_traced = (Program(k.inputs, k.eqns, k.outputs[:n_out] + k.outputs[len(k.outputs) - n_res:],
                                       input_names=k.input_names) for k in (pe.known, pe.known_traced))
    # Tangent outputs that are symbolic zeros are created in the linear
    # program itself (as JAX's linearize does), never saved.
    with building() as b:
        res = [b.new_input(r.type) for r in pe.residuals]
        tangents = [b.new_input(t) for t, d in zip(prog.in_types, diff_in) if d]
        nz_outs = iter(eval_program_traced(pe.staged, *res, *tangents))
        outs = [next(nz_outs) if nz else zeros_like_type(t)
                for t, d, nz in zip(prog.out_types, diff_out, out_nz + [False] * 0) if d]
        linear = b.build(res + tangents, outs)
    return Linearized(forward, linear, pe.residuals, diff_in, diff_out, forward_traced)


def _jvp_in_order(prog: Program, diff_in: list[bool]):
    """The JVP program `linearize` partially evaluates, or the error JAX
    raises first where a JVP rule raises NotImplementedError. JAX's direct
    linearization (ad.LinearizeTrace, jax_use_direct_linearize, on from jax
    0.7) linearizes the equations in order, each one's JVP partially
    evaluated (asking a checkpoint's policy) before the next one's JVP
    runs: an earlier equation whose linearization raises (a policy that
    refuses to be combined, asked) raises first (found by a pristine
    campaign, 084625a3cb: a save_from_both_policies of an offload policy
    before a cond whose branch's igamma has a second derivative)."""
    try:
        return jvp_program(prog, diff_in, instantiate_zeros=False,
                           known_tangents_are_zero=semantics().direct_linearization)
    except NotImplementedError:
        k = next(k for k in range(len(prog.eqns) + 1) if not _has_jvp(_prefix(prog, k + 1), diff_in))
        if k:
            linearize(_prefix(prog, k), diff_in)     # raises what linearizing them raises
        if semantics().direct_linearization and prog.eqns[k].primitive in linearizes_in_order:
            _linearize_subprograms(prog, k, diff_in)
        raise


def _linearize_subprograms(prog: Program, k: int, diff_in: list[bool]) -> None:
    """Linearize the sub-programs of `prog.eqns[k]` (a primitive in
    `linearizes_in_order`) with its operands' nonzero tangents, raising
    what the first one raises: an equation in a jit's body whose
    linearization raises comes before a later missing derivative there
    (found by a pristine campaign, 17239663d5: a save_from_both_policies of
    an offload policy in a jit before an igammac, under linearize o vmap o
    jvp)."""
    eqn = prog.eqns[k]
    _, defined_nz = jvp_program(_prefix(prog, k), diff_in, instantiate_zeros=False,
                                known_tangents_are_zero=True)
    nonzero = {v.id for v, d in zip(prog.inputs, diff_in) if d}
    nonzero.update(v.id for v, nz in zip(_prefix(prog, k).outputs, defined_nz) if nz)
    in_nonzero = [isinstance(a, Var) and a.id in nonzero for a in eqn.inputs]
    jaxpr_trace_rules[eqn.primitive](eqn, in_nonzero, lambda sub, nz: linearize(sub, nz))


def _prefix(prog: Program, k: int) -> Program:
    """The first k equations of `prog`, returning every value they define."""
    eqns = prog.eqns[:k]
    return Program(prog.inputs, eqns, [v for e in eqns for v in e.outputs], input_names=prog.input_names)


def _has_jvp(prog: Program, diff_in: list[bool]) -> bool:
    try:
        jvp_program(prog, diff_in, instantiate_zeros=False, known_tangents_are_zero=True)
    except NotImplementedError:
        return False
    return True


def _diff_inputs(prog: Program, diff: Sequence[bool] | None) -> list[bool]:
    """Which inputs of `prog` have a tangent: the float ones `diff` marks."""
    if diff is None:
        return [is_differentiable(t) for t in prog.in_types]
    if len(diff) != len(prog.inputs):
        raise ValueError(f"diff has {len(diff)} entries for {len(prog.inputs)} inputs")
    return [bool(d) and is_differentiable(t) for d, t in zip(diff, prog.in_types)]


def vjp(prog: Program, *primals):
    """(outputs, vjp_fn, residuals): vjp_fn maps cotangents of the float
    outputs to cotangents of all inputs (float0 zeros for int/bool inputs);
    residuals carry their values."""
    lin = linearize(prog)
    vals = evaluate(lin.forward, *primals)
    n_out = len(prog.outputs)
    outs, res_vals = vals[:n_out], vals[n_out:]
    n_res = len(lin.residuals)
    backward = transpose(lin.linear, [False] * n_res + [True] * sum(lin.diff_inputs))
    diff_out_types = [t for t, d in zip(prog.out_types, lin.diff_outputs) if d]

    def vjp_fn(*cts):
        if len(cts) != len(diff_out_types):
            raise TypeError(f"vjp_fn takes {len(diff_out_types)} cotangents (one per float output), got {len(cts)}")
        cts_in = iter(evaluate(backward, *res_vals, *cts))
        return [next(cts_in) if d else np.zeros(t.shape, float0)
                for t, d in zip(prog.in_types, lin.diff_inputs)]

    residuals = [replace(r, value=v) for r, v in zip(lin.residuals, res_vals)]
    return outs, vjp_fn, residuals


def saved_residuals(prog: Program, *types: ArrayType) -> list[Residual]:
    """The residuals a backward pass of `prog` reads, in JAX's order (as
    `jax.ad_checkpoint.saved_residuals` lists them)."""
    if types and list(types) != prog.in_types:
        raise TypeError(f"program takes {prog.in_types}, got {list(types)}")
    lin = linearize(prog)
    if semantics().direct_linearization:
        return lin.residuals
    # JVP then partial evaluation: a tangent output computed from primals
    # alone is returned as it is (ad.linearize's known `out_pvals`), no
    # leaf of the linear function
    read = {a.id for e in lin.linear.eqns for a in e.inputs if isinstance(a, Var)}
    return [r for r, v in zip(lin.residuals, lin.linear.inputs) if v.id in read]


def vjp_program(prog: Program, diff: Sequence[bool] | None = None) -> Program:
    """The whole reverse pass as one program: (primals..., cotangents of the
    float outputs...) -> cotangents of the differentiated inputs (`diff`, as
    in `linearize`: by default every float input). Composable with every
    other transformation (jvp of it is forward-over-reverse). Dead code
    removed: `traced_vjp_program` is the program as JAX traces it."""
    return dce(traced_vjp_program(prog, diff))[0]


def traced_vjp_program(prog: Program, diff: Sequence[bool] | None = None) -> Program:
    """`vjp_program` as `jax.make_jaxpr` of a function calling jax.vjp and
    its pullback traces it: the forward pass whole, the primal outputs the
    pullback does not read included (dead code that a further
    differentiation of the program still sees: the order in which a jit's
    residuals are first read depends on it)."""
    lin = linearize(prog, diff)
    n_res = len(lin.residuals)
    backward = transpose(lin.linear, [False] * n_res + [True] * sum(lin.diff_inputs))
    n_out = len(prog.outputs)
    with building() as b:
        ins = [b.new_input(t) for t in prog.in_types]
        cts = [b.new_input(t) for t, d in zip(prog.out_types, lin.diff_outputs) if d]
        fwd = eval_program_traced(lin.forward_traced, *ins)
        outs = eval_program_traced(backward, *fwd[n_out:], *cts)
        names = (prog.input_names + tuple(f"ct[{i}]" for i in range(len(cts)))
                 if prog.input_names else None)
        return b.build(ins + cts, outs, input_names=names)


def grad(prog: Program, argnums: int | Sequence[int] = 0) -> Program:
    """The gradient program of a program with one scalar float output:
    same inputs, outputs d out / d inputs[argnums]; the other inputs are
    held constant (linearized with zero tangents), as jax.grad holds them.
    Dead code removed: `traced_grad` is the program as JAX traces it."""
    return dce(traced_grad(prog, argnums))[0]


def traced_grad(prog: Program, argnums: int | Sequence[int] = 0) -> Program:
    """`grad` as `jax.make_jaxpr(jax.grad(f))` traces it: the forward pass
    whole, the value of f included (dead code, see `traced_vjp_program`)."""
    if len(prog.outputs) != 1 or prog.out_types[0].shape != () or not is_differentiable(prog.out_types[0]):
        raise TypeError(f"grad needs a program with one scalar float output, got {prog.out_types}")
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not is_differentiable(prog.in_types[i]):
            raise TypeError(f"grad with respect to input {i} of type {prog.in_types[i]} (not a float)")
    # jax.grad differentiates argnums only: the other arguments are closed
    # over, zero tangents (jax/_src/api.py:536-539 in 0.10.2:
    # `f_partial, dyn_args = argnums_partial2(...)`; `vjp(f_partial, *dyn_args)`)
    lin = linearize(prog, [i in nums for i in range(len(prog.inputs))])
    n_res = len(lin.residuals)
    backward = transpose(lin.linear, [False] * n_res + [True] * sum(lin.diff_inputs))
    with building() as b:
        ins = [b.new_input(t) for t in prog.in_types]
        fwd = eval_program_traced(lin.forward_traced, *ins)
        res = fwd[1:]
        one = np.ones((), prog.out_types[0].dtype)
        cts = iter(eval_program_traced(backward, *res, one))
        all_cts = [next(cts) if d else None for d in lin.diff_inputs]
        outs = [all_cts[i] for i in nums]
        return b.build(ins, outs, input_names=prog.input_names)
