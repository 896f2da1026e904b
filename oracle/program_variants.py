"""Programs derived from a checked program, which the known divergences
(oracle/divergences.py) and the remat3 model (oracle/remat3_model.py)
compute the spec's answer for: every checkpoint's policy mapped, nested
checkpoints inlined, unused outputs of checkpoints or staged equations
made used.
"""
from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Callable

import numpy as np

import spec
from spec.core import dce_rules, has_effects, is_differentiable, loops_until_a_value
from spec.jvp import dependence_rules
from spec.partial_eval import dce
from spec.ir import ArrayType, Eqn, Literal, Program, Var, map_subprograms, subprograms
from spec.remat import ROUNDED, remat_p
from spec.ir import is_float
from spec.prims_call import call_p
from spec.prims_control import cond_p
from spec.prims_elementwise import add_p, mul_p, stop_gradient_p
from spec.prims_scan import carry_fixpoint, scan_p
from spec.prims_structural import broadcast_in_dim_p, reduce_sum_p, reshape_p, slice_p



def has_primitive(prog: Program, name: str) -> bool:
    """The program binds `name` itself (not counting the roundings a
    checkpoint's partial evaluation adds: spec.remat.ROUNDED)."""
    return any((e.primitive.name == name and e.why != ROUNDED)
               or any(has_primitive(b, name) for _, b in subprograms(e.params)) for e in prog.eqns)


# name -> a primitive of a model's own standing for the spec's primitive of
# that name (oracle/remat3_model.py `_model_of`): still a checkpoint, a scan, a call
MODEL_PRIMITIVES: dict = {}


def is_checkpoint(e) -> bool:
    return e.primitive is remat_p or (e.primitive in MODEL_PRIMITIVES.values()
                                      and e.primitive.name == "remat")


def map_policies(prog: Program, transform: Callable) -> Program:
    """`prog` with every checkpoint's policy p replaced by transform(p)."""
    return map_params(prog, lambda e, params: dict(params, policy=transform(params["policy"]))
                      if e.primitive is remat_p else params)


def policies_in(prog: Program) -> list:
    out = []
    for e in prog.eqns:
        if e.primitive is remat_p:
            out.append(e.params["policy"])
        for _, sub in subprograms(e.params):
            out += policies_in(sub)
    return out


def map_params(prog: Program, fn, primitive=lambda e: e.primitive) -> Program:
    """Apply fn(eqn, params) -> params (and primitive(eqn) -> primitive) to
    every equation, sub-programs too."""
    eqns = []
    for e in prog.eqns:
        params = map_subprograms(e.params, lambda sub: map_params(sub, fn, primitive))
        eqns.append(Eqn(primitive(e), e.inputs, e.outputs, fn(e, params)))
    return Program(prog.inputs, eqns, prog.outputs, input_names=prog.input_names)


def unused_checkpoint_outputs_out(prog: Program, *, forwarded: bool = True) -> tuple[Program, int]:
    """`prog` with every float output of a checkpoint that nothing reads
    made an output of the program (threaded out through the checkpoints,
    calls, cond branches and scan bodies around it: a cond's other branches
    return zeros there, a scan stacks it), and how many were: remat3's
    backward pass of a checkpoint runs whole, as if every output had a
    cotangent. Only checkpoints whose backward pass is live count (the
    tangent of an output read, transitively, by the program's float
    outputs: `_live_tangents`; remat3 instantiates a checkpoint's output
    tangents, so one the spec knows is zero, round's, still counts: found
    by the fuzzer's branch cover), and only reads by such equations: a checkpoint none of whose outputs is needed is dead code
    that JAX's partial evaluation drops with its backward pass
    (pe.partial_eval_jaxpr_nounits on a cond's branches,
    jax/_src/lax/control_flow/conditionals.py:609; found by the fuzzer: a
    dead checkpoint in a cond branch, no residual), and so is one whose
    outputs only a cond's index or an operand no branch reads take (no
    cotangent reaches it; found by the fuzzer's branch cover), or one whose
    tangent no branch reads (a branch's stop_gradient of it: found by a
    pristine nightly). With `forwarded=False`, an output the checkpoint's
    body returns as one of its inputs is left unused
    (`_computed_unused_outputs`)."""
    return unused_outputs_out(prog, _unused_outputs_of(lambda e: e.primitive is remat_p) if forwarded
                              else _computed_unused_outputs, lambda e: True,
                              _tangent_liveness(prog, pruned=True, zeros=False,
                                                checkpoint_reads=_remat3_checkpoint_reads))


def _computed_unused_outputs(e: Eqn, used: set) -> list:
    """The unused float outputs of checkpoint `e` that its body computes, not
    those it returns as one of its inputs: such an output's backward pass
    saves nothing of its own (its cotangent is the input's), and threading
    it out adds the threading's own residuals (a cond's zero for it in its
    other branches: found by a pristine nightly, f4ee7f5ef1). Nor those
    whose value a used output of `e` returns too (a program whose
    float0-tangent outputs were exposed, `float0_tangent_outputs`, returns
    them a second time): the backward pass runs for that one (found by a
    pristine nightly, 01778ea6f4)."""
    if e.primitive is not remat_p:
        return []
    body = e.params["jaxpr"]
    inputs = {v.id for v in body.inputs}
    returned = {o.id for v, o in zip(e.outputs, body.outputs) if v.id in used and isinstance(o, Var)}
    return [v for v, o in zip(e.outputs, body.outputs) if v.id not in used and is_float(v.type.dtype)
            and not (isinstance(o, Var) and (o.id in inputs or o.id in returned))]


def _staged_whole(e: Eqn) -> bool:
    """`e` is a checkpoint, call, scan or cond: an equation whose JVP JAX's
    partial evaluation stages as one equation computing every output's tangent."""
    return e.primitive in (remat_p, call_p, scan_p, cond_p)


def unused_linearize_outputs_out(prog: Program, through_conds: bool = True, top_level: bool = False,
                                 forwarded_hidden: bool = False) -> tuple[Program, int]:
    """`prog` with every float output nothing reads of each checkpoint,
    call, scan and cond that the program's outputs depend on made a program
    output (threaded out through the calls, cond branches and scan bodies
    around it, not through checkpoints), and how many were: linearization
    before direct linearization (pe.JaxprTrace, jax <= 0.6.2) stages the
    tangent of such an equation as one equation for every output, unused or
    not, and keeps the residuals that needs; a checkpoint's own body is
    partially evaluated as a jaxpr and DCE'd (ad_checkpoint.remat_partial_eval:
    pe.dce_jaxpr), so nothing inside one is kept. An output only a
    checkpoint's dead code reads is unused too (`_live_tangents`).
    `through_conds=False`:
    not out of cond branches; `top_level`: those of top-level equations
    alone (jits in a jit's body, linearized by its own partial-eval rule,
    keep none: found by a campaign on 0.4.36); `forwarded_hidden`: a top-level
    jit none of whose outputs has a read tangent is staged whole too where an
    input's tangent is read, for an output pjit's staging forwarded (jax
    0.4.29 to 0.5.3: the jit returned that input, whose readers read it
    instead) may have been it: a program traced by make_jaxpr has lost the
    output its linearization saw (found by a campaign on 0.4.36). Not an
    output whose tangent is a symbolic zero (`zero_tangents`: a round's):
    the equation's JVP rule returns no tangent for it (jvp_jaxpr's
    `out_nz`, instantiate=False), so nothing of it is staged (found by a
    release campaign on 0.4.36, 0fef3f486a: a checkpoint in a cond branch
    returning a round nothing reads)."""
    liveness = _tangent_liveness(prog, forwarded_hidden=forwarded_hidden)
    zero = liveness.symbolic_zeros()
    unused = _unused_outputs_of(_staged_whole)
    return unused_outputs_out(prog, lambda e, used: [v for v in unused(e, used) if v.id not in zero],
                              lambda e: not top_level and e.primitive is not remat_p
                              and (through_conds or e.primitive is not cond_p), liveness)


def unread_operands_out(prog: Program, forwarded_hidden: bool = False) -> tuple[Program, int]:
    """`prog` with every float operand of a cond, call or scan that its body
    (no branch of a cond) reads, and whose tangent is no symbolic zero
    (`zero_tangents`), made a program output, threaded out of the
    calls around it (a jitted program: the spelling's jit), and how many
    were: linearization before direct linearization stages such an equation
    with its operands' tangents whole, read or not, so the tangents of
    unread operands are computed, and the residuals they need saved (found
    by a campaign on 0.4.36: acos's output passed to a cond whose branches
    ignore it saves acos's derivative factor). `forwarded_hidden`: a
    top-level jit is live where an input's tangent is read, for an output
    pjit's staging forwarded away may have returned it
    (`_live_tangents`: found by a release campaign on 0.4.36, 927ac9c8b9)."""
    # threaded out of the calls, cond branches and scan bodies around them
    # (a cond branch's while loop whose output only a scan's unread operand
    # takes: found by a campaign on 0.4.25), not out of checkpoints, whose
    # partial evaluation prunes their bodies
    # (only equations whose tangent is live: JaxprTrace's partial evaluation
    # stages what the outputs' tangents reach, so a nested cond whose float
    # outputs nothing reads stages nothing: found on 0.4.25 and 0.4.36)
    liveness = _tangent_liveness(prog, forwarded_hidden=forwarded_hidden)
    zero = liveness.symbolic_zeros()
    # not an operand whose tangent is a symbolic zero (a constant passed in
    # through an outer cond): the JVP rule takes no tangent for it
    # (jax/_src/lax/control_flow/conditionals.py, _cond_jvp: ops_dot =
    # _prune_zeros(ops_dot); pjit, scan, remat JVPs filter ad.Zero alike),
    # so none is computed (found by a release campaign on 0.6.2, 87914f9e56)
    return unused_outputs_out(prog, lambda e, used: [a for a in _unread_operands(e) if a.id not in zero],
                              lambda e: e.primitive is not remat_p, liveness)


def _unread_operands(e: Eqn) -> list:
    """The float operands (Vars) of a cond, call, scan, while or checkpoint
    `e` whose tangents its body's linearization (no branch's) reads: unread
    by the body, or read only where the derivative does not need them
    (integer_pow(h, 0), a sum compared with zero: a checkpoint's, found on
    0.4.25, 0.4.36 and 0.6.2); not a loop's carries (the next iteration
    reads them)."""
    bodies = (list(e.params["branches"]) if e.primitive.name == "cond"
              else [e.params["jaxpr"]] if e.primitive.name in ("call", "scan") or e.primitive is remat_p
              else [e.params["body_jaxpr"]] if e.primitive.name == "while" else [])
    # a while's body takes its consts and the carries (_while_loop_jvp ignores the cond's
    # consts' tangents): a body const read only by dead code (found on 0.4.36)
    operands = (e.inputs[1:] if e.primitive.name == "cond"
                else e.inputs[e.params["cond_nconsts"]:] if e.primitive.name == "while" else e.inputs)
    carries = (set(range(e.params["num_consts"], e.params["num_consts"] + e.params["num_carry"]))
               if e.primitive.name == "scan" else set(range(e.params["body_nconsts"], len(operands)))
               if e.primitive.name == "while" else set())
    try:    # a body without its dead code: JVP + partial evaluation never needs it (found on 0.4.36)
        needed = [_tangents_read(dce(b)[0]) for b in bodies]
    except Exception:       # noqa: BLE001 -- a body the spec cannot linearize: nothing to say
        return []
    # a checkpoint's operand whose tangent its live body's JVP does not read
    # (unread, read by dead code only, or through stop_gradient) is pruned
    # with its tangent (remat_partial_eval DCEs the staged body and passes it
    # only the inputs that one reads: measured on 0.4.25, 0.4.36 and 0.6.2;
    # release campaign findings 06cbfe2920 and d413219730 on 0.6.2)
    read = _jvp_reads(bodies[0]) if e.primitive is remat_p else [True] * len(operands)
    return [a for i, a in enumerate(operands if bodies else ())
            if i not in carries and read[i] and isinstance(a, Var) and is_float(a.type.dtype)
            and not any(i in n for n in needed)]


def _jvp_reads(body: Program) -> list[bool]:
    """Which inputs of a checkpoint's `body` have a tangent the JVP program
    of its live code reads (the tangent of a dead equation's input is
    pruned with it, found on 0.6.2, 06cbfe2920; a dead tangent of a live
    equation is not, a sum compared with zero):
    remat_partial_eval passes its staged body only those, so another
    operand's tangent is never computed (an operand the body reads only
    through stop_gradient, whose JVP reads no tangent: found by a release
    campaign on 0.6.2, d413219730)."""
    live, primal_reads = dce(body)
    try:
        jvp, _ = spec.jvp_program(live, instantiate_zeros=False)
    except Exception:       # noqa: BLE001 -- no JVP the spec can build: the primal reads decide
        return primal_reads
    n = len(body.inputs)
    read = {x.id for q in jvp.eqns for x in q.inputs if isinstance(x, Var)} | {
        x.id for x in jvp.outputs if isinstance(x, Var)}
    positions = [i for i, t in enumerate(body.in_types) if is_differentiable(t)]
    out = [False] * n
    for i, v in zip(positions, jvp.inputs[n:]):
        out[i] = v.id in read
    return out


def _tangents_read(body: Program) -> set[int]:
    """The inputs of `body` whose tangents its linear program reads."""
    lin = spec.linearize(body)
    n_res = len(lin.residuals)
    tangent_ins = lin.linear.inputs[n_res:]
    positions = [i for i, d in enumerate(lin.diff_inputs) if d]
    read = {x.id for q in lin.linear.eqns for x in q.inputs if isinstance(x, Var)} | {
        x.id for x in lin.linear.outputs if isinstance(x, Var)}
    return {i for i, v in zip(positions, tangent_ins) if v.id in read}


def _unused_outputs_of(selects: Callable) -> Callable:
    """`unused_outputs_out`'s `picks`: the float outputs that nothing live
    reads of each equation e with selects(e)."""
    return lambda e, used: [v for v in e.outputs if v.id not in used and is_float(v.type.dtype)] if selects(e) else []


def unused_outputs_out(prog: Program, picks: Callable, enters: Callable,
                       liveness: Callable = None, roots: list | None = None) -> tuple[Program, int]:
    """`prog` with the values picks(e, ids the live equations read) of each
    live equation e made outputs of the program (each once), threaded out
    through the sub-programs of the live equations with enters(e)
    (`_unused_outputs_threaded`), and how many were. Dead equations (no
    program output depends on them, no effect) are left as they are.
    `liveness`: what is live and read (default `_live`); `roots`: which
    outputs are read (default all), given, for a sub-program, where its
    equation's unread outputs make part of it dead (`_pruned_bodies`)."""
    liveness = liveness or _live
    rooted = prog if roots is None else Program(prog.inputs, prog.eqns,
                                                [o for o, r in zip(prog.outputs, roots) if r])
    live, used = liveness(rooted)
    eqns, extra = [], []
    for e in prog.eqns:
        if id(e) not in live:       # dead code: JAX's partial evaluation drops it, and its backward pass
            eqns.append(e)
            continue
        body_roots = _body_roots(e, [v.id in used for v in e.outputs]) if _pruned_bodies(liveness) else None
        params, new_types = (_unused_outputs_threaded(e, picks, enters, liveness, body_roots) if enters(e)
                             else (e.params, []))
        new = [Var(t) for t in new_types]
        extra += new
        extra += [v for v in picks(e, used) if all(v is not o for o in extra)]
        eqns.append(Eqn(e.primitive, e.inputs, list(e.outputs) + new, params, why=e.why))
    return Program(prog.inputs, eqns, list(prog.outputs) + extra, input_names=prog.input_names), len(extra)


def _live(prog: Program) -> tuple[set, set]:
    """The ids of `prog`'s live equations (an output needed, transitively,
    by the program's outputs, or an effect) and of the variables that the
    live equations and the outputs read."""
    read = {a.id for a in prog.outputs if isinstance(a, Var)}
    live = set()
    for e in reversed(prog.eqns):
        if any(v.id in read for v in e.outputs) or has_effects(e):
            live.add(id(e))
            read |= {a.id for a in e.inputs if isinstance(a, Var)}
    return live, read


def _remat_jvp_reads(e: Eqn) -> list:
    """The operands of checkpoint `e` whose tangents remat2's remat_jvp
    reads: those its body (without dead code) reads."""
    return [a for a, u in zip(e.inputs, dce(e.params["jaxpr"])[1]) if u]


def _remat3_checkpoint_reads(e: Eqn) -> list:
    """Every operand of checkpoint `e`: remat3's RematTraced linearization
    instantiates each input tangent (`map(ad_util.instantiate, tangents)`),
    so a checkpoint's output read only by another checkpoint that never
    reads it has a live tangent (found by a pristine campaign, 6a79fea13c).
    The same inside a scan's, jit's or cond's body (`_checkpoints_whole`)."""
    return list(e.inputs)


_remat3_checkpoint_reads.checkpoints_whole = True


# a checkpoint that DCE keeps whole, every input read where any output is
# used (remat3's hi-primitive: VJPHiPrimitive.dce); no DCE rule of its own,
# never bound
_WHOLE_CHECKPOINT = spec.core.Primitive("remat", True)
spec.core.complex_rules.add(_WHOLE_CHECKPOINT)   # a checkpoint: complex values pass through it


def _checkpoints_whole(e: Eqn) -> Eqn:
    """`e` with every checkpoint in its sub-programs (at any depth) one that
    DCE keeps whole (`_WHOLE_CHECKPOINT`): so the inputs a scan's, jit's or
    cond's DCE keeps are those remat3's linearization reads tangents of (a
    checkpoint in a scan body that never reads an xs element still takes
    its tangent: found by a pristine nightly, aa3e22028c)."""
    def whole(p: Program) -> Program:
        return Program(p.inputs, [
            Eqn(_WHOLE_CHECKPOINT if x.primitive is remat_p else x.primitive, x.inputs, x.outputs,
                map_subprograms(x.params, whole), why=x.why, residual_outputs=x.residual_outputs)
            for x in p.eqns], p.outputs, input_names=p.input_names)
    return Eqn(e.primitive, e.inputs, e.outputs, map_subprograms(e.params, whole), why=e.why,
               residual_outputs=e.residual_outputs)


def _tangent_liveness(prog: Program, pruned: bool = False, zeros: bool = True,
                      checkpoint_reads: Callable = _remat_jvp_reads, forwarded_hidden: bool = False) -> Callable:
    """`_live_tangents` of `prog` and its sub-programs, knowing which of
    their values have a symbolic zero tangent (`zero_tangents`; none with
    `zeros=False`)."""
    zero = zero_tangents(prog) if zeros else frozenset()

    def liveness(p):
        # a hidden forward at top level only: a jit in a sub-program (another
        # jit's, a checkpoint's, a scan's or cond's body) was staged when that
        # body was traced, its forwarded output dropped before linearization
        # sees it (measured on 0.4.36: a jit nested in a jit saves nothing
        # where the same jit at top level saves what its operands' tangents
        # need)
        return _live_tangents(p, zero, pruned, checkpoint_reads, forwarded_hidden and p is prog)
    liveness.pruned = pruned        # sub-programs rooted at their equation's read outputs (`_body_roots`)
    # the spec's symbolic zeros, whatever `zeros` says (a threaded output's zeros read no such value)
    liveness.symbolic_zeros = functools.cache(lambda: zero if zeros else zero_tangents(prog))
    return liveness


def tangents_read(prog: Program) -> set:
    """The ids of `prog`'s values whose tangents its linearization reads
    (transitively, from its float outputs): not those only a comparison,
    a cond's index or an integer output takes (`_live_tangents`)."""
    return _live_tangents(prog)[1]


def _live_tangents(prog: Program, zero: frozenset = frozenset(), pruned: bool = False,
                   checkpoint_reads: Callable = _remat_jvp_reads, forwarded_hidden: bool = False) -> tuple[set, set]:
    """`_live` of the linear program: the equations some float output of
    which has its tangent read (transitively, by the program's float
    outputs) and not a symbolic zero (ids in `zero`: JAX's JaxprTrace stages
    no tangent equation for it; found by a campaign on 0.6.2: a scan whose
    only read output's tangent is zero keeps nothing of its unused carry),
    and what they read. A checkpoint reads the tangents of the operands
    `checkpoint_reads` gives (remat2: none its body without dead code does
    not read, remat_jvp passes it no tangent for them), and an equation reads no tangent for an output that
    only equations without a read float output take (a comparison feeding
    a select's predicate). So a staged-whole equation's output read only so
    is unused: its tangent computed, its residuals saved (found by campaigns
    on 0.6.2, a scan's ys only a checkpoint's dead code reads, and on 0.4.25,
    a checkpoint's output only a comparison reads). `forwarded_hidden`: a
    jit is live too where one of its operands' tangents is read
    (`_may_have_forwarded`)."""
    whole = getattr(checkpoint_reads, "checkpoints_whole", False)
    instantiated = _instantiated_integer_tangents(prog) if whole else set()
    read = {a.id for a in prog.outputs if isinstance(a, Var) and (is_float(a.type.dtype) or a.id in instantiated)}
    live = set()
    for e in reversed(prog.eqns):
        if not any(v.id in read and (is_float(v.type.dtype) and v.id not in zero or v.id in instantiated)
                   for v in e.outputs) and not (forwarded_hidden and _may_have_forwarded(e, read, zero)):
            continue
        live.add(id(e))
        inputs = e.inputs
        if e.primitive is remat_p:
            inputs = checkpoint_reads(e)
        elif not subprograms(e.params):
            inputs = _tangent_reading_inputs(e)
        elif pruned and e.primitive.name == "while":
            inputs = _while_tangent_reading_inputs(e)
        elif pruned and e.primitive is scan_p:
            inputs = _scan_tangents_read(e, [v.id in read for v in e.outputs], zero, checkpoint_reads)
        elif pruned and e.primitive is call_p:
            # a jit reads the tangents its body's linear program reads: its
            # linear half's DCE drops an unread input (pe.dce_jaxpr_pjit_rule);
            # a checkpoint's output only a jit of integer_pow[y=0] (whose JVP
            # is zeros) reads is unused (found by a pristine campaign,
            # a7964d40fc; in a scan body too)
            inputs = _body_tangents_read(e.params["jaxpr"], e.inputs, [v.id in read for v in e.outputs],
                                         zero, pruned, checkpoint_reads)
        elif pruned and e.primitive in dce_rules:
            inputs = _dce_kept_inputs(_checkpoints_whole(e) if whole else e, [v.id in read for v in e.outputs])
            if e.primitive is cond_p:
                # an operand a branch reads, but no branch's tangent (a branch's
                # stop_gradient of it: found by a pristine nightly, 68fb4a7b0c)
                unread = {id(a) for a in _unread_operands(e)}
                if whole:
                    # remat3: one a branch's checkpoint takes, whose linearization
                    # instantiates every input tangent and whose backward pass
                    # writes a zero cotangent into each, is read (found by a
                    # pristine campaign, 2c65b96caf: a nested checkpoint's output
                    # passed to an inner cond's checkpoint that never reads it)
                    unread -= {id(a) for b in e.params["branches"] for a in _body_tangents_read(
                        b, e.inputs[1:], [v.id in read for v in e.outputs], zero, pruned, checkpoint_reads)}
                inputs = [a for a in inputs if id(a) not in unread]
        read |= {a.id for a in inputs if isinstance(a, Var)}
    return live, read


def _instantiated_integer_tangents(prog: Program) -> set:
    """remat3: the ids of `prog`'s integer values whose (float0) tangent a
    checkpoint's linearization makes, an equation's output and no symbolic
    zero: a checkpoint's integer outputs, and a cond's or scan's outputs
    that its branch or body returns as such. A cond branch or scan body
    returning one keeps the checkpoint's linearization live, and with it
    what its input tangents need, though no float tangent is read
    (measured on 0.10.2: jax.jvp of the pullback of a cond whose branch
    returns a checkpoint's integer output, the checkpoint reading
    igammac's output, raises igamma_grad_a's missing derivative under
    remat3 and computes under remat2, and computes where the branch
    returns that output plus one; found by a pristine nightly, 63dc385fd3)."""
    ids = set()
    for e in prog.eqns:
        if e.primitive is remat_p:
            ids |= {v.id for v in e.outputs if not is_float(v.type.dtype)}
        elif e.primitive in (cond_p, scan_p):
            for body in (e.params["branches"] if e.primitive is cond_p else (e.params["jaxpr"],)):
                inner = _instantiated_integer_tangents(body)
                ids |= {v.id for v, o in zip(e.outputs, body.outputs) if isinstance(o, Var) and o.id in inner}
    return ids


def _may_have_forwarded(e: Eqn, read: set, zero: frozenset) -> bool:
    """`e` is a jit (a named call: an anonymous closed_call has no staging
    rule) one of whose float operands, its tangent no symbolic zero, has its
    tangent read (ids in `read`): from jax 0.4.29 to 0.5.3 pjit's staging
    rule drops a jit output that is one of its inputs, the readers reading
    the input (jax/_src/pjit.py: pjit_staging_rule, _pjit_forwarding), so a
    program traced by make_jaxpr may have lost such an output, while the
    linearization of the function (jax/_src/interpreters/ad.py: linearize,
    JVP then pe.trace_to_jaxpr_nounits) binds the jit with it: _pjit_jvp
    gives it a nonzero tangent, and _pjit_partial_eval stages the jit's
    tangent part for it with the tangents of all the jit's operands."""
    return e.primitive is call_p and e.params.get("name") is not None and any(
        isinstance(a, Var) and a.id in read and is_float(a.type.dtype) and a.id not in zero for a in e.inputs)


def _body_tangents_read(body: Program, operands: list, out_used: list, zero: frozenset, pruned: bool,
                        checkpoint_reads: Callable) -> list:
    """The `operands` bound to `body`'s inputs (a jit's or scan's body, a
    cond branch) whose tangents `body` reads (`_live_tangents`, its outputs
    read as `out_used`)."""
    rooted = Program(body.inputs, body.eqns, [o for o, u in zip(body.outputs, out_used) if u])
    ids = _live_tangents(rooted, zero, pruned, checkpoint_reads)[1]
    return [a for a, v in zip(operands, body.inputs) if v.id in ids]


def _scan_tangents_read(e: Eqn, out_used: list, zero: frozenset, checkpoint_reads: Callable) -> list:
    """The operands of scan `e` whose tangents its linear scan keeps, its
    outputs read as `out_used`: JAX's _scan_dce_rule (jax/_src/lax/
    control_flow/loops.py), a fixpoint over the carries in which a carry
    whose output is used keeps its input too, read by the body or not
    (`instantiate=... used_carry_out`: a carry whose body returns a const
    keeps the tangent of its initial value, and with it a checkpoint that
    computes that value: found by a pristine nightly, 48ce33e916), and the
    consts and xs the body reads for the used outputs."""
    body, nc, ncar = e.params["jaxpr"], e.params["num_consts"], e.params["num_carry"]
    used_carry = list(out_used[:ncar])
    while True:
        rooted = used_carry + list(out_used[ncar:])
        reads = {id(a) for a in _body_tangents_read(body, e.inputs, rooted, zero, True, checkpoint_reads)}
        carry_in = [id(a) in reads for a in e.inputs[nc:nc + ncar]]
        grown = [u or c for u, c in zip(used_carry, carry_in)]
        if grown == used_carry:
            break
        used_carry = grown
    return [a for i, a in enumerate(e.inputs) if id(a) in reads or (nc <= i < nc + ncar and used_carry[i - nc])]


def _while_tangent_reading_inputs(e: Eqn) -> list:
    """The operands of a while loop `e` whose tangents its JVP reads: the
    carries and the body's consts its body (without dead code) reads; no
    cond const (_while_loop_jvp takes no tangent for them). A body const the
    body never reads leaves the checkpoint computing it with an unread
    output tangent (found by a campaign's reduced finding: remat3 saves what
    that tangent needs, the checkpoint's backward pass running whole)."""
    nc, nb = e.params["cond_nconsts"], e.params["body_nconsts"]
    body_reads = dce(e.params["body_jaxpr"])[1]
    return [a for i, a in enumerate(e.inputs[nc:]) if i >= nb or body_reads[i]]


def _dce_kept_inputs(e: Eqn, used_outputs: list) -> list:
    """The inputs of `e` its DCE rule keeps for the outputs used (JAX's
    dce_jaxpr of the linear program: a cond operand no branch reads is
    pruned by _cond_dce_rule, and with it the tangent that would flow in)."""
    return [a for a, k in zip(e.inputs, dce_rules[e.primitive](e, used_outputs)[1]) if k]


def _tangent_reading_inputs(e: Eqn) -> list:
    """The inputs of equation `e` whose tangents its JVP reads (the spec's
    rule: none for stop_gradient, found on 0.6.2: a checkpoint's output only
    a stop_gradient reads is unused); all of them where the spec cannot
    linearize it alone."""
    operands = [a for a in e.inputs if isinstance(a, Var)]
    ins = [Var(a.type) for a in operands]
    sub = dict(zip((a.id for a in operands), ins))
    outs = [Var(v.type) for v in e.outputs]
    eqn = Eqn(e.primitive, [sub.get(a.id, a) if isinstance(a, Var) else a for a in e.inputs], outs, e.params)
    try:
        read = _tangents_read(Program(ins, [eqn], outs))
    except Exception:       # noqa: BLE001 -- no linearization of its own: every tangent may be read
        return list(e.inputs)
    return [a for i, a in enumerate(operands) if i in read]


def _pruned_bodies(liveness: Callable) -> bool:
    return getattr(liveness, "pruned", False)


def _body_roots(e: Eqn, out_used: list) -> list:
    """Which outputs of `e`'s sub-programs are read, its outputs read as
    `out_used`: a scan body's carries always (the next iteration reads them);
    every output of a checkpoint's body (its unused outputs are made outputs
    of the program: remat3 runs a live checkpoint's backward pass whole, a
    nested checkpoint's too, whose output only the unused one takes: found
    by campaigns under injected bugs, reproduced on pristine jax 0.10.2)."""
    if e.primitive is remat_p:
        return [True] * len(out_used)
    if e.primitive is scan_p:
        return [True] * e.params["num_carry"] + out_used[e.params["num_carry"]:]
    return out_used


def _unused_outputs_threaded(e: Eqn, picks: Callable, enters: Callable, liveness: Callable,
                             roots: list | None = None) -> tuple[dict, list]:
    """`e`'s params with the unused outputs of its sub-programs made their
    outputs (`unused_outputs_out`), and the types of the outputs that adds
    to `e`: a checkpoint's, call's or scan's body (a scan stacks them), a
    cond's branches (the other branches return zeros there)."""
    if e.primitive in (remat_p, call_p, scan_p):
        body, n = unused_outputs_out(e.params["jaxpr"], picks, enters, liveness, roots)
        if not n:
            return e.params, []
        new = body.out_types[len(body.outputs) - n:]
        if e.primitive is scan_p:      # extra body outputs are stacked ys
            new = [ArrayType((e.params["length"],) + t.shape, t.dtype) for t in new]
        return dict(e.params, jaxpr=body), new
    if e.primitive is cond_p:
        split = [unused_outputs_out(b, picks, enters, liveness, roots) for b in e.params["branches"]]
        if not any(n for _, n in split):
            return e.params, []
        extras = [b.outputs[len(b.outputs) - n:] for b, n in split]
        branches = []
        for i, (b, n) in enumerate(split):
            eqns, mine = list(b.eqns), []
            for j, outs in enumerate(extras):
                for a in outs:
                    if j == i:
                        mine.append(a)
                    else:
                        zero_eqns, zero = zeros_read_linearly(b, a.type, liveness.symbolic_zeros())
                        eqns += zero_eqns
                        mine.append(zero)
            branches.append(Program(b.inputs, eqns, b.outputs[:len(b.outputs) - n] + mine,
                                    input_names=b.input_names))
        return dict(e.params, branches=tuple(branches)), branches[0].out_types[len(e.outputs):]
    return e.params, []


def zeros_read_linearly(branch: Program, t: ArrayType, zero: frozenset) -> tuple[list, object]:
    """(equations, atom): zeros of type `t` for a branch that only passes a
    threaded output on, computed as 0 * sum(x) from a float input x of the
    branch whose tangent is not a symbolic zero (ids in `zero`: not a
    constant operand, found by a pristine campaign, adaec2e930), or a
    literal where it has none. So the threaded output's tangent there is
    linear in x's (no residual), not a symbolic zero, which the cond's
    linearization would instantiate and save: JAX's real cond has no such
    output. An x the branch reads itself comes first: its tangent is
    computed anyway, where another's (an operand only that branch passes
    over, sin(a)) would need residuals of its own (found by a pristine
    nightly, 05f0d47a5d: cos saved for it). Read by live code only: an
    operand of dead code has no tangent computed (found by a nightly,
    00592ff8de: the cos of the operand a dead `mul` read)."""
    live, _ = dce(branch)
    read = {a.id for e in live.eqns for a in e.inputs if isinstance(a, Var)} | {
        a.id for a in live.outputs if isinstance(a, Var)}
    usable = [v for v in branch.inputs if v.type.dtype == t.dtype and v.id not in zero]
    x = next((v for v in usable if v.id in read), usable[0] if usable else None)
    if x is None:
        return [], spec.ir.Literal(np.zeros(t.shape, t.dtype), t)
    return _zero_times_sum(x, t)


def _zero_times_sum(x: Var, t: ArrayType) -> tuple[list, Var]:
    """(equations, var): 0 * sum(x), broadcast to type `t` (x of t's dtype):
    zeros whose tangent is linear in x's."""
    total, scaled, zeros = Var(ArrayType((), t.dtype)), Var(ArrayType((), t.dtype)), Var(t)
    zero = spec.ir.Literal(np.zeros((), t.dtype), ArrayType((), t.dtype))
    return [Eqn(reduce_sum_p, [x], [total], dict(axes=tuple(range(x.type.ndim)))),
            Eqn(mul_p, [total, zero], [scaled], {}),
            Eqn(broadcast_in_dim_p, [scaled], [zeros], dict(shape=t.shape, broadcast_dimensions=()))], zeros


# -- remat3's derivatives of checkpoints (jax 0.10.2) -------------------------
# A checkpoint differentiated inside the checked function (jax.grad,
# jax.jvp, jax.jacfwd, jax.jacrev of a checkpoint, the function then
# differentiated again by the check) is staged by remat3 as plain
# equations: RematTraced's jvp and linearize rules (jax/_src/interpreters/
# remat.py) emit the body's derivative inline (with optimization barriers
# on a linearization's inputs and outputs), not as a checkpoint, so the
# outer differentiation saves the derivative's intermediates. remat2 keeps
# a checkpoint around it (ad_checkpoint.remat_jvp: a remat2 of the JVP
# program; remat_partial_eval: a differentiated=True remat2), and so does
# the spec.

def unread_effectful_checkpoints_emptied(prog: Program) -> tuple[Program, int]:
    """`prog` with every checkpoint that has an effect and whose outputs
    nothing reads made one with no outputs (its body's effects kept), at
    any depth, and how many were: a staged checkpoint without outputs is
    dropped (spec.remat._staged_if_reached), so the backward pass neither
    replays it nor reads what it reads; the forward pass runs its effect."""
    counts = [0]

    def emptied(p: Program) -> Program:
        read = {a.id for e in p.eqns for a in e.inputs if isinstance(a, Var)} | {
            a.id for a in p.outputs if isinstance(a, Var)}
        eqns = []
        for e in p.eqns:
            if e.primitive is remat_p and e.outputs and has_effects(e) and not any(v.id in read for v in e.outputs):
                body, _ = dce(e.params["jaxpr"], [False] * len(e.outputs))
                eqns.append(Eqn(e.primitive, e.inputs, [], dict(e.params, jaxpr=body), why=e.why))
                counts[0] += 1
            else:
                eqns.append(Eqn(e.primitive, e.inputs, e.outputs, map_subprograms(e.params, emptied), why=e.why,
                                residual_outputs=e.residual_outputs))
        return Program(p.inputs, eqns, p.outputs, input_names=p.input_names)
    return emptied(prog), counts[0]


def inline_checkpoints(prog: Program, keep_top_level: bool) -> Program:
    """`prog` with every checkpoint replaced by its body's equations (the
    top-level ones kept, with theirs inlined, if `keep_top_level`)."""
    return _inlined(prog, remat_p, keep_top_level)


def jits_inlined(prog: Program) -> tuple[Program, int]:
    """`prog` with every jit, at any depth, replaced by its body's
    equations, and how many there were."""
    return _inlined(prog, call_p, False), sum(e.primitive is call_p for e in all_eqns(prog))


def dead_code_hoisted(prog: Program, out_of: tuple = (cond_p,)) -> tuple[Program, int]:
    """`prog` with a copy of the dead code of each `out_of` equation's
    sub-programs (at any depth: the equations its outputs do not need, with
    those they read) computed before the equation, and how many equations
    were copied: a cond branch's on the cond's operands, a scan body's on
    the scan's consts, its carries' initial values and its xs' first
    slices. What a linearization that keeps such dead code differentiates,
    placed where the spec's keeps it too: the top level."""
    copied = [0]
    return _dead_code_hoisted(prog, tuple(out_of), copied), copied[0]


def _dead_code_hoisted(prog: Program, out_of: tuple, copied: list) -> Program:
    eqns = []
    for e in prog.eqns:
        params = map_subprograms(e.params, lambda s: _dead_code_hoisted(s, out_of, copied))
        for body, operands in _bodies_on_operands(e, params, eqns) if e.primitive in out_of else ():
            env = dict(zip(body.inputs, operands))
            sub = lambda a: env.get(a, a) if isinstance(a, Var) else a  # noqa: E731
            for b in _dead_code(body):
                outs = [Var(v.type) for v in b.outputs]
                eqns.append(Eqn(b.primitive, [sub(a) for a in b.inputs], outs, b.params))
                env.update(zip(b.outputs, outs))
                copied[0] += 1
        eqns.append(Eqn(e.primitive, e.inputs, e.outputs, params, why=e.why, residual_outputs=e.residual_outputs))
    return Program(prog.inputs, eqns, prog.outputs, input_names=prog.input_names)


def checkpoint_dead_code_live(prog: Program) -> tuple[Program, int]:
    """`prog` with the dead float values of each checkpoint's body (at any
    depth) made live, and how many were: each added, times zero and
    summed, to the body's first float output, as it is (the checkpoint's
    outputs and the program's keep their types). What a differentiation
    that runs a checkpoint's body as written, dead code and its
    derivative included, meets (remat3's)."""
    count = [0]

    def walk(p: Program, in_checkpoint: bool) -> Program:
        eqns = [Eqn(e.primitive, e.inputs, e.outputs,
                    map_subprograms(e.params, lambda s: walk(s, in_checkpoint or e.primitive is remat_p)),
                    why=e.why, residual_outputs=e.residual_outputs) for e in p.eqns]
        p = Program(p.inputs, eqns, p.outputs, input_names=p.input_names)
        return _made_live(p, count) if in_checkpoint else p
    return walk(prog, False), count[0]


def _made_live(body: Program, count: list) -> Program:
    """`body` with its dead values of its first float output's dtype added
    to that output, times zero (`checkpoint_dead_code_live`)."""
    first = next((k for k, a in enumerate(body.outputs) if isinstance(a, Var) and is_float(a.type.dtype)), None)
    if first is None:
        return body
    out = body.outputs[first]
    live = {v.id for e in dce(body)[0].eqns for v in e.outputs}
    dead = [v for e in body.eqns for v in e.outputs if v.id not in live and v.type.dtype == out.type.dtype]
    if not dead:
        return body
    eqns, total = list(body.eqns), out
    for v in dead:
        zero_eqns, spread = _zero_times_sum(v, out.type)
        added = Var(out.type)
        eqns += zero_eqns + [Eqn(add_p, [total, spread], [added], {})]
        total = added
        count[0] += 1
    outputs = list(body.outputs)
    outputs[first] = total
    return Program(body.inputs, eqns, outputs, input_names=body.input_names)


def _bodies_on_operands(e: Eqn, params: dict, eqns: list) -> list:
    """[(sub-program, what its inputs read before `e`)] of a cond (each
    branch, on the operands) or a scan (its body, on the consts, the
    carries' initial values and each xs' first slice, whose equations are
    appended to `eqns`)."""
    if e.primitive is cond_p:
        return [(branch, e.inputs[1:]) for branch in params["branches"]]
    body, n = params["jaxpr"], params["num_consts"] + params["num_carry"]
    firsts = []
    for xs, v in zip(e.inputs[n:], body.inputs[n:]):
        row, first = Var(ArrayType((1,) + v.type.shape, v.type.dtype)), Var(v.type)
        eqns += [Eqn(slice_p, [xs], [row], dict(start_indices=(0,) * len(xs.type.shape),
                                               limit_indices=(1,) + xs.type.shape[1:], strides=None)),
                 Eqn(reshape_p, [row], [first], dict(new_sizes=v.type.shape, dimensions=None))]
        firsts.append(first)
    return [(body, list(e.inputs[:n]) + firsts)]
def _dead_code(prog: Program) -> list:
    """The equations of `prog` its outputs do not need (spec.dce), with the
    equations those read, in program order."""
    live = {v.id for e in dce(prog)[0].eqns for v in e.outputs}
    dead = [e for e in prog.eqns if not any(v.id in live for v in e.outputs)]
    needed, out = set(), []
    for e in reversed(prog.eqns):
        if any(e is d for d in dead) or any(v.id in needed for v in e.outputs):
            out.append(e)
            needed.update(a.id for a in e.inputs if isinstance(a, Var))
    return out[::-1]


def all_eqns(prog: Program):
    """Every equation of `prog`, at any depth, outer ones first."""
    for e in prog.eqns:
        yield e
        for _, sub in subprograms(e.params):
            yield from all_eqns(sub)


def _inlined(prog: Program, primitive, keep_top_level: bool) -> Program:
    """`prog` with every `primitive` equation (one with a body, `jaxpr`)
    replaced by its body's equations (the top-level ones kept, with theirs
    inlined, if `keep_top_level`)."""
    env = {}
    sub = lambda a: env.get(a, a) if isinstance(a, Var) else a  # noqa: E731
    eqns = []
    for e in prog.eqns:
        params = map_subprograms(e.params, lambda s: _inlined(s, primitive, False))
        inputs = [sub(a) for a in e.inputs]
        if e.primitive is primitive and not keep_top_level:
            body_env = dict(zip(params["jaxpr"].inputs, inputs))
            body_sub = lambda a: body_env.get(a, a) if isinstance(a, Var) else a  # noqa: E731
            for b in params["jaxpr"].eqns:
                outs = [Var(v.type) for v in b.outputs]
                eqns.append(Eqn(b.primitive, [body_sub(a) for a in b.inputs], outs, b.params))
                body_env.update(zip(b.outputs, outs))
            env.update(zip(e.outputs, [body_sub(a) for a in params["jaxpr"].outputs]))
        else:
            eqns.append(Eqn(e.primitive, inputs, e.outputs, params, why=e.why,
                            residual_outputs=e.residual_outputs))
    return Program(prog.inputs, eqns, [sub(a) for a in prog.outputs], input_names=prog.input_names)


def float_round_trips_out(prog: Program) -> tuple[Program, int]:
    """`prog` with every cast of a float to a narrower float and straight
    back (convert_element_type T -> N -> T) replaced by the value itself,
    at any depth; and how many there were."""
    producers, env, count, eqns = {}, {}, 0, []
    read = lambda a: env.get(a.id, a) if isinstance(a, Var) else a  # noqa: E731
    for e in prog.eqns:
        counts = []
        params = map_subprograms(e.params, lambda sub: _counted(float_round_trips_out(sub), counts))
        count += sum(counts)
        narrowed = producers.get(e.inputs[0].id) if e.inputs and isinstance(e.inputs[0], Var) else None
        if e.primitive.name == "convert_element_type" and narrowed is not None and _round_trip(narrowed, e):
            env[e.outputs[0].id] = read(narrowed.inputs[0])
            count += 1
            continue
        e = Eqn(e.primitive, [read(a) for a in e.inputs], e.outputs, params, why=e.why,
                residual_outputs=e.residual_outputs)
        producers.update({v.id: e for v in e.outputs})
        eqns.append(e)
    return Program(prog.inputs, eqns, [read(a) for a in prog.outputs], input_names=prog.input_names), count


def constant_transposes_bitcast(prog: Program) -> tuple[Program, int]:
    """`prog` with every transpose of a constant (a non-identity permutation
    of a Literal array) replaced by that constant reshaped to the transposed
    shape (its buffer read in the new shape, a bitcast), at any depth; and
    how many there were."""
    env, count, eqns = {}, 0, []
    read = lambda a: env.get(a.id, a) if isinstance(a, Var) else a  # noqa: E731
    for e in prog.eqns:
        counts = []
        params = map_subprograms(e.params, lambda sub: _counted(constant_transposes_bitcast(sub), counts))
        count += sum(counts)
        x = e.inputs[0] if e.inputs else None
        if (e.primitive.name == "transpose" and isinstance(x, Literal) and not x.is_scalar
                and tuple(e.params["permutation"]) != tuple(range(len(e.params["permutation"])))):
            env[e.outputs[0].id] = Literal(np.asarray(x.value).reshape(e.outputs[0].type.shape), e.outputs[0].type)
            count += 1
            continue
        eqns.append(Eqn(e.primitive, [read(a) for a in e.inputs], e.outputs, params, why=e.why,
                        residual_outputs=e.residual_outputs))
    return Program(prog.inputs, eqns, [read(a) for a in prog.outputs], input_names=prog.input_names), count


def _counted(result: tuple, counts: list):
    """A (program, count) pair's program, its count appended to `counts`."""
    counts.append(result[1])
    return result[0]


def _round_trip(narrowing: Eqn, widening: Eqn) -> bool:
    """`widening` casts back what `narrowing` cast to a narrower float."""
    if narrowing.primitive.name != "convert_element_type":
        return False
    t, n, w = narrowing.inputs[0].type.dtype, narrowing.outputs[0].type.dtype, widening.outputs[0].type.dtype
    return is_float(t) and is_float(n) and np.dtype(n).itemsize < np.dtype(t).itemsize and w == t


def zero_tangents(prog: Program, nonzeros=None) -> frozenset:
    """The ids of the variables of `prog` and of its sub-programs whose
    tangent is a symbolic zero in the spec's linearization (JAX's `ad.Zero`:
    an integer value, floor's output, a loop carry only zeros reach), the
    inputs' tangents nonzero where `nonzeros` says (default: every float
    input). A sub-program's inputs are nonzero as its equation's operands
    are, a loop's carries by the loop's fixpoint (`_body_nonzeros`)."""
    nonzeros = [is_float(t.dtype) for t in prog.in_types] if nonzeros is None else list(nonzeros)
    nonzero = _nonzero_tangents(prog, nonzeros)
    zero = {i for i, nz in nonzero.items() if not nz}
    for e in prog.eqns:
        flags = [isinstance(a, Var) and nonzero.get(a.id, False) for a in e.inputs]
        for body, body_nonzeros in _body_nonzeros(e, flags):
            zero |= zero_tangents(body, body_nonzeros)
    return frozenset(zero)


def _nonzero_tangents(prog: Program, nonzeros: list) -> dict:
    """id -> whether its tangent is nonzero, for `prog`'s inputs and the
    outputs of its equations (the spec's JVP of the program returning them
    all, zeros not instantiated); every float value where the spec cannot
    linearize the program."""
    values = list(prog.inputs) + [v for e in prog.eqns for v in e.outputs]
    try:
        _, out_nz = spec.jvp_program(Program(prog.inputs, prog.eqns, values), nonzeros, instantiate_zeros=False,
                                     known_tangents_are_zero=True)
    except Exception:       # noqa: BLE001 -- no linearization: every float value may carry a tangent
        out_nz = [is_float(v.type.dtype) for v in values]
    return {v.id: bool(nz) for v, nz in zip(values, out_nz)}


def _body_nonzeros(e: Eqn, flags: list) -> list:
    """(sub-program, its inputs' nonzero tangents) for equation `e` whose
    operands' are `flags`: a cond's branches take the operands after the
    index; a scan's and a while body's carries are nonzero where the
    initial value or, iterated to a fixpoint, the body's new carry is (the
    scan and while JVP rules' fixpoint); a while's cond takes no tangent."""
    name = e.primitive.name
    if name == "cond":
        return [(b, flags[1:]) for b in e.params["branches"]]
    if name == "scan":
        nc, nk = e.params["num_consts"], e.params["num_carry"]
        return [(e.params["jaxpr"], _carry_fixpoint(e.params["jaxpr"], flags, nc, nk))]
    if name == "while":
        cc, bc = e.params["cond_nconsts"], e.params["body_nconsts"]
        carries = flags[cc + bc:]
        body = e.params["body_jaxpr"]
        return [(e.params["cond_jaxpr"], [False] * len(e.params["cond_jaxpr"].inputs)),
                (body, _carry_fixpoint(body, flags[cc:cc + bc] + carries, bc, len(carries)))]
    return [(sub, flags if len(flags) == len(sub.inputs) else [is_float(t.dtype) for t in sub.in_types])
            for _, sub in subprograms(e.params)]


def _carry_fixpoint(body: Program, flags: list, n_consts: int, n_carry: int) -> list:
    """A loop body's inputs' nonzero tangents: its carries' grown until the
    body's new carries add none (spec.prims_scan.carry_fixpoint)."""
    def split(in_flags, carry_flags):
        nonzero = _nonzero_tangents(body, in_flags)
        return SimpleNamespace(out_unknowns=[isinstance(o, Var) and nonzero.get(o.id, False) for o in body.outputs])
    _, carry = carry_fixpoint(body, flags, n_consts, n_carry, split)
    return flags[:n_consts] + carry + flags[n_consts + n_carry:]


def effectful_loops_held_constant(prog: Program, *, in_jits_only: bool = False) -> tuple[Program, int]:
    """`prog` with the operands with a nonzero tangent (`zero_tangents`) of
    each while loop that has an effect and whose carries get no tangent from
    them passed through stop_gradient, outside checkpoints (with
    `in_jits_only`, inside jits only), and how many loops were: linearizing
    it, the loop is known and nothing is staged for it. Its values and
    derivatives are `prog`'s; only the whole loop JAX stages beside the known
    one for the operands' tangents is gone, which JaxprTrace linearization
    drops (linearize-drops-an-effectful-loop-it-stages-without-outputs)."""
    zero, counts = zero_tangents(prog), [0]

    def held(p: Program, holding: bool) -> Program:
        eqns = []
        for e in p.eqns:
            tangents = [isinstance(a, Var) and is_float(a.type.dtype) and a.id not in zero for a in e.inputs]
            if (holding and e.primitive in loops_until_a_value and has_effects(e) and any(tangents)
                    and not any(dependence_rules[e.primitive](e, tangents))):
                eqns += _held_constant(e, tangents)
                counts[0] += 1
            elif e.primitive is remat_p:        # a checkpoint's partial eval stages the loop whole anyway
                eqns.append(e)
            else:
                inner = functools.partial(held, holding=holding or e.primitive is call_p)
                eqns.append(Eqn(e.primitive, e.inputs, e.outputs, map_subprograms(e.params, inner), why=e.why,
                                residual_outputs=e.residual_outputs))
        return Program(p.inputs, eqns, p.outputs, input_names=p.input_names)
    return held(prog, not in_jits_only), counts[0]


def _held_constant(e: Eqn, flags: list) -> list:
    """`e` with its flagged operands passed through stop_gradient first."""
    eqns, inputs = [], []
    for a, flag in zip(e.inputs, flags):
        if flag:
            v = Var(a.type)
            eqns.append(Eqn(stop_gradient_p, [a], [v], {}))
            a = v
        inputs.append(a)
    return eqns + [Eqn(e.primitive, inputs, e.outputs, e.params, why=e.why)]
