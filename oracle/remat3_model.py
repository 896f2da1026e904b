"""The remat3 model: jax_remat3's differentiation of a checkpoint (jax
0.10.2, jax/_src/interpreters/remat.py and hijax.py), written as spec
rules, defect by defect (REMAT3_DEFECTS), so that a known divergence can
say JAX's answer is exactly the model's (oracle/divergences.py).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any


import spec
from spec import policies as sp
from spec.ir import ArrayType, Eqn, Program, Var, map_subprograms, subprograms
from spec.remat import policy_saveable, remat_of_body_jvp, remat_p

from oracle.program_variants import (MODEL_PRIMITIVES, zeros_read_linearly, is_checkpoint, map_params,
                                     map_policies, unused_checkpoint_outputs_out, zero_tangents)
from spec import core, ops
from spec.core import Primitive, Tracer, Zero, bind, building, instantiate, is_undefined
from spec.ir import is_float
from spec.jvp import dependence_rules, jvp_traced, linearizing, output_dependence
from spec.partial_eval import Source, constant_key, looked_through_value, source_of, source_rules
from spec.prims_call import _call_partial_eval, call_p
from spec.prims_control import _cond_partial_eval, cond_p
from spec.prims_scan import _scan_partial_eval, scan_p
from spec.remat import ROUNDED, _clone
from spec.prims_conv import optimization_barrier_p, reduce_precision_p
import ml_dtypes
import numpy as np


def producer_sources(prog: Program) -> list:
    """The spec's residuals with each "output of remat2" (a value saved out
    of a checkpoint nested in a checkpoint, forwarded through the inner
    checkpoint's known half) named by the equation that produced it inside
    the nested checkpoint, or by the argument it forwards."""
    lin = spec.linearize(prog)

    def resolve(atom, p: Program, outside: bool):
        """(the value saved, its provenance); `outside`: a residual that an
        equation outside every checkpoint reads."""
        atom = looked_through_value(atom, {v.id: e for e in p.eqns for v in e.outputs})
        for e in p.eqns:
            for k, v in enumerate(e.outputs):
                if v is atom and is_checkpoint(e) and k < len(e.outputs) - e.residual_outputs:
                    # the nested checkpoint's own output: remat3 names its
                    # hi-primitive, unless it is an input the body returns as
                    # it is and only a checkpoint's backward pass reads it: the
                    # checkpoint recomputes it there from what its policy saved,
                    # named by what made it (found by a pristine campaign,
                    # c8af8a5faa: a name through an identity checkpoint). Read
                    # outside, it is the value remat3's forward, the body as
                    # written, bound: the hi-primitive's output (741433da06)
                    primal = _inline_primal(e)     # a custom call's: what its primal computed
                    body = e.params["jaxpr"] if primal is None else primal
                    i = next((i for i, bv in enumerate(body.inputs) if bv is body.outputs[k]), None)
                    if i is not None and (primal is not None or not outside):
                        return resolve(e.inputs[i], p, outside)
                    if primal is not None:
                        return resolve(body.outputs[k], body, outside)
                    return atom, Source("output", primitive="call_hi_primitive")
                if v is atom and e.primitive.name == "call":
                    # a jit's output that is its input, forwarded: the value
                    # saved is that input (found by a pristine nightly,
                    # 00adf2850a: a name through a jit in a nested checkpoint)
                    body = e.params["jaxpr"]
                    i = next((i for i, bv in enumerate(body.inputs) if bv is body.outputs[k]), None)
                    if i is not None:
                        return resolve(e.inputs[i], p, outside)
                if v is atom and is_checkpoint(e):
                    # what the body returns there, followed out again where it
                    # is an input of the body (at any depth: found by a
                    # pristine campaign, b5c7023ba6, a name saved through two
                    # nested checkpoints)
                    body = e.params["jaxpr"]
                    value, src = resolve(body.outputs[k], body, outside)
                    for i, bv in enumerate(body.inputs):
                        if bv is value:
                            return resolve(e.inputs[i], p, outside)
                    return value, src
        return atom, source_of(atom, p)
    out, seen = [], set()
    producers = {v.id: e for e in lin.forward.eqns for v in e.outputs}
    outside = _read_outside_checkpoints(lin.linear, len(lin.residuals))
    for r, read_outside in zip(lin.residuals, outside):
        # the value saved_residuals names (through a rounding: resolve looks through it too)
        src, value = r.source, looked_through_value(r.var, producers)
        if src.kind == "output" and src.primitive == _plt().name:
            # the model's primal_left_tangent_right(saved, recomputed) is `saved`,
            # named by what made it (found by a pristine nightly, 1d125142a8: a
            # name of a stop_gradient'ed value, bound whole without tangents)
            value = producers[value.id].inputs[0]
            src = source_of(value, lin.forward)
        forwarded = _forwarded_through_a_custom_call(producers.get(getattr(value, "id", None)), value)
        if forwarded is not None:
            value, src = forwarded, source_of(forwarded, lin.forward)
        if src.kind == "output" and src.primitive == "remat2":
            value, src = resolve(r.var, lin.forward, read_outside)
            if id(value) in seen:      # an input the nested checkpoint forwards, saved already:
                continue               # remat3 saves the one value once
        seen.add(id(value))
        out.append((str(r.type), str(src)))
    return out


def _forwarded_through_a_custom_call(e: Eqn | None, value) -> object | None:
    """The input of jit equation `e` that its output `value` is, where the
    jit's body returns it as what the model's custom-call wrapper (a
    RunsInline checkpoint) saved of its input: remat3 runs the custom call
    inline, so the jit merely forwards its input, which is what is saved
    (found by a pristine nightly, 5d9f5eff73: a name through a jit holding
    a custom_jvp of sin); else None."""
    if e is None or e.primitive.name != "call":
        return None
    body = e.params["jaxpr"]
    out = body.outputs[next(k for k, v in enumerate(e.outputs) if v is value)]
    for w in body.eqns:
        if not is_checkpoint(w) or _inline_primal(w) is None:
            continue
        for j, v in enumerate(w.outputs):
            inner = w.params["jaxpr"]
            if v is out and inner.outputs[j] in inner.inputs:
                x = w.inputs[inner.inputs.index(inner.outputs[j])]
                return next((a for a, b in zip(e.inputs, body.inputs) if b is x), None)
    return None


def _read_outside_checkpoints(linear: Program, n_residuals: int) -> list[bool]:
    """Which of a linear program's residuals (its first inputs) an equation
    other than a checkpoint reads at its top level."""
    index = {v.id: k for k, v in enumerate(linear.inputs[:n_residuals])}
    read = [False] * n_residuals
    for e in linear.eqns:
        if not is_checkpoint(e):
            for a in e.inputs:
                if isinstance(a, Var) and a.id in index:
                    read[index[a.id]] = True
    return read


# -- how remat3 differentiates a checkpoint (RematTraced, jax 0.10.2) --------
# `lin` linearizes the body as a whole (api.linearize of the rematerialized
# function: a tangent a rule computes from primals alone is a symbolic
# zero inside), and `linearized` instantiates the input tangents
# (`map(ad_util.instantiate, tangents)  # TODO`); to the enclosing
# computation every output tangent is a value (the hi-primitive's
# linearization is opaque). remat2's remat_jvp is a plain jvp_jaxpr of the
# body with symbolic zeros in and out. The model is a checkpoint primitive
# of the oracle's own, never registered in spec.primitives, whose JVP rule
# does what remat3 does; its other rules are remat's.

def _complex_like(prim, base) -> None:
    """The model's primitive holds for complex values where its spec
    primitive `base` does (spec.core.complex_rules), or where it has no
    base (a zero, a choice of operands: no arithmetic)."""
    if base is None or base in core.complex_rules:
        core.complex_rules.add(prim)


def _model_of(base, partial_eval_rule):
    """A primitive of the model's own, named as `base` is, with `base`'s
    rules except its partial-eval rule, `partial_eval_rule`; (re)registered
    when a test has restored the rule tables since."""
    prim = MODEL_PRIMITIVES.get(base.name)
    if prim is not None and prim in core.partial_eval_rules:
        return prim
    prim = prim or core.Primitive(base.name, base.multiple_results)
    core.param_specs[prim] = core.param_specs[base]
    for table in (core.shape_rules, core.eval_rules, core.dce_rules, core.jvp_rules, dependence_rules,
                  source_rules, core.cost_rules):
        if base in table:
            table[prim] = table[base]
    core.partial_eval_rules[prim] = partial_eval_rule
    core.extension_primitives.add(prim)
    _complex_like(prim, base)
    MODEL_PRIMITIVES[base.name] = prim
    return prim


def _remat3_scan():
    """The model's scan: scan's rules, except that split inside a checkpoint
    it hoists nothing and its known half is the scan itself (jax_remat3's
    `_scan_remat`: the forward scan returns every residual as an extra,
    stacked output), so saved values are "output of scan", never "output
    of closed_call"."""
    return _model_of(scan_p, lambda *a, **k: _scan_partial_eval(*a, **k, hoist=False))


def _remat3_call():
    """The model's call (jit): call's rules, except that split inside a
    checkpoint its constants are residuals, returned by the known call
    (jax_remat3's `_pjit_remat`: remat.remat_jaxpr makes every constant the
    rematerialization reads one of `rem_consts`, outputs of the forward
    jit), where remat2's closed_call_partial_eval_custom_rule closes both
    halves over them and saves nothing."""
    return _model_of(call_p, _remat3_call_partial_eval)


def _remat3_call_partial_eval(eqn: Eqn, in_unknowns, in_inst, *, saveable, linearize):
    """`_pjit_remat`'s split (constants saved), with its forward jit's
    outputs that are its inputs forwarded where a tangent reaches the jit:
    remat3 binds the forward jit on the enclosing linearization's trace,
    whose jit rule (`_pjit_linearize`, `pe._jaxpr_forwarding`) drops such
    an output, so what reads it reads the input, and a value saved there is
    named by that input's producer (found by a pristine nightly,
    2e70fb8063: a dot's output a jit returns, `output of dot_general`).
    With every tangent zero the jit is bound as it is (LinearizeTrace
    binds it on its parent), forwarding nothing."""
    known, staged, out_unknowns, staged_outputs, recomputed, subst = _call_partial_eval(
        eqn, in_unknowns, in_inst, saveable=saveable, linearize=linearize, constants_shared=False)
    if any(in_unknowns) and known:
        call = known[0]
        body = call.params["jaxpr"]
        body_in = {v.id: a for v, a in zip(body.inputs, call.inputs)}
        n_known = out_unknowns.count(False)
        subst = dict(subst) | {v.id: body_in[o.id] for v, o in zip(call.outputs[:n_known], body.outputs)
                               if isinstance(o, Var) and o.id in body_in}
    return known, staged, out_unknowns, staged_outputs, recomputed, subst


def _remat3_cond():
    """The model's cond: cond's rules, except that split inside a checkpoint
    its branches' constants are residuals, outputs of the known cond
    (jax_remat3's `_cond_remat`: remat.remat_jaxpr of each branch, as
    `_pjit_remat` does for a jit), where remat2's _cond_partial_eval_custom
    closes both halves over them."""
    return _model_of(cond_p, lambda *a, **k: _cond_partial_eval(*a, **k, constants_shared=False))


def _with_model(prog: Program, base, model) -> Program:
    """`prog` with every `base` equation the model's `model`, at any depth
    but inside a nested checkpoint: remat3 rebinds that whole in the
    recomputation, and its own split applies the model to its body (found by
    a campaign: a jit's constant in a nested checkpoint is no residual of
    the enclosing one)."""
    eqns = []
    for e in prog.eqns:
        if is_checkpoint(e):
            eqns.append(e)
            continue
        params = map_subprograms(e.params, lambda sub: _with_model(sub, base, model))
        eqns.append(Eqn(model if e.primitive is base else e.primitive, e.inputs, e.outputs, params, why=e.why,
                        residual_outputs=e.residual_outputs))
    return Program(prog.inputs, eqns, prog.outputs, input_names=prog.input_names)


def _with_remat3_scans(prog: Program) -> Program:
    return _with_model(prog, scan_p, _remat3_scan())


def _with_remat3_calls(prog: Program) -> Program:
    """jits and conds split as remat.remat_jaxpr splits them (their constants saved)."""
    return _with_model(_with_model(prog, call_p, _remat3_call()), cond_p, _remat3_cond())


def _zero_reading(tangents):
    """A scalar 0 made on the tangent side: unknown to partial evaluation
    (it reads the tangents), so a value plus it saves nothing, and a
    constant to transposition. remat3's `linearized` instantiates zero
    tangents (`ad_util.instantiate`) when the linear function runs: zeros
    of the linear program, whose cotangents its transpose drops (so a
    higher-order differentiation never reaches what they needed: found by
    a pristine nightly, f2a46224f0, a constant's cotangent through
    gamma_grad's while loops); and its backward pass accumulates a
    cotangent into every input with a tangent (`bwd.with_refs(*arg_accums)`),
    a zero array where the body never reads the input: the transpose gives
    each tangent such zeros, made of nothing (found by the fuzzer: a
    dilated max-pool's VJP, which JAX refuses, reached by an unread input)."""
    return bind(_tangent_zero(), *tangents, dtype=tangents[0].dtype)[0]


def _tangent_zero():
    """The model's primitive `tangent_zero(*tangents)`: a scalar 0 of
    `dtype`, linear, whose transpose gives its operands no cotangent."""
    prim = MODEL_PRIMITIVES.get("tangent_zero")
    if prim is not None and prim in core.transpose_rules:
        return prim
    # (re)register: a test may have restored the rule tables since
    prim = prim or Primitive("tangent_zero", True)
    core.param_specs[prim] = ("dtype",)
    core.shape_rules[prim] = lambda *ts, dtype: [ArrayType((), dtype)]
    core.eval_rules[prim] = lambda *xs, dtype: [np.zeros((), dtype)]
    core.jvp_rules[prim] = lambda primals, tangents, *, dtype: (bind(prim, *primals, dtype=dtype), [None])
    core.transpose_rules[prim] = lambda cts, *operands, dtype: [instantiate(Zero(t.type)) if is_undefined(t) else None
                                                             for t in operands]
    core.batch_rules[prim] = lambda args, dims, *, dtype: (bind(prim, *args, dtype=dtype), [None])
    core.cost_rules[prim] = lambda *types, **params: 0
    core.extension_primitives.add(prim)
    _complex_like(prim, None)
    MODEL_PRIMITIVES["tangent_zero"] = prim
    return prim


def _zeros_from(zero, type_):
    """zeros of `type_` computed from `zero` (no literal: it would be saved)."""
    z = zero if zero.dtype == type_.dtype else ops.convert_element_type(zero, type_.dtype)
    return ops.broadcast_in_dim(z, type_.shape, ()) if type_.shape else z


def _plus(x, zero):
    """x + zero, in x's dtype."""
    return ops.add(x, zero if zero.dtype == x.dtype else ops.convert_element_type(zero, x.dtype))


def _inputs_before_residuals(staged: Eqn, eqn: Eqn) -> Eqn:
    """The staged checkpoint `staged` of `eqn` taking the checkpoint's
    inputs before its residuals (remat3's `linearized(primals_rem, ...)`),
    in operand order: its constant operands too (the arrays its function
    closes over, which jax.checkpoint binds as leading operands: found by a
    pristine campaign, 143be815af, in the order a jit returned them)."""
    outer = {_operand_key(a) for a in eqn.inputs}
    is_primal = [_operand_key(a) in outer for a in staged.inputs]
    order = [i for i, p in enumerate(is_primal) if p] + [i for i, p in enumerate(is_primal) if not p]
    body = staged.params["jaxpr"]
    params = dict(staged.params, jaxpr=Program([body.inputs[i] for i in order], body.eqns, body.outputs))
    if isinstance(params["prevent_cse"], tuple):
        params["prevent_cse"] = tuple(params["prevent_cse"][i] for i in order)
    return Eqn(staged.primitive, [staged.inputs[i] for i in order], staged.outputs, params, why=staged.why,
               residual_outputs=staged.residual_outputs)


def _operand_key(a) -> tuple:
    """Which operand `a` is: a variable, or a constant (`constant_key`)."""
    return ("var", a.id) if isinstance(a, Var) else ("lit", constant_key(a))


def _model_body_jvp(body: Program, nonzeros, *, opaque_outputs: bool, linearized_body: bool,
                    effects_sealed: bool) -> tuple[Program, list]:
    """The model checkpoint's body linearization (known tangents are zeros,
    with `linearized_body`); with `opaque_outputs` every float output
    tangent is returned, made to read the input tangents (+ a tangent-side
    zero, `_zero_reading`: nothing is saved) so that partial evaluation
    cannot hoist it as known either. The body is linearized as remat3 rematerializes it
    (`_rematerialized`)."""
    body = _rematerialized(body, effects_sealed)
    with building() as b:
        primals = [b.new_input(t) for t in body.in_types]
        tangent_ins = [b.new_input(t) for t, nz in zip(body.in_types, nonzeros) if nz]
        it = iter(tangent_ins)
        tangents = [next(it) if nz else Zero(t) for t, nz in zip(body.in_types, nonzeros)]
        outs, out_ts = jvp_traced(body, primals, tangents, known_tangents_are_zero=linearized_body)
        if opaque_outputs and tangent_ins:
            zero = _zero_reading(tangent_ins)
            out_ts = [_plus(instantiate(t), zero) if is_float(o.dtype) else t
                      for t, o in zip(out_ts, body.out_types)]
        out_nz = [not isinstance(t, Zero) for t in out_ts]
        prog = b.build(primals + tangent_ins, outs + [t for t in out_ts if not isinstance(t, Zero)])
    return prog, out_nz


def _instantiated_input_tangents(tangents: list) -> list:
    """remat3 instantiates a checkpoint's zero float input tangents where
    any is nonzero (`map(ad_util.instantiate, tangents)` in RematTraced.jvp
    and .linearized, jax 0.10.2's ad_checkpoint.py). In forward mode
    (`jvp`) they are constants (zeros_like_aval) an outer differentiation
    knows (found by a pristine campaign, 718facfa78: grad o jvp transposes
    a pad of such a zero for its padding value alone); linearized, they
    live on the tangent side (made in `linearized`): zeros of z, a
    tangent-side zero read from the nonzero tangents (`_zero_reading`), is
    exactly that."""
    nonzero = [t for t in tangents if not isinstance(t, Zero)]
    if not nonzero:
        return tangents
    if not linearizing():
        return [instantiate(t) if is_float(t.type.dtype) else t for t in tangents]
    zero = _zero_reading(nonzero)
    return [_zeros_from(zero, t.type) if isinstance(t, Zero) and is_float(t.type.dtype) else t for t in tangents]


def _remat3_checkpoint(opaque_outputs: bool, instantiated_inputs: bool, inputs_first: bool = True,
                       scan_rule: bool = True, nested_opaque: bool = True, linearized_body: bool = True,
                       jit_rule: bool = True, grandchildren_opaque: bool = True, effects_sealed: bool = True,
                       rounded_copies: bool = True, barriered_primals: bool = True):
    """The model's checkpoint primitive; each flag switches one defect on."""
    key = (opaque_outputs, instantiated_inputs, inputs_first, scan_rule, nested_opaque, linearized_body,
           jit_rule, grandchildren_opaque, effects_sealed, rounded_copies, barriered_primals)
    prim = MODEL_PRIMITIVES.get(key)
    if prim is not None and prim in core.jvp_rules:
        return prim
    # (re)register: a test may have restored the rule tables since
    prim = prim or Primitive("remat", True)     # "remat": printed as remat2's
    core.param_specs[prim] = core.param_specs[remat_p]

    body_jvp = functools.partial(_model_body_jvp, opaque_outputs=opaque_outputs, linearized_body=linearized_body,
                                 effects_sealed=effects_sealed)

    def jvp(primals, tangents, *, jaxpr, policy, prevent_cse, differentiated):
        if instantiated_inputs:
            tangents = _instantiated_input_tangents(tangents)
        if not linearizing():
            # forward mode: RematTraced.jvp is `api.jvp(core.jaxpr_as_fun(self.jaxpr),
            # primals, tangents)`, the body as written differentiated inline, no
            # checkpoint around it: an outer differentiation meets its equations
            # (a dead jit's, found by a pristine nightly, c6bff7c126)
            outs, out_ts = jvp_traced(jaxpr, primals, tangents)
            return outs, [None if isinstance(t, Zero) else t for t in out_ts]
        return remat_of_body_jvp(prim, body_jvp, primals, tangents, jaxpr=jaxpr, policy=policy,
                                 prevent_cse=prevent_cse, differentiated=differentiated)

    def partial_eval(eqn, in_unknowns, in_inst, *, saveable, linearize):
        """remat's rule, except that the staged half reads the checkpoint's
        inputs before its residuals: `linearized(primals_rem, ...)` takes
        (used primals, rem's residuals) in that order, which is the order a
        linearized scan or jit body first reads (and so stacks or returns)
        them."""
        nested = nested_opaque and not linearize
        for on, model in ((scan_rule, _with_remat3_scans), (jit_rule, _with_remat3_calls)):
            if on and not nested:   # nested: rebound whole, its scans and jits split by nothing
                eqn = Eqn(eqn.primitive, eqn.inputs, eqn.outputs,
                          dict(eqn.params, jaxpr=model(eqn.params["jaxpr"])), why=eqn.why,
                          residual_outputs=eqn.residual_outputs)
        if nested:
            # nested in a checkpoint being split: remat3's default hi-primitive
            # rule is full remat, the enclosing policy is not asked inside, and
            # the rematerialization rebinds the checkpoint whole, reading all its
            # inputs: every output is the staged half's, one its body forwards
            # from an input too (never a residual: found by a pristine campaign,
            # 5f735dae97, an identity checkpoint's output compared with its input)
            saveable = lambda e: sp.Recompute
            in_inst = [True] * len(in_inst)
        known, staged, *rest = core.partial_eval_rules[remat_p](
            eqn, in_unknowns, in_inst, saveable=saveable, linearize=linearize)
        if rounded_copies and linearize:
            known, staged, subst = _rounded_copies(known, staged, rest[-1])
            rest = [*rest[:-1], subst]
        if grandchildren_opaque and linearize and staged:
            staged = [_with_inputs_read_through_grandchildren(staged[0], eqn, in_unknowns)]
        if inputs_first and linearize and staged:
            staged = [_inputs_before_residuals(staged[0], eqn)]
        if effects_sealed and linearize and staged:
            staged = [replace(staged[0], primitive=_remat3_linearized())]
        if barriered_primals and linearize and staged:
            staged = _behind_a_barrier(staged[0], eqn, in_unknowns)
        return (known, staged, *rest)

    for table in (core.shape_rules, core.eval_rules, core.dce_rules, source_rules):
        table[prim] = table[remat_p]
    core.partial_eval_rules[prim] = partial_eval
    core.jvp_rules[prim] = jvp
    core.extension_primitives.add(prim)
    _complex_like(prim, remat_p)
    MODEL_PRIMITIVES[key] = prim
    return prim


def _behind_a_barrier(staged: Eqn, eqn: Eqn, in_unknowns) -> list:
    """The staged checkpoint `staged` of `eqn` reading the checkpoint's
    known inputs (its primals) through an optimization_barrier of the
    linear program: remat3's backward pass is `rem(*optimization_barrier(
    primals))` (RematTraced.linearized and vjp_bwd, jax 0.10.2's
    ad_checkpoint.py), an equation a higher-order differentiation meets,
    whose JVP (lax._opt_barrier_jvp) instantiates the zero tangent of every
    operand: of a constant the checkpoint reads too, so the next order
    differentiates the body with respect to it (found by a pristine
    nightly, f2a46224f0: grad o grad o grad through random_gamma of a
    constant alpha, whose gamma_grad's while loops then need transposing).
    The residuals and the tangents are passed beside the barrier."""
    primals = {_operand_key(a) for a, unknown in zip(eqn.inputs, in_unknowns) if not unknown}
    at = [k for k, a in enumerate(staged.inputs) if _operand_key(a) in primals]
    if not at:
        return [staged]
    barrier = Eqn(_barrier(), [staged.inputs[k] for k in at], [Var(staged.inputs[k].type) for k in at])
    inputs = list(staged.inputs)
    for k, v in zip(at, barrier.outputs):
        inputs[k] = v
    return [barrier, replace(staged, inputs=inputs)]


def _barrier():
    """The model's optimization_barrier: lax's rules, and a DCE rule that
    drops each operand whose output nothing reads, so that the barrier
    covers what the staged checkpoint still reads once its dead code is
    gone (remat3 barriers `primals_`, the inputs its DCE'd linearization
    reads; what it keeps for an unread output is the divergence
    remat3-saves-for-unused-checkpoint-outputs, modelled on its own)."""
    prim = MODEL_PRIMITIVES.get("barrier")
    if prim is not None and prim in core.dce_rules:
        return prim
    # (re)register: a test may have restored the rule tables since
    prim = prim or Primitive("optimization_barrier", True)
    core.param_specs[prim] = core.param_specs[optimization_barrier_p]
    for table in (core.shape_rules, core.eval_rules, core.jvp_rules, core.transpose_rules, core.batch_rules,
                  core.cost_rules):
        table[prim] = table[optimization_barrier_p]

    def dce_rule(eqn, used_outputs):
        kept = [k for k, used in enumerate(used_outputs) if used]
        return Eqn(prim, [eqn.inputs[k] for k in kept], [eqn.outputs[k] for k in kept]), list(used_outputs)
    core.dce_rules[prim] = dce_rule
    core.extension_primitives.add(prim)
    _complex_like(prim, optimization_barrier_p)
    MODEL_PRIMITIVES["barrier"] = prim
    return prim


def _rounded_copies(known: list, staged: list, subst: dict) -> tuple[list, list, dict]:
    """A linearized checkpoint's split (remat's Rule 1: its hoisted
    equations, its staged checkpoint, its known outputs' atoms) with its
    saved values rounded as remat3 rounds them: remat_transform returns
    `Partial(f_rem, map(reduce_precision, res))` (jax 0.10.2's
    interpreters/remat.py), a rounded copy of every saved float value, made
    after the forward pass, that only the rematerialization reads; the
    forward pass and the checkpoint's outputs read the values as computed.
    remat2's `_insert_reduce_precision` (the spec's `_round_residuals`)
    rounds a saved value its known jaxpr also reads in place, for every
    reader, the checkpoint's outputs too: so a saved value the checkpoint
    returns is that output, which a jit's linearization forwards to its
    output's place (found by a pristine campaign, ee6dbe7c25: a name saved
    and returned beside a jit's own residual, listed after it under
    remat3). The checkpoint's saved inputs (`primals_`) are not rounded."""
    unrounded = {e.outputs[0].id: e.inputs[0] for e in known if e.why == ROUNDED}
    back = lambda a: unrounded.get(a.id, a) if isinstance(a, Var) else a  # noqa: E731
    eqns = [replace(e, inputs=[back(a) for a in e.inputs]) for e in known if e.why != ROUNDED]
    subst = {k: back(a) for k, a in subst.items()}
    made = {v.id for e in eqns for v in e.outputs}
    copies = {}
    for a in (staged[0].inputs if staged else ()):
        a = back(a)
        if isinstance(a, Var) and a.id in made and is_float(a.type.dtype) and a.id not in copies:
            info = ml_dtypes.finfo(a.type.dtype)
            copies[a.id] = Eqn(reduce_precision_p, [a], [Var(a.type)],
                               dict(exponent_bits=int(info.nexp), mantissa_bits=int(info.nmant)), why=ROUNDED)
    if staged:
        copy = lambda a: copies[back(a).id].outputs[0] if isinstance(back(a), Var) and back(a).id in copies else a  # noqa: E731
        staged = [replace(staged[0], inputs=[copy(a) for a in staged[0].inputs])]
    return eqns + list(copies.values()), staged, subst


def _remat3_linearized():
    """The model's linearized checkpoint, the staged half of a linearization:
    remat's rules, its equation sealed (spec.core.effects_sealed). remat3
    linearizes a checkpoint as a hi-primitive (RematTraced.lin and
    `linearized`), whose equation in the linear program has no effect of
    its own: dead code when no tangent of it is read, and not transposed
    without a cotangent, so an effect of the body (a debug print) runs again
    in the backward pass only where a cotangent reaches the checkpoint, and
    nothing is saved for it (measured on 0.10.2: grad of a function whose
    checkpoint prints prints twice, once if the checkpoint's outputs are
    unused; found by a pristine campaign, 53b64b11f1, in a cond branch).
    remat2 transposes a checkpoint for its effect alone (remat_transpose),
    saving what the effect reads."""
    prim = MODEL_PRIMITIVES.get("remat3_linearized")
    if prim is not None and prim in core.transpose_rules:
        return prim
    # (re)register: a test may have restored the rule tables since
    prim = prim or Primitive("remat", True)     # "remat": printed as remat2's
    core.param_specs[prim] = core.param_specs[remat_p]
    for table in (core.shape_rules, core.eval_rules, core.jvp_rules, core.transpose_rules, core.partial_eval_rules,
                  core.dce_rules, core.cost_rules, core.batch_rules, dependence_rules, source_rules):
        if remat_p in table:
            table[prim] = table[remat_p]
    core.effects_sealed.add(prim)
    core.extension_primitives.add(prim)
    _complex_like(prim, remat_p)
    MODEL_PRIMITIVES["remat3_linearized"] = prim
    return prim


# -- which inputs remat3's backward pass of a checkpoint reads (jax 0.10.2) --
# RematTraced.vjp_fwd/lin: `used, rem = dce(jit(lambda *xs: vjp(fwd2, *xs)[1])
# .trace(*primals))`: the checkpoint C saves the inputs that pe.dce_jaxpr finds
# read by the residuals of fwd2's linearization. In that trace a child
# checkpoint K is linearized by its own vjp_fwd: its residuals are its own
# used inputs (its own dce), and its primal outputs are computed by
# remat_transform of K's body, where K's children (C's grandchildren) are
# rebound whole (hijax.VJPHiPrimitive.remat: "full remat by default"), and
# a call_hi_primitive's dce rule (VJPHiPrimitive.dce) reads every input if
# any output is used. So C reads every primal input of a grandchild whose
# primal output C's linearization needs, e.g. an input the grandchild only
# forwards. K's residuals are computed in that same trace: `rem`, K's
# Partial over the values its policy saved (remat_transform's `res`: a
# name, through CheckpointName.remat's primal_left_tangent_right, or a dot,
# lax._dot_general_remat), keeps those that K's own linearization reads
# (K's dce's `used_res`), and they are computed by K's forward pass,
# remat_transform of K's body on C's trace, grandchildren rebound whole.
# So C reads every primal input of a grandchild whose output K's policy
# saves and K's linearization reads, whatever C's linearization needs of
# K's primal outputs (measured on 0.10.2: C nothing_saveable over K saving
# a name of G's output that a sin then reads; C saves every input it
# passes G, read by G or not, at three and at four levels; not where K's
# policy does not save the name, nor where only the name's tangent is read,
# `2 * a`, or it is returned as it is; pristine campaign finding
# 4ff150362a). A grandchild in a jit, cond or scan of K's body (at any
# depth of them) is as opaque there: the jit, cond and scan rules trace
# their bodies again, the grandchild rebound whole, and their DCE keeps it
# whole (measured on 0.10.2: C ⊃ K ⊃ jit, cond, scan or jit of jit ⊃ G, at
# three and four levels, C saves every input it passes G where C's
# linearization needs K's output, sin of it, not where it reads only its
# tangent, 2 * it; a checkpoint in a jit or cond of C's own body, two
# levels, is linearized by its own rule, nothing extra saved):
# `_read_through_opaque_checkpoints`. K's policy is asked inside those
# bodies too: a name of G's output in a jit (of a jit), cond or scan of K's
# body that K saves makes C read every input it passes G
# (`_saved_inside_bodies`; measured on 0.10.2 at three levels). The analysis
# colours what each value is needed for: "L" a tangent; "P0" a primal of
# this body's own linearization; "P1" a primal of the enclosing
# checkpoint's linearization (through this body, inline),
# which is also what a value the body's own policy saves is needed with
# where its linearization reads it ("P0").

# the primitives with a rule of their own in jax/_src/interpreters/remat.py's
# `rules` whose bodies it traces again (_pjit_remat, _cond_remat, _scan_remat)
_REMAT_TRACED_BODIES = ("call", "cond", "scan")


def _rematerialized(body: Program, sealed: bool = True) -> Program:
    """`body` as remat3 linearizes it: the rematerialization of
    remat_transform, whose trace keeps the body's own equations as written
    (a dead generic reduce_window there is linearized, and raises: found by
    a pristine campaign, 32fae7ca1b), while a jit's, cond's or scan's
    bodies are traced again by remat.remat_jaxpr with auto_dce, their dead
    code gone (one in a cond branch is never linearized: found by a
    pristine nightly, 6bb6b14f48)."""
    return Program(body.inputs, [
        replace(e, params=map_subprograms(e.params, lambda sub: _auto_dce(sub, sealed)))
        if e.primitive.name in _REMAT_TRACED_BODIES else e
        for e in body.eqns], body.outputs, input_names=body.input_names)


def _auto_dce(body: Program, sealed: bool = True) -> Program:
    """`body` as a trace with auto_dce leaves it (pe.JaxprStackFrame.add_eqn
    holds an effect-free equation by a weak reference: it is gone where no
    tracer of its outputs is left): an equation none of whose outputs is
    used is dropped, a checkpoint's with an effect in its body too (with
    `sealed`, the effects_sealed defect: the hi-primitive's equation has no
    effect of its own; measured: a printing checkpoint in a jit in a
    checkpoint prints once under grad, its input not saved; without the jit,
    twice; found by a pristine nightly, a747b6cca7). An equation with any
    output used is kept whole, its unused outputs and what computes them
    too: no DCE rule runs (a scan's unused ys in a cond branch, a dead
    generic reduce_window computing them, is linearized and raises: found
    by a pristine nightly, 697ee69f53), so a checkpoint at any depth of a
    kept equation is kept whole (measured on 0.10.2: C ⊃ K ⊃ jit of jit ⊃
    G, K saving a name of G's output, C saves every input it passes G). The
    bodies of a jit, cond or scan it keeps are traced again so (their rules
    call remat.remat_jaxpr)."""
    live = {a.id for a in body.outputs if isinstance(a, Var)}
    eqns = []
    for e in reversed(body.eqns):
        if not any(v.id in live for v in e.outputs) and ((sealed and is_checkpoint(e)) or not core.has_effects(e)):
            continue
        if e.primitive.name in _REMAT_TRACED_BODIES:
            e = replace(e, params=map_subprograms(e.params, lambda sub: _auto_dce(sub, sealed)))
        eqns.append(e)
        live |= {a.id for a in e.inputs if isinstance(a, Var)}
    return Program(body.inputs, eqns[::-1], body.outputs, input_names=body.input_names)


def _tangent_vars(body: Program, tangent_inputs: list) -> set:
    """Ids of the vars of `body` computed from a tangent input (those
    flagged), at any depth of its checkpoints."""
    tangent = {v.id for v, t in zip(body.inputs, tangent_inputs) if t}
    for e in body.eqns:
        ins = [isinstance(a, Var) and a.id in tangent for a in e.inputs]
        if is_checkpoint(e):
            sub = e.params["jaxpr"]
            inner = _tangent_vars(sub, ins)
            tangent |= {v.id for v, o in zip(e.outputs, sub.outputs) if isinstance(o, Var) and o.id in inner}
        elif any(ins):      # a JVP'd scan, cond or jit: its primal outputs read no tangent
            tangent |= {v.id for v, d in zip(e.outputs, output_dependence(e, ins)) if d}
    return tangent


def _needed_inputs(body: Program, out_colours: list, tangent: set, opaque: bool, policy=None,
                   replayed: set = frozenset()) -> list:
    """The colours each input of `body` is needed with, given its outputs'
    (see above) and the values `replayed` effects read ("P1"); with
    `opaque`, remat3's: a checkpoint whose primal output the enclosing
    linearization needs ("P1") reads every primal input, and `body` being a
    nested checkpoint's, under `policy`, a value its policy saves that its
    linearization reads ("P0") is computed by the enclosing linearization
    ("P1") too."""
    need = {i: {"E"} for i in replayed}
    for a, c in zip(body.outputs, out_colours):
        if isinstance(a, Var):
            need.setdefault(a.id, set()).update(c)
    saves = policy_saveable(policy) if opaque and policy is not None else None
    for e in reversed(body.eqns):
        outs = [need.get(v.id, set()) for v in e.outputs]
        if not any(outs):
            continue
        if saves is not None and not is_checkpoint(e) and any(c & {"P0", "P1"} for c in outs) \
                and saves(e) is sp.Saveable:
            # one of K's residuals (`rem`'s), computed on C's trace (see above)
            outs = [c | {"P1"} if c & {"P0", "P1"} else c for c in outs]
        if is_checkpoint(e):
            sub = e.params["jaxpr"]
            if opaque and (any("P1" in c for c in outs) or any("E" in c for c in _rebound_for_replay(e, outs))):
                for a in e.inputs:
                    if isinstance(a, Var) and a.id not in tangent:
                        need.setdefault(a.id, set()).add("P1")
            sub_outs = [({"P1"} if c & {"P0", "P1", "E"} else set()) | (c & {"L"}) for c in outs]
            sub_ins = [isinstance(a, Var) and a.id in tangent for a in e.inputs]
            ins = _needed_inputs(sub, sub_outs, _tangent_vars(sub, sub_ins), opaque, e.params["policy"])
            ins = [({"P0"} if c & {"P0", "P1"} else set()) | (c & {"L"}) for c in ins]
        else:
            ins = [_input_need(e, k, outs, isinstance(a, Var) and a.id in tangent) for k, a in enumerate(e.inputs)]
            if opaque and subprograms(e.params) and any(c & {"P1", "E"} for c in outs):
                # a checkpoint in a jit's, cond's or scan's body is as opaque (see above)
                ins = [c | {"P1"} if r and not (isinstance(a, Var) and a.id in tangent) else c
                       for c, r, a in zip(ins, _read_through_opaque_checkpoints(e, outs), e.inputs)]
            if saves is not None and e.primitive.name in _REMAT_TRACED_BODIES:
                ins = _saved_inside_bodies(e, outs, ins, tangent, policy)
        for a, ci in zip(e.inputs, ins):
            if isinstance(a, Var) and ci:
                need.setdefault(a.id, set()).update(ci)
    return [need.get(v.id, set()) for v in body.inputs]


def _rebound_for_replay(e: Eqn, out_colours: list) -> list:
    """The colours of the checkpoint `e`'s outputs that a replayed effect
    needs ("E") and remat3 recomputes by rebinding `e` whole: all but the
    outputs its body returns as inputs, which are those inputs (measured
    on 0.10.2: a print of a nested checkpoint's output that forwards its
    input saves that input alone)."""
    body = e.params["jaxpr"]
    return [set() if any(o is v for v in body.inputs) else c for c, o in zip(out_colours, body.outputs)]


def _saved_inside_bodies(e: Eqn, out_colours: list, in_colours: list, tangent: set, policy) -> list:
    """`in_colours` of the jit, cond or scan `e` in a nested checkpoint's
    body, with "P1" added where a value K's `policy` saves inside its
    bodies (asked there as in K's own body) needs them on C's trace (see
    above; measured on 0.10.2 in a jit, a jit of a jit, a cond branch and a
    scan body). A scan's carries: what a carry in needs, the carry out of
    the iteration before needs too, until nothing changes."""
    primal = [not (isinstance(a, Var) and a.id in tangent) for a in e.inputs]

    def needed(body: Program, outs: list, at: int) -> list:
        flags = [not p for p in primal[at:]]
        return [set()] * at + _needed_inputs(body, outs, _tangent_vars(body, flags), True, policy)
    if e.primitive.name == "scan":
        nc, nk = e.params["num_consts"], e.params["num_carry"]
        outs = list(out_colours)
        for _ in range(1 + nk):
            inner = needed(e.params["jaxpr"], outs, 0)
            carried = [o | ({"P1"} if "P1" in c else set()) for o, c in zip(outs[:nk], inner[nc:nc + nk])]
            if carried == outs[:nk]:
                break
            outs = carried + outs[nk:]
        found = [inner]
    elif e.primitive.name == "cond":
        found = [needed(b, out_colours, 1) for b in e.params["branches"]]
    else:
        found = [needed(e.params["jaxpr"], out_colours, 0)]
    return [c | {"P1"} if p and any("P1" in f[k] for f in found) else c
            for k, (c, p) in enumerate(zip(in_colours, primal))]


def _input_need(e: Eqn, k: int, out_colours: list, is_tangent: bool) -> set:
    """The colours input k of the equation `e` (not a checkpoint) is needed
    with: those of the outputs that depend on it, a primal input that a
    tangent output depends on being a residual ("P0"). Per output: a JVP'd
    scan, cond or jit computes primal and tangent outputs in one equation,
    and a tangent of its that reads no primal (a scan of `2 * c`) needs no
    primal input (found by pristine campaigns, 1191f46a4f and 2546d7b751:
    whether a grandchild's forwarded integer is saved follows from that)."""
    deps = (output_dependence(e, [j == k for j in range(len(e.inputs))]) if len(e.outputs) > 1
            else [True] * len(e.outputs))
    c = set().union(*(o for o, d in zip(out_colours, deps) if d))
    return c if is_tangent else (c - {"L"}) | ({"P0"} if "L" in c else set())


def _read_through_opaque_checkpoints(e: Eqn, out_colours: list) -> list:
    """Which inputs of `e` (a jit, cond or scan) an output of it needed by
    the enclosing linearization ("P1") depends on, each checkpoint in its
    bodies (at any depth, outside checkpoints) reading every input for
    every output: an equation without a body (`output_dependence`'s
    reading of one with no dependence rule), as remat3's hi-primitive's
    DCE reads it."""
    opaque = replace(e, params=map_subprograms(e.params, _with_opaque_checkpoints))
    wanted = ["P1" in c for c in out_colours]
    return [any(w and d for w, d in zip(wanted, output_dependence(opaque, [j == k for j in range(len(e.inputs))])))
            for k in range(len(e.inputs))]


def _with_opaque_checkpoints(body: Program) -> Program:
    """`body` with every checkpoint in it, at any depth of its jits', conds'
    and scans' bodies, an equation without a body (see above)."""
    return Program(body.inputs, [
        replace(e, params={}) if is_checkpoint(e)
        else replace(e, params=map_subprograms(e.params, _with_opaque_checkpoints)) if subprograms(e.params) else e
        for e in body.eqns], body.outputs, input_names=body.input_names)


def _inputs_read_through_grandchildren(body: Program, tangent_inputs: list) -> list:
    """Which primal inputs of the linearized checkpoint body `body` remat3
    reads only because a grandchild checkpoint is opaque (see above)."""
    tangent = _tangent_vars(body, tangent_inputs)
    outs = [{"L"} if isinstance(a, Var) and a.id in tangent else set() for a in body.outputs]
    replayed = _replayed_effect_operands(body, tangent)
    remat3 = _needed_inputs(body, outs, tangent, opaque=True, replayed=replayed)
    exact = _needed_inputs(body, outs, tangent, opaque=False, replayed=replayed)
    return [bool(r) and not x and not t for r, x, t in zip(remat3, exact, tangent_inputs)]


def _replayed_effect_operands(body: Program, tangent: set) -> set:
    """Ids of the primal values the effects of `body` (a debug print) read:
    the backward pass replays them (`_remat3_linearized`), so remat3's
    rematerialization computes what they read, a child checkpoint rebound
    whole, reading every input (`VJPHiPrimitive.dce` keeps them all; found
    by a pristine nightly, 3104dd2138: a print of a nested checkpoint's
    output saves every input it passes its own child)."""
    return {a.id for e in body.eqns if core.has_effects(e) and not is_checkpoint(e)
            for a in e.inputs if isinstance(a, Var) and a.id not in tangent}


def _reading(body: Program, new: list, at: int) -> Program:
    """`body` with inputs `new` inserted at `at` and read: its first float
    output multiplied by 1 + sum over x in `new` of (sum(x) - sum(x)),
    exactly 1 (the values are never computed: only what is read matters)."""
    k = next((k for k, a in enumerate(body.outputs) if is_float(a.type.dtype)), None)
    if k is None:
        return Program(body.inputs[:at] + new + body.inputs[at:], body.eqns, body.outputs)
    out = body.outputs[k]
    with building() as b:
        xs = [b.new_input(v.type) for v in new]
        t = b.new_input(out.type)
        factor = None
        for x in xs:
            x = ops.convert_element_type(x, out.type.dtype) if x.dtype != out.type.dtype else x
            s = ops.reduce_sum(x, tuple(range(x.ndim))) if x.ndim else x
            d = ops.sub(s, s)
            factor = d if factor is None else ops.add(factor, d)
        one = ops.add(ops.exp(ops.sub(factor, factor)), factor)     # exp(0) + 0
        y = ops.mul(t, ops.broadcast_in_dim(one, out.type.shape, ()) if out.type.shape else one)
        piece = b.build(xs + [t], [y])
    env = {v.id: a for v, a in zip(piece.inputs, new + [out])}
    eqns = _clone(piece.eqns, env)
    outputs = list(body.outputs)
    outputs[k] = env[piece.outputs[0].id]
    return Program(body.inputs[:at] + new + body.inputs[at:], body.eqns + eqns, outputs)


def _with_inputs_read_through_grandchildren(staged: Eqn, eqn: Eqn, in_unknowns) -> Eqn:
    """The staged checkpoint also reading the inputs remat3 reads through
    an opaque grandchild (after its other primal inputs): values, and
    constants (an array the checkpoint is called with is saved "from a
    constant" too: found by a pristine campaign, three nested checkpoints
    passing a closed-over array down to one that never reads it)."""
    extra = [a for a, x in zip(eqn.inputs, _inputs_read_through_grandchildren(eqn.params["jaxpr"], in_unknowns))
             if x and (isinstance(a, Var) or not a.is_scalar) and all(a is not b for b in staged.inputs)]
    extra = [a for k, a in enumerate(extra) if all(a is not b for b in extra[:k])]
    if not extra:
        return staged
    outer = {a.id for a in eqn.inputs if isinstance(a, Var)}
    at = max((k + 1 for k, a in enumerate(staged.inputs) if isinstance(a, Var) and a.id in outer), default=0)
    new = [Var(a.type) for a in extra]
    params = dict(staged.params, jaxpr=_reading(staged.params["jaxpr"], new, at))
    if isinstance(params["prevent_cse"], tuple):
        p = params["prevent_cse"]
        params["prevent_cse"] = p[:at] + (True,) * len(new) + p[at:]
    return Eqn(staged.primitive, staged.inputs[:at] + extra + staged.inputs[at:], staged.outputs, params,
               why=staged.why, residual_outputs=staged.residual_outputs)


# -- how remat3 (jax/_src/interpreters/remat.py, 0.10.2) treats policies -----
# Only two rules consult the policy (every other primitive is recomputed):
#   dot_general (lax._dot_general_remat): saved iff the policy is a
#       DotsSaveable object and says yes;
#   checkpoint_name (CheckpointName.remat): saved iff the policy is a
#       SaveOnlyTheseNames / SaveAnyNamesButThese object and says yes, or
#       is everything_saveable itself.
# Any other policy object (user callables, save_from_both_policies, the
# offload policies, save_anything_except_these_names) is consulted by no one.
# A checkpoint nested in a checkpoint is a hi-primitive whose remat rule is
# the default full remat (hijax.VJPHiPrimitive.remat): the enclosing policy
# is not consulted inside it (its own policy acts later, inside the
# enclosing checkpoint's backward pass, out of saved_residuals' sight).

# -- remat3 asks its policy about the body's own equations (jax 0.10.2) ------
# RematTrace.process_primitive asks the policy only through `remat.rules`
# (lax._dot_general_remat, CheckpointName.remat), about the equations of
# the body as written and, through the jit, scan and cond rules, of their
# bodies: a dot that a JVP rule computes (qr's q_mp @ z_pn) is recomputed,
# where remat2 (remat_jvp, then partial_eval_jaxpr_custom of the JVP)
# offers it to the policy. The model marks the body's own dots and names
# with primitives of its own (`_primal_level`), the only ones its view asks
# about. Both rules rematerialize a saved value as
# `primal_left_tangent_right(saved, recomputed)` (jax/_src/ad_checkpoint.py),
# a custom_jvp whose rule returns `saved` and reads `recomputed` only for
# the tangent; where `recomputed` has no tangent (computed from integers, a
# key, constants, stop_gradient), linearization binds it as one opaque
# custom_jvp_call reading both, so the backward pass recomputes the value
# it saved, and the checkpoint saves what that reads (an integer argument;
# found through jax.random.multivariate_normal): the defect
# `zero_tangent_recomputed`.

def _plt():
    """primal_left_tangent_right(saved, recomputed) = saved, with the
    tangent of `recomputed` (a model primitive, jax/_src/ad_checkpoint.py's
    custom_jvp): where neither has a tangent, bound whole, reading both."""
    prim = MODEL_PRIMITIVES.get("primal_left_tangent_right")
    if prim is not None and prim in core.jvp_rules:
        return prim
    prim = prim or Primitive("primal_left_tangent_right", False)
    core.param_specs[prim] = ()
    core.shape_rules[prim] = lambda saved, recomputed: [saved]
    core.eval_rules[prim] = lambda saved, recomputed: saved
    core.jvp_rules[prim] = lambda primals, tangents: (primals[0], tangents[1])
    core.extension_primitives.add(prim)
    _complex_like(prim, None)
    MODEL_PRIMITIVES["primal_left_tangent_right"] = prim
    return prim


def _primal_level(base: Primitive, rematerialized: bool) -> Primitive:
    """`base` (dot_general or name) as an equation of a checkpoint's body
    itself, the value the policy may save: `base`'s rules, except a JVP rule
    binding this primitive for the primal, with `base`'s tangent or, where
    it is `rematerialized` (the saved half of primal_left_tangent_right,
    the rematerialization's input), none."""
    key = ("primal level", base.name, rematerialized)
    prim = MODEL_PRIMITIVES.get(key)
    if prim is not None and prim in core.jvp_rules:
        return prim
    prim = prim or Primitive(base.name, base.multiple_results)
    core.param_specs[prim] = core.param_specs[base]
    for table in (core.shape_rules, core.eval_rules, core.transpose_rules, core.dce_rules, dependence_rules,
                  source_rules, core.cost_rules):
        if base in table:
            table[prim] = table[base]

    def jvp(primals, tangents, **params):
        saved = bind(prim, *primals, **params)
        if rematerialized:
            return saved, Zero(saved.type)
        _, tangent = core.jvp_rules[base](primals, tangents, **params)   # its primal is dead code
        return saved, tangent
    core.jvp_rules[prim] = jvp
    core.extension_primitives.add(prim)
    _complex_like(prim, base)
    MODEL_PRIMITIVES[key] = prim
    _PRIMAL_LEVEL[prim] = base
    return prim


_PRIMAL_LEVEL: dict = {}     # the model's primal-level primitive -> spec's


def _marked_primal_level(prog: Program, zero_tangent_recomputed: bool, inside: bool = False) -> Program:
    """Every dot_general and name written in a checkpoint's body (or in a
    program it holds: a jit's, a custom rule's, ...) the model's
    `_primal_level` primitive; with `zero_tangent_recomputed`, as remat3
    rematerializes it: primal_left_tangent_right(saved, the equation again).
    (Where remat3 asks no policy, in a custom rule or a while loop, the
    model's other defects and rules leave them unsaved.)"""
    eqns = []
    for e in prog.eqns:
        params = map_subprograms(e.params, lambda sub: _marked_primal_level(
            sub, zero_tangent_recomputed, inside or e.primitive is remat_p))
        if not (inside and e.primitive.name in ("dot_general", "name") and e.primitive not in _PRIMAL_LEVEL):
            eqns.append(Eqn(e.primitive, e.inputs, e.outputs, params, why=e.why,
                            residual_outputs=e.residual_outputs))
            continue
        marked = _primal_level(e.primitive, zero_tangent_recomputed)
        if not zero_tangent_recomputed:
            eqns.append(Eqn(marked, e.inputs, e.outputs, params))
            continue
        saved, recomputed = Var(e.outputs[0].type), Var(e.outputs[0].type)
        eqns += [Eqn(marked, e.inputs, [saved], params), Eqn(e.primitive, e.inputs, [recomputed], params),
                 Eqn(_plt(), [saved, recomputed], e.outputs, {})]
    return Program(prog.inputs, eqns, prog.outputs, input_names=prog.input_names)


def remat3_recognises(policy) -> bool:
    return policy is None or isinstance(policy, (
        sp._NothingSaveable, sp._EverythingSaveable, sp._DotsSaveable, sp._DotsWithNoBatchDimsSaveable,
        sp.save_only_these_names, sp.save_any_names_but_these))


@dataclass(frozen=True)
class _Remat3View(sp._Policy):
    """The policy remat3 effectively applies (see above)."""
    policy: Any

    def __call__(self, prim, *in_types, **params):
        base = _PRIMAL_LEVEL.get(prim)
        # not an equation of the body as written (`_marked_primal_level`): never asked
        return base is not None and _remat3_saves(self.policy, base, in_types, params)


def _remat3_saves(policy, prim, in_types, params) -> bool:
    """Whether remat3 saves the output of an equation of `prim` written in a
    checkpoint body under `policy`: a dot under a dots policy, a name under
    a names policy or everything_saveable, as the policy answers."""
    if prim.name == "dot_general" and isinstance(policy, (sp._DotsSaveable, sp._DotsWithNoBatchDimsSaveable)):
        return sp.ask(policy, prim, in_types, params) is sp.Saveable
    if prim.name == "name":
        if isinstance(policy, (sp.save_only_these_names, sp.save_any_names_but_these)):
            return sp.ask(policy, prim, in_types, params) is sp.Saveable
        return policy is sp.everything_saveable
    return False


def remat3_viewed(prog: Program, zero_tangent_recomputed: bool = True) -> Program:
    """`prog` with its checkpoints asking their policies as remat3 does:
    about the dots and names of their bodies as written, and only those
    (the view, `_Remat3View`)."""
    return map_policies(_marked_primal_level(prog, zero_tangent_recomputed), _Remat3View)


# in the order a difference is attributed to them (and DIVERGENCES lists them);
# barriered_primals first: its barrier reads the inputs the staged checkpoint
# reads first anyway, so it never moves a first-order residual (its effect is
# at the next order, where a stack's property attributes nothing); it may
# rename one, read outside every checkpoint through the barrier, so no
# first-order difference is attributed to it (oracle/divergences.py,
# _UNATTRIBUTED_REMAT3_DEFECTS)
REMAT3_DEFECTS = ("barriered_primals", "custom_opaque", "nested_opaque", "grandchildren_opaque",
                  "zero_tangent_recomputed", "view", "opaque_outputs", "instantiated_inputs", "inputs_first",
                  "scan_rule", "jit_rule", "linearized_body", "effects_sealed", "rounded_copies")


def remat3_model(prog: Program, view=True, nested_opaque=True, opaque_outputs=True,
                 instantiated_inputs=True, inputs_first=True, scan_rule=True,
                 custom_opaque=True, linearized_body=True, jit_rule=True,
                 grandchildren_opaque=True, zero_tangent_recomputed=True, effects_sealed=True,
                 rounded_copies=True, barriered_primals=True) -> Program:
    """The program whose spec residuals are remat3's (jax 0.10.2), up to
    naming: every checkpoint is the model's (`_remat3_checkpoint`); with
    `view` it applies its policy as remat3 does (`remat3_viewed`; with
    `zero_tangent_recomputed`, rematerializing what it saved where that has
    no tangent); with `custom_opaque` a
    custom_jvp/custom_vjp call inside a checkpoint is a checkpoint of its
    own (remat3's RematTrace.process_custom_*_call rebinds it whole in the
    recomputation: the policy never sees inside its rules). Each flag
    switches on one defect, to tell whether it mattered."""
    prim = _remat3_checkpoint(opaque_outputs, instantiated_inputs, inputs_first, scan_rule, nested_opaque,
                              linearized_body, jit_rule, grandchildren_opaque, effects_sealed, rounded_copies,
                              barriered_primals)
    if custom_opaque:
        prog = _custom_calls_as_checkpoints(prog)
    if view:
        prog = remat3_viewed(prog, zero_tangent_recomputed)
    return map_params(prog, lambda e, params: params, primitive=lambda e: prim if e.primitive is remat_p
                      else e.primitive)


@dataclass(frozen=True, repr=False)
class RunsInline(sp._NothingSaveable):
    """The policy of the checkpoint the model wraps a custom call in: save
    nothing. `primal` is the call's primal program, which remat3's forward
    pass runs inline (RematTrace.process_custom_jvp_call/_vjp_call:
    `fun.call_wrapped(*in_vals)` on the parent trace, jax 0.10.2's
    interpreters/remat.py), so a value it computes is named by the
    primal's own equation (`producer_sources`)."""
    primal: Program = None

    def __repr__(self):
        return "nothing_saveable (a custom call's primal, run inline)"


def _inline_primal(e: Eqn) -> Program | None:
    """The primal program of the custom call checkpoint `e` wraps, if it
    wraps one (its policy `RunsInline`, viewed or not)."""
    policy = e.params["policy"]
    policy = policy.policy if isinstance(policy, _Remat3View) else policy
    return policy.primal if isinstance(policy, RunsInline) else None


def _custom_calls_as_checkpoints(prog: Program, inside: bool = False) -> Program:
    """Every custom_jvp_call / custom_vjp_call inside a checkpoint wrapped in
    a checkpoint (policy None) of its own."""
    eqns = []
    for e in prog.eqns:
        params = map_subprograms(e.params, lambda sub: _custom_calls_as_checkpoints(
            sub, inside or e.primitive is remat_p))
        if inside and e.primitive.name in ("custom_jvp_call", "custom_vjp_call"):
            body = spec.trace(lambda *xs, e=e: bind(e.primitive, *xs, **e.params), *[a.type for a in e.inputs])
            eqns.append(Eqn(remat_p, e.inputs, e.outputs, dict(
                jaxpr=body, policy=RunsInline(e.params["jaxpr"]), prevent_cse=False, differentiated=False)))
        else:
            eqns.append(Eqn(e.primitive, e.inputs, e.outputs, params, why=e.why,
                            residual_outputs=e.residual_outputs))
    return Program(prog.inputs, eqns, prog.outputs, input_names=prog.input_names)


# -- remat3's tangents of non-float checkpoint outputs (jax 0.10.2) ---------
# hijax._call_hi_primitive_linearize: RematTraced.lin returns no output
# nonzeros, so `nzs_out = ... else True` marks every output's tangent
# nonzero, a non-float one too (a float0 value,
# _call_hi_primitive_linearized_abstract_eval: "TODO(dougalm): handle
# nonzeros"). Where that float0 tangent reaches an output of the
# differentiated function, passed on unchanged by calls (jit, a checkpoint,
# a scan's outputs: any primitive, convert_element_type or reshape too,
# makes it a symbolic zero, measured), the checkpoint's one linearized
# equation stays live, and with it every residual it reads: what the
# tangents of the checkpoint's float outputs need, though their cotangents
# are zeros (the backward pass reads them only in dead code:
# `cos(optimization_barrier(x))`, unused). The model: those float outputs
# made outputs of the program, passed out through every enclosing call.

_FORWARDING_CALLS = ("call", "remat", "scan")


def float0_tangent_outputs(prog: Program, live: list) -> tuple[Program, int, list]:
    """`prog` with extra outputs appended: the float outputs of every
    checkpoint of which a non-float output is, passed on through calls
    only, one of `prog`'s outputs flagged in `live`; how many; and which of
    `prog`'s inputs are so passed on to a flagged output."""
    live_ids = {a.id for a, l in zip(prog.outputs, live)
                if l and isinstance(a, Var) and not is_float(a.type.dtype)}
    eqns, extra = [], []
    for e in reversed(prog.eqns):      # liveness flows from the outputs back
        out_live = [v.id in live_ids for v in e.outputs]
        if any(out_live) and e.primitive is cond_p and any(
                _float0_from_a_checkpoint(b, out_live) for b in e.params["branches"]):
            # a checkpoint's float0 tangent reaches the cond's output, so its
            # backward pass runs, and reads the index (found by pristine
            # campaigns, 62409626bb and 99399c0536): a zero output read linearly is live
            e, floats = _with_a_float_output(e)
            e, inner = _with_branch_float0_outputs(e, out_live)
            eqns.append(e)
            extra = floats + inner + extra
            continue
        if not any(out_live) or e.primitive.name not in _FORWARDING_CALLS:
            eqns.append(e)
            continue
        body, n, in_live = float0_tangent_outputs(e.params["jaxpr"], out_live)
        live_ids.update(a.id for a, l in zip(e.inputs, in_live) if l and isinstance(a, Var))
        if e.primitive is remat_p:
            body = Program(body.inputs, body.eqns, body.outputs + [
                a for a in e.params["jaxpr"].outputs if is_float(a.type.dtype)], input_names=body.input_names)
        new = body.out_types[len(e.outputs):]
        if e.primitive.name == "scan":      # extra body outputs are stacked ys
            new = [ArrayType((e.params["length"],) + t.shape, t.dtype) for t in new]
        outs = [Var(t) for t in new]
        eqns.append(Eqn(e.primitive, e.inputs, e.outputs + outs, dict(e.params, jaxpr=body), why=e.why,
                        residual_outputs=e.residual_outputs))
        extra = outs + extra
    in_live = [v.id in live_ids for v in prog.inputs]
    return (Program(prog.inputs, eqns[::-1], prog.outputs + extra, input_names=prog.input_names),
            len(extra), in_live)


def _float0_from_a_checkpoint(prog: Program, live: list) -> bool:
    """Some non-float output of `prog` flagged in `live` is a checkpoint's
    output, passed on through calls, scans and conds: remat3 gives it a
    float0 tangent, not a symbolic zero."""
    live_ids = {a.id for a, l in zip(prog.outputs, live) if l and isinstance(a, Var) and not is_float(a.type.dtype)}
    for e in reversed(prog.eqns):
        out_live = [v.id in live_ids for v in e.outputs]
        if not any(out_live):
            continue
        if e.primitive is remat_p:
            return True
        bodies = e.params["branches"] if e.primitive is cond_p else \
            [e.params["jaxpr"]] if e.primitive.name in _FORWARDING_CALLS else []
        if any(_float0_from_a_checkpoint(b, out_live) for b in bodies):
            return True
    return False


def _with_branch_float0_outputs(e: Eqn, live: list) -> tuple[Eqn, list]:
    """(cond `e` with more outputs, them): the float outputs of the
    checkpoints in its branches that a float0 tangent reaches
    (`float0_tangent_outputs` of each branch), each out of its own branch,
    zeros read linearly (`zeros_read_linearly`) in the others: the nested
    checkpoint's backward pass runs, reading what its float outputs'
    tangents need (found by a pristine nightly, 80d7b1a02a: a u32 output
    of a checkpoint in a cond branch inside a checkpoint)."""
    branches = e.params["branches"]
    live = list(live) + [False] * (len(branches[0].outputs) - len(live))
    threaded = [float0_tangent_outputs(b, live)[0] for b in branches]
    slots = [t.outputs[len(b.outputs):] for t, b in zip(threaded, branches)]
    if not any(slots):
        return e, []
    new_branches = []
    for k, (b, t) in enumerate(zip(branches, threaded)):
        eqns, outs = list(t.eqns), list(b.outputs)
        for j, slot in enumerate(slots):
            for a in slot:
                if j == k:
                    outs.append(a)
                    continue
                zero_eqns, zero = zeros_read_linearly(t, a.type, frozenset())
                eqns += zero_eqns
                outs.append(zero)
        new_branches.append(Program(t.inputs, eqns, outs, input_names=t.input_names))
    new = [Var(a.type) for slot in slots for a in slot]
    return Eqn(e.primitive, e.inputs, e.outputs + new, dict(e.params, branches=tuple(new_branches)), why=e.why), new


def _with_a_float_output(e: Eqn) -> tuple[Eqn, list]:
    """(cond `e` with one more output, [it]): zeros each branch reads
    linearly from its first float operand, so that the cond's backward
    pass, reading its index, is what the output's tangent needs, not a
    value; `e` as it is, with none, where it has no float operand. Not the
    cond's own float outputs: remat3's linearized cond is pruned to the
    outputs whose tangents are read, and what the tangent of a float output
    nothing reads needs is not saved (measured on 0.10.2: an acos of an
    argument returned beside a nested checkpoint's integer, the acos
    unused: the argument is not saved; used, or returned by the enclosing
    checkpoint, it is; pristine campaign finding e1a10509a2, where the
    variant saved it)."""
    operand = next((a for a in e.inputs[1:] if is_float(a.type.dtype)), None)
    if operand is None:
        return e, []
    t = ArrayType((), operand.type.dtype)
    branches = []
    for b in e.params["branches"]:
        zero_eqns, zero = zeros_read_linearly(b, t, frozenset())
        branches.append(Program(b.inputs, b.eqns + zero_eqns, b.outputs + [zero], input_names=b.input_names))
    out = Var(t)
    return Eqn(e.primitive, e.inputs, e.outputs + [out], dict(e.params, branches=tuple(branches)), why=e.why), [out]


def remat3_variants(prog: Program) -> list:
    """`prog`, and the programs whose remat3-model residuals JAX's are where
    a structural remat3 defect holds: with its unused checkpoint outputs
    used (remat3-saves-for-unused-checkpoint-outputs), with the float
    outputs of checkpoints whose non-float output is live made outputs
    (remat3-non-float-checkpoint-output-keeps-its-tangents-live), and both
    (in either order)."""
    used, n_unused = unused_checkpoint_outputs_out(prog)
    variants = [prog] + ([used] if n_unused else [])
    for p in list(variants):
        exposed, n_live, _ = float0_tangent_outputs(p, [True] * len(p.outputs))
        if n_live:
            variants.append(exposed)
            # the exposed outputs make a checkpoint live whose nested checkpoint has an
            # unused output (found by a campaign: a checkpoint's integer output alone read)
            exposed_used, n = unused_checkpoint_outputs_out(exposed)
            if n:
                variants.append(exposed_used)
    return variants


@dataclass(frozen=True)
class _Tagged(sp._Policy):
    """`policy` unchanged, carrying a tag that survives differentiation
    (JVP and partial evaluation copy a checkpoint's params)."""
    policy: Any
    tag: int

    def __call__(self, prim, *in_types, **params):
        return sp.ask(self.policy or sp.nothing_saveable, prim, in_types, params)


def _live_checkpoints(prog: Program) -> set:
    """The checkpoints (equations of `prog`, at any depth) whose backward
    pass is live: their staged half survives in the spec's linearization.
    A checkpoint whose input cotangents are symbolic zeros, or whose output
    cotangent is, has a backward pass XLA removes as dead code, barrier
    and all."""
    eqns = list(remats(prog))
    tags = {id(e): k for k, e in enumerate(eqns)}
    tagged = map_params(prog, lambda e, params: dict(params, policy=_Tagged(params["policy"], tags[id(e)]))
                        if id(e) in tags else params)
    live = set()

    def walk(p):
        for e in p.eqns:
            pol = e.params.get("policy")
            if e.primitive is remat_p and e.params.get("differentiated") and isinstance(pol, _Tagged):
                live.add(pol.tag)
            for _, sub in subprograms(e.params):
                walk(sub)
    walk(spec.linearize(tagged).linear)
    return {id(e) for e in eqns if tags[id(e)] in live}


def remat3_barrier_model(prog: Program) -> bool:
    """remat3 (RematTraced.vjp_bwd/linearized, jax 0.10.2) puts an
    optimization barrier on the checkpoint's inputs that its backward pass
    reads, whatever prevent_cse says: a barrier exists iff some checkpoint
    with a live backward pass (see `_live_checkpoints`), linearized on its
    own under remat3's view of its policy, saves one of its own inputs.
    Only its outputs something reads count: the backward pass of an
    unused output has a zero cotangent, and XLA removes it as dead code,
    barrier and all, unless JAX makes that zero an array
    (`_zeros_made_arrays`). A backward pass that a cotangent reaches
    replays the body's effects (a debug print), reading the inputs they
    depend on, whatever the outputs' derivatives are (measured: a print of
    an input beside floor's output has the barrier, of a constant not;
    found by a pristine nightly, 8ef5d41d3e)."""
    live = _live_checkpoints(prog)
    read = _read_anywhere(prog)
    zero = zero_tangents(prog)
    for e in remats(prog):
        body = e.params["jaxpr"]
        nonzero = [v.id in read for v in e.outputs]
        keep = [k for k, made in enumerate(_zeros_made_arrays(body, nonzero)) if nonzero[k] or made]
        if not keep:
            continue
        if _an_effect_reads_an_input(body, e.params["policy"]) and any(
                isinstance(a, Var) and is_float(a.type.dtype) and a.id not in zero for a in e.inputs):
            return True     # a differentiated checkpoint whose read outputs' cotangents reach it
        if id(e) not in live:
            continue
        alone = _opaque_in_loop_bodies(remat3_model(
            spec.trace(lambda *xs, e=e: [bind(remat_p, *xs, **e.params)[k] for k in keep], *body.in_types),
            opaque_outputs=False, instantiated_inputs=False))
        if any(r.source.kind == "argument" for r in spec.saved_residuals(alone)):
            return True
    return False


def _opaque_in_loop_bodies(prog: Program, inside: bool = False) -> Program:
    """`prog` (a remat3 model without opaque outputs) with every checkpoint
    in a scan body or a cond branch, at any depth, one whose output
    tangents read every nonzero input tangent. remat3's linearized
    checkpoint takes every nonzero input tangent and has no DCE rule
    (pe.dce_jaxpr keeps it whole), and its transpose gives the inputs it
    ignores symbolic zero cotangents, which a scan's or cond's transpose
    makes arrays (the transposed body returns one per linear operand), so
    what computes such a tangent outside stays live in the backward pass,
    reading its residuals: pristine nightly finding a6d63c894e, a scan
    constant an inner checkpoint ignores, computed from the outer
    checkpoint's input (measured on 0.10.2: a barrier; without the scan,
    none)."""
    plain = _remat3_checkpoint(opaque_outputs=False, instantiated_inputs=False)
    opaque = _remat3_checkpoint(opaque_outputs=True, instantiated_inputs=False)
    eqns = []
    for e in prog.eqns:
        within = inside or e.primitive.name in ("scan", "cond")
        params = map_subprograms(e.params, lambda sub: _opaque_in_loop_bodies(sub, within))
        prim = opaque if inside and e.primitive is plain else e.primitive
        eqns.append(Eqn(prim, e.inputs, e.outputs, params, why=e.why, residual_outputs=e.residual_outputs))
    return Program(prog.inputs, eqns, prog.outputs, input_names=prog.input_names)


def _an_effect_reads_an_input(body: Program, policy) -> bool:
    """Whether an equation of `body` with an effect reads a value computed
    from one of its inputs, not through a value remat3 saves under
    `policy` (the replay reads that residual: a print of a saved name has
    no barrier, found through jax's debugging_primitives_test
    test_remat_of_debug_print)."""
    dep = {v.id for v in body.inputs}
    for e in body.eqns:
        if any(isinstance(a, Var) and a.id in dep for a in e.inputs):
            if core.has_effects(e):
                return True
            if not _remat3_saves(policy, e.primitive, [a.type for a in e.inputs], e.params):
                dep |= {v.id for v in e.outputs}
    return False


def _zeros_made_arrays(body: Program, nonzero: list) -> list:
    """Which outputs of `body`, with `nonzero[k]` telling whose cotangent is
    nonzero, have a zero cotangent that JAX's backward pass makes an array,
    so that what is computed from it stays live though nothing reads the
    output: the zero reaches a custom_vjp's bwd rule (symbolic_zeros=False:
    JAX calls it with zero arrays; pristine campaign finding 2f662fefa7) or
    scan's transpose with a carry (`_scan_transpose_fancy`, jax 0.10.2:
    `ct_carry = _map(ad.instantiate_zeros, ct_carry)  # TODO(mattjj):
    fixpoint`; pristine nightly finding 8a9d13bc39). It reaches into a jit,
    cond, checkpoint or carry-less scan only where one of that equation's
    other outputs has a nonzero cotangent: `backward_pass3` returns at once
    when every cotangent is zero (measured: a scan or custom_vjp in a jit
    whose outputs are all unused leaves no barrier; beside a used output, it
    does)."""
    feeds = _cone(body, [a for a, nz in zip(body.outputs, nonzero) if nz])
    return [not nz and any(_makes_zeros_arrays(e, feeds, cone)
                           for cone in [_cone(body, [a])] for e in body.eqns
                           if any(v.id in cone for v in e.outputs))
            for a, nz in zip(body.outputs, nonzero)]


def _makes_zeros_arrays(e: Eqn, feeds: set, cone: set) -> bool:
    """Whether the transpose of `e`, whose outputs in `cone` have zero
    cotangents and in `feeds` nonzero ones, makes one of those zeros an
    array (see `_zeros_made_arrays`)."""
    if e.primitive.name == "custom_vjp_call":
        return not e.params["symbolic_zeros"]
    if e.primitive.name == "scan" and e.params["num_carry"]:
        return True
    nonzero = [v.id in feeds for v in e.outputs]
    return any(nonzero) and any(
        made and v.id in cone
        for _, sub in subprograms(e.params) if len(sub.outputs) == len(e.outputs)
        for made, v in zip(_zeros_made_arrays(sub, nonzero), e.outputs))


def _cone(body: Program, atoms: list) -> set:
    """Ids of the vars of `body` that `atoms` are computed from, themselves
    included."""
    cone = {a.id for a in atoms if isinstance(a, Var)}
    for e in reversed(body.eqns):
        if any(v.id in cone for v in e.outputs):
            cone |= {a.id for a in e.inputs if isinstance(a, Var)}
    return cone


def _read_anywhere(prog: Program) -> set:
    """Ids of the vars some equation of `prog` (at any depth) reads, or
    some (sub-)program returns."""
    out = {a.id for a in prog.outputs if isinstance(a, Var)}
    for e in prog.eqns:
        out |= {a.id for a in e.inputs if isinstance(a, Var)}
        for _, sub in subprograms(e.params):
            out |= _read_anywhere(sub)
    return out


def remats(prog: Program):
    for e in prog.eqns:
        if e.primitive is remat_p:
            yield e
        for _, sub in subprograms(e.params):
            yield from remats(sub)
