"""`scan`: a loop over the leading axis of its `xs` (JAX's `lax.scan`).

    scan[jaxpr, length, reverse, num_consts, num_carry, unroll](*consts, *init, *xs)
        carry = init
        for i in range(length) (backwards with reverse):
            carry, y[i] = jaxpr(*consts, *carry, *[x[i] for x in xs])
        return (*carry, *ys)        # each y stacked: f32[length, ...]

`unroll` changes how XLA compiles the loop, never what it computes: the spec
keeps it only so that programs round-trip. The rules follow jax 0.10.2's
(jax/_src/lax/control_flow/loops.py), because what a scan saves for the
backward pass depends on their shape:

* JVP (`_scan_jvp`): the body's JVP, with a fixpoint deciding which carries
  have nonzero tangents.
* Linearization (`_scan_linearize`, `_scan_partial_eval`): the body is split
  with a fixpoint deciding which carries are unknown. A residual that is a
  known const or xs of the scan is forwarded (the scan's own input is
  saved: "from the argument w"); one computed from known consts alone is
  *hoisted* out of the loop (computed once, before it: "output of sin");
  every other residual is stacked over the iterations by the known scan
  ("output of scan", f32[length, ...]).
* Inside a checkpoint (`_scan_partial_eval_custom`): the body is split by
  the checkpoint's policy; every input is available to the staged scan, the
  known half is a `closed_call` (hoisted loop-invariant residuals, then the
  known scan) whose outputs are the residuals ("output of closed_call").
* Transpose: a scan of the transposed body in the other direction, the
  cotangents of linear consts accumulated in the carry.
* Batching (`_scan_batching_rule`): batched consts and carries at axis 0,
  batched xs and ys at axis 1, with a fixpoint over the carries.
"""
from __future__ import annotations

import contextvars
from typing import NamedTuple

from spec.core import (complex_rules, JaxFacts, has_effects, jax_facts, PrimitiveError, UndefinedPrimal, Zero, batch_rules, bind, building, cost_rules,
                       dce_rules, eval_program_traced, eval_rules, instantiate, is_undefined,
                       jaxpr_trace_rules, jvp_rules, linearizes_in_order, partial_eval_rules, primitive, shape_rules, to_atom,
                       transpose_rules, zeros_like_type)
from spec.ir import ArrayType, Eqn, Literal, Program, Var, is_key
from spec.jvp import dependence_rules, jaxpr_linearized, output_dependence, program_dependence
from spec.partial_eval import TANGENT_ZERO, clone_into, dce, inline_known, literal_operands_inline, partial_eval
from spec.batching import move_to, vmap_program
from spec.evaluate import evaluate
from spec.explain import eqn_flops
from spec.jvp import jvp_traced, linearizing
from spec.prims_call import call, call_p
from spec.prims_elementwise import add_any
from spec.remat import ask_policies
from spec.transpose import transpose
import numpy as np

scan_p = primitive("scan", ["jaxpr", "length", "reverse", "num_consts", "num_carry", "unroll"],
                   multiple_results=True)
jax_facts[scan_p] = JaxFacts("scan", "")   # bound structurally (oracle/to_jax.py)


def scan(body, init, xs, consts=(), length=None, reverse=False, unroll=1):
    """lax.scan: `body(carry, x, *consts) -> (carry, y)`, where carry, x and y
    are each a traced array, a tuple/list of them, or None (nothing). The
    body may not close over traced values: pass them in `consts`.
    Returns (final carry, stacked ys), shaped like body's."""
    def flat(v):
        return [] if v is None else list(v) if isinstance(v, (tuple, list)) else [v]
    init_l, xs_l, consts_l = flat(init), flat(xs), list(consts)
    type_of = lambda v: to_atom(v).type       # a traced value or a constant (a literal)
    if length is None:
        if not xs_l:
            raise TypeError("scan: length is needed when there are no xs")
        length = type_of(xs_l[0]).shape[0]
    for x in xs_l:
        if not type_of(x).shape or type_of(x).shape[0] != length:
            raise TypeError(f"scan: every xs must have leading axis {length}, got {type_of(x)}")
    x_types = [_unstacked(type_of(x)) for x in xs_l]
    shapes = {}

    def unflat(vals, like):
        return None if like is None else tuple(vals) if isinstance(like, (tuple, list)) else vals[0]

    with building() as b:
        c_in = [b.new_input(type_of(c)) for c in consts_l]
        carry_in = [b.new_input(type_of(c)) for c in init_l]
        x_in = [b.new_input(t) for t in x_types]
        new_carry, y = body(unflat(carry_in, init), unflat(x_in, xs) if xs_l else None, *c_in)
        carry_out, ys_out = flat(new_carry), flat(y)
        if len(carry_out) != len(init_l) or isinstance(new_carry, (tuple, list)) != isinstance(init, (tuple, list)):
            raise TypeError(f"scan: the body must return a carry shaped like init ({len(init_l)} "
                            f"value(s)), got {len(carry_out)}")
        shapes["y"] = y
        prog = b.build(c_in + carry_in + x_in, carry_out + ys_out)
    outs = bind(scan_p, *consts_l, *init_l, *xs_l, jaxpr=prog, length=int(length), reverse=bool(reverse),
                num_consts=len(consts_l), num_carry=len(init_l), unroll=unroll)
    n = len(init_l)
    return unflat(outs[:n], init), unflat(outs[n:], shapes["y"])


def _split(seq, num_consts, num_carry):
    seq = list(seq)
    return seq[:num_consts], seq[num_consts:num_consts + num_carry], seq[num_consts + num_carry:]


def _stacked(t: ArrayType, length: int) -> ArrayType:
    return ArrayType((length,) + t.shape, t.dtype, t.memory_space)


def _unstacked(t: ArrayType) -> ArrayType:
    """One iteration's slice of a stacked xs, in the memory it is in (an
    offloaded residual's: found by a pristine nightly, 200d4f9252)."""
    return ArrayType(t.shape[1:], t.dtype, t.memory_space)


def _scan_shape(*in_types, jaxpr, length, reverse, num_consts, num_carry, unroll):
    if not isinstance(jaxpr, Program):
        raise PrimitiveError(scan_p, f"param jaxpr must be a Program, got {type(jaxpr).__name__}")
    if not isinstance(length, int) or length < 0:
        raise PrimitiveError(scan_p, f"param length must be a non-negative int, got {length!r}")
    want = list(jaxpr.in_types[:num_consts + num_carry]) + [
        _stacked(t, length) for t in jaxpr.in_types[num_consts + num_carry:]]
    if list(in_types) != want:
        raise PrimitiveError(scan_p, f"body takes {jaxpr.in_types} (xs stacked to length {length}), "
                                     f"got {list(in_types)}")
    init = jaxpr.in_types[num_consts:num_consts + num_carry]
    carry_out = jaxpr.out_types[:num_carry]
    if carry_out != list(init):
        raise PrimitiveError(scan_p, f"the body returns carry {carry_out} for carry {list(init)}")
    return list(carry_out) + [_stacked(t, length) for t in jaxpr.out_types[num_carry:]]


def _scan_eval(*args, jaxpr, length, reverse, num_consts, num_carry, unroll):
    consts, carry, xs = _split(args, num_consts, num_carry)
    ys = [[None] * length for _ in jaxpr.outputs[num_carry:]]
    for i in (reversed(range(length)) if reverse else range(length)):
        # a slice of a sympy object array is a bare expression: keep it an array
        outs = evaluate(jaxpr, *consts, *carry, *[np.asarray(x[i], dtype=x.dtype) for x in xs])
        carry = outs[:num_carry]
        for y, o in zip(ys, outs[num_carry:]):
            y[i] = o
    stacked = [np.stack(y) if length else np.zeros((0,) + t.shape, t.dtype)
               for y, t in zip(ys, jaxpr.out_types[num_carry:])]
    return list(carry) + stacked


def _cost(*in_types, jaxpr, length, **_):
    return length * sum(eqn_flops(e) for e in jaxpr.eqns)


shape_rules[scan_p] = _scan_shape
eval_rules[scan_p] = _scan_eval
cost_rules[scan_p] = _cost


# --------------------------------------------------------------------------
# JVP

def _body_jvp(body: Program, nonzeros, instantiate_out, known_tangents_are_zero):
    """The body's JVP with inputs (primals, nonzero tangents) and outputs
    (primals, tangents of outputs that are nonzero or instantiated);
    returns (program, which output tangents it returns)."""
    with building() as b:
        primals = [b.new_input(t) for t in body.in_types]
        tangent_ins = [b.new_input(t) for t, nz in zip(body.in_types, nonzeros) if nz]
        it = iter(tangent_ins)
        tangents = [next(it) if nz else Zero(t) for t, nz in zip(body.in_types, nonzeros)]
        outs, out_ts = jvp_traced(body, primals, tangents, known_tangents_are_zero)
        out_nz = [not isinstance(t, Zero) or inst for t, inst in zip(out_ts, instantiate_out)]
        kept = [instantiate(t) for t, nz in zip(out_ts, out_nz) if nz]
        return b.build(primals + tangent_ins, outs + kept), out_nz


def _reorder(prog: Program, in_order, out_order) -> Program:
    """The same program with its inputs and outputs permuted."""
    return Program([prog.inputs[i] for i in in_order], prog.eqns, [prog.outputs[i] for i in out_order])


def _scan_jvp(primals, tangents, *, jaxpr, length, reverse, num_consts, num_carry, unroll):
    """_scan_jvp: the carries whose tangents are nonzero are a fixpoint
    (nonzero at init, or made nonzero by the body); the JVP scan carries
    (carry, carry_dot) and stacks (ys, ys_dot)."""
    nonzeros = [not isinstance(t, Zero) for t in tangents]
    const_nz, carry_nz, xs_nz = _split(nonzeros, num_consts, num_carry)
    n_ys = len(jaxpr.outputs) - num_carry
    for _ in range(1 + num_carry):
        body, out_nz = _body_jvp(jaxpr, const_nz + carry_nz + xs_nz, carry_nz + [False] * n_ys,
                                 linearizing())
        new = [a or b for a, b in zip(carry_nz, out_nz[:num_carry])]
        if new == carry_nz:
            break
        carry_nz = new
    nz = const_nz + carry_nz + xs_nz
    tangents = [instantiate(t) if n else t for t, n in zip(tangents, nz)]
    # body inputs: primals (consts, carry, xs), then the nonzero tangents in
    # the same order; scan wants consts, consts_dot, carry, carry_dot, xs, xs_dot
    n_in = len(jaxpr.inputs)
    tan_index = {}
    for i, n in enumerate(nz):
        if n:
            tan_index[i] = n_in + len(tan_index)
    groups = [range(0, num_consts), range(num_consts, num_consts + num_carry), range(num_consts + num_carry, n_in)]
    in_order = []
    for g in groups:
        in_order += list(g) + [tan_index[i] for i in g if i in tan_index]
    n_out = len(jaxpr.outputs)
    out_tan = {}
    for i, n in enumerate(out_nz):
        if n:
            out_tan[i] = n_out + len(out_tan)
    out_order = []
    for g in (range(0, num_carry), range(num_carry, n_out)):
        out_order += list(g) + [out_tan[i] for i in g if i in out_tan]
    body = _reorder(body, in_order, out_order)
    consts, init, xs = _split(primals, num_consts, num_carry)
    c_dot, i_dot, x_dot = (_split([t for t in tangents], num_consts, num_carry))
    args = (consts + [t for t in c_dot if not isinstance(t, Zero)] + init + [t for t in i_dot if not isinstance(t, Zero)]
            + xs + [t for t in x_dot if not isinstance(t, Zero)])
    n_cdot = sum(const_nz)
    n_idot = sum(carry_nz)
    outs = bind(scan_p, *args, jaxpr=body, length=length, reverse=reverse,
                num_consts=num_consts + n_cdot, num_carry=num_carry + n_idot, unroll=unroll)
    carry, carry_dot = outs[:num_carry], outs[num_carry:num_carry + n_idot]
    rest = outs[num_carry + n_idot:]
    ys, ys_dot = rest[:n_ys], rest[n_ys:]
    it = iter(carry_dot + ys_dot)
    out_tangents = [next(it) if n else None for n in out_nz]
    return carry + ys, out_tangents


jvp_rules[scan_p] = _scan_jvp
jaxpr_linearized.add(scan_p)


def _scan_dependence(eqn, in_flags):
    """Which outputs depend on the flagged inputs: through the body, with a
    fixpoint over the carries (a carry that depends on them after one
    iteration does in every later one, and a flagged init is one, as in
    partial evaluation's carry fixpoint, which JAX's linearization of a
    scan follows: a body that overwrites it with a constant still has an
    unknown carry, its constant tangent saved; found on 0.4.25 and 0.10.2, a
    jitted scan of floor). As `_while_dependence`."""
    p = eqn.params
    body, nc, nk = p["jaxpr"], p["num_consts"], p["num_carry"]
    consts, carry, xs = _split(in_flags, nc, nk)
    for _ in range(1 + nk):
        out = program_dependence(body, consts + carry + xs)
        new = [a or b for a, b in zip(carry, out[:nk])]
        if new == carry:
            break
        carry = new
    return carry + out[nk:]


dependence_rules[scan_p] = _scan_dependence


def _scan_jaxpr_trace(eqn: Eqn, in_unknowns, ask) -> None:
    """_scan_partial_eval traces the body (pe.partial_eval_jaxpr_nounits_fwd)
    until its unknown carries are a fixpoint, first with the carries
    unknown at init, which asks each question a later trace (more values
    unknown) asks; its hoisting re-traces the known body with only the
    consts known (`_restaged_by_hoisting`), asking fewer still."""
    ask(eqn.params["jaxpr"], in_unknowns)


jaxpr_trace_rules[scan_p] = _scan_jaxpr_trace
linearizes_in_order.add(scan_p)   # _scan_linearize: ad.linearize_jaxpr of the body


# --------------------------------------------------------------------------
# partial evaluation

def carry_fixpoint(body: Program, in_unknowns, nc, nk, split):
    """Split the body until the unknown carries are a fixpoint: a carry is
    unknown if it is unknown at init or the body makes it unknown. `split(
    in_unknowns, carry_unknowns)` returns something with `out_unknowns` (a
    PartialEval; oracle/program_variants.py's nonzero tangents too).
    Returns (what split returned last, carry_unknowns)."""
    const_uk, carry_uk, xs_uk = _split(in_unknowns, nc, nk)
    for _ in range(1 + nk):
        pe = split(const_uk + carry_uk + xs_uk, carry_uk)
        new = [a or b for a, b in zip(carry_uk, pe.out_unknowns[:nk])]
        if new == carry_uk:
            return pe, carry_uk
        carry_uk = new
    raise AssertionError("scan: carry fixpoint not reached")


def _loop_invariant(known: Program, n_known_consts: int) -> set[int]:
    """Ids of the vars of `known` computed from its first n_known_consts
    inputs alone (loop-invariant: the same in every iteration)."""
    varying = {v.id for v in known.inputs[n_known_consts:]}
    for e in known.eqns:
        flags = [isinstance(a, Var) and a.id in varying for a in e.inputs]
        varying.update(v.id for v, d in zip(e.outputs, output_dependence(e, flags)) if d)
    return {v.id for e in known.eqns for v in e.outputs if v.id not in varying}


def _hoisted_program(known: Program, n_known_consts: int, outputs) -> Program:
    """The part of `known` that computes `outputs` (loop-invariant) from the
    known consts, without dead code. An effect (a debug print or callback)
    is in it only where it reads consts and what they compute
    (_scan_known_hoisting traces the known body with the consts known):
    one reading a carry or an xs stays in the loop only."""
    invariant = {v.id for v in known.inputs[:n_known_consts]}
    eqns = []
    for e in known.eqns:
        e = _without_operands_it_ignores(e, invariant)
        reads_invariant = all(not isinstance(a, Var) or a.id in invariant for a in e.inputs)
        if reads_invariant:
            invariant.update(v.id for v in e.outputs)
        if reads_invariant or not has_effects(e):
            eqns.append(e)
    # the consts known, a JaxprTrace evaluates a known checkpoint inline
    # (`inline_known`): its values are named by what computes them inside
    body, _ = dce(inline_known(Program(known.inputs, eqns, list(outputs))))
    return Program(known.inputs[:n_known_consts], body.eqns, body.outputs)


# Set while the known loop body is staged again (`_restaged_by_hoisting`):
# its unknown values are loop-varying primals, not tangents, so a carry
# the fixpoint makes unknown keeps its known init (JAX's JaxprTrace
# `_scan_partial_eval` instantiates the known value), where a linearization
# makes it the zero tangent it is (`_staged_tangent_inputs`).
_RESTAGING_PRIMALS = contextvars.ContextVar("restaging_primals", default=False)


class KnownHoisting(NamedTuple):
    """A known loop body split by _scan_known_hoisting: `hoist` maps the
    known consts to the loop's consts, once, before the loop; `loop` maps
    the loop's consts, then the known carries and xs, to the body's
    outputs."""
    hoist: Program
    loop: Program


def _restaged_by_hoisting(known_body: Program, n_known_consts: int) -> KnownHoisting:
    """The known loop body as _scan_known_hoisting leaves it: JAX re-traces
    it with only its consts known (pe.trace_to_jaxpr_nounits, a JaxprTrace),
    so each equation reading consts only runs once, before the loop, in
    the enclosing trace (`hoist`: under an outer vmap its batching rule
    sees the consts' own batch dims, found by a nightly, 73222c7014), and
    each equation reading a loop-varying value is staged again by its
    partial-eval rule (`loop`, whose consts are the known values it
    reads). A checkpoint reading one is split by remat_partial_eval, its
    staged half `differentiated=True`, and remat_lowering puts an
    optimization barrier on it (found by a campaign on 0.4.25, measured on
    0.10.2 too). A checkpoint reading only consts is split by
    remat_partial_eval too (JaxprTrace runs the rule whatever its
    inputs), which asks its policy about its body: a policy that raises
    when asked raises here (found by a pristine campaign, c95dd0b0b0: save_from_both_policies of an offload
    policy, in a scan body whose checkpoint reads a const). Its known half
    JaxprTrace evaluates in the enclosing trace, a checkpoint there inline
    (`inline_known`: remat_partial_eval's `core.eval_jaxpr(jaxpr_known,
    ...)`), so an outer differentiation meets the body's equations, not a
    checkpoint (no barrier for one reading consts only: found by a
    pristine nightly, cf078ee83e). A scan in a checkpoint is split so too:
    _scan_partial_eval_custom hoists by `pe.partial_eval_jaxpr_nounits(
    jaxpr_known, ...)` with the consts known (found by a pristine
    nightly, bb0c634c1b: the barrier of a nested checkpoint reading the
    carry)."""
    n_varying = len(known_body.inputs) - n_known_consts
    ask_policies(known_body, [False] * n_known_consts + [True] * n_varying)
    token = _RESTAGING_PRIMALS.set(True)
    try:
        pe = partial_eval(known_body, [False] * n_known_consts + [True] * n_varying, instantiate=True,
                          linearize=True, literals_are_residuals=False, constants_are_residuals=False)
    finally:
        _RESTAGING_PRIMALS.reset(token)
    hoist = inline_known(pe.known)
    return KnownHoisting(Program(hoist.inputs, hoist.eqns, hoist.outputs[len(hoist.outputs) - len(pe.residuals):]),
                         pe.staged)


def _hoisted_and_loop(known: Program, n_known_consts: int, loop_outs: list, hoisted: list) -> KnownHoisting:
    """_scan_known_hoisting of `known` (a split loop body), asked for the
    loop's outputs `loop_outs` and the loop-invariant residuals `hoisted`:
    one `hoist` computes, from the known consts, the hoisted residuals and
    then the loop's consts (JAX traces the body once, the residuals
    known pvals of that trace). A residual that trace stages (an operand
    `_loop_invariant` ignores, which the rule still reads) is computed by
    `_hoisted_program` beside it."""
    body, _ = dce(Program(known.inputs, known.eqns, list(loop_outs) + list(hoisted)))
    hoist, loop = _restaged_by_hoisting(body, n_known_consts)
    n_loop_outs = len(loop_outs)
    at = {v.id: a for v, a in zip(loop.inputs, hoist.outputs)}
    found = [at.get(a.id) if isinstance(a, Var) else a for a in loop.outputs[n_loop_outs:]]
    missing = [h for h, a in zip(hoisted, found) if a is None]
    eqns, computed = clone_into(_hoisted_program(known, n_known_consts, missing), hoist.inputs) if missing else ([], [])
    computed = iter(computed)
    hoisted_atoms = [a if a is not None else next(computed) for a in found]
    loop, read = dce(Program(loop.inputs, loop.eqns, loop.outputs[:n_loop_outs]))
    n_consts = len(hoist.outputs)
    loop = Program([v for v, r in zip(loop.inputs[:n_consts], read) if r] + loop.inputs[n_consts:], loop.eqns,
                   loop.outputs)
    consts = [a for a, r in zip(hoist.outputs, read) if r]
    return KnownHoisting(Program(hoist.inputs, hoist.eqns + eqns, hoisted_atoms + consts), loop)


def _without_operands_it_ignores(e: Eqn, invariant: set) -> Eqn:
    """`e` with its loop-varying operands that none of its outputs depends
    on (a while body const the body never reads) made zeros: the hoisting
    trace knows nothing of them, and JAX's partial-eval rule drops such an
    operand (_while_partial_eval binds the known loop with its known consts
    only), so `_loop_invariant` rightly calls the outputs invariant (found
    by a campaign on 0.4.25: the spec's hoisted program read the carry)."""
    varying = [isinstance(a, Var) and a.id not in invariant and not is_key(a.type.dtype) for a in e.inputs]
    if not any(varying) or any(output_dependence(e, varying)):
        return e
    zeros = lambda t: Literal(np.zeros(t.shape, t.dtype), t)
    return Eqn(e.primitive, [zeros(a.type) if v else a for a, v in zip(e.inputs, varying)], e.outputs, e.params,
               residual_outputs=e.residual_outputs, why=e.why)


def _known_scan_outputs(eqn: Eqn, pe, carry_uk: list[bool]):
    """Which of a split scan's outputs are unknown, the known body's outputs
    for the known ones, and the scan's known outputs. A carry made unknown
    by the carry fixpoint is not a known output, even where the body
    computes it from known values."""
    n_ys = len(eqn.outputs) - len(carry_uk)
    n_known_outs = sum(not u for u in pe.out_unknowns)
    known_out_uk = [u or c for u, c in zip(pe.out_unknowns, carry_uk + [False] * n_ys)]
    keep = [not ku for ku, u in zip(known_out_uk, pe.out_unknowns) if not u]
    known_outs_body = [a for a, k in zip(pe.known.outputs[:n_known_outs], keep) if k]
    outer_known_outs = [v for v, ku in zip(eqn.outputs, known_out_uk) if not ku]
    return known_out_uk, known_outs_body, outer_known_outs


def _staged_scan_body(staged: Program, intensive: list[bool], n_ins: int) -> tuple[Program, list, list]:
    """The staged body with its inputs ordered as the staged scan takes
    them: [intensive residuals (consts), its `n_ins` other inputs,
    extensive residuals (xs)]; and the intensive and extensive residuals'
    positions."""
    n_res = len(intensive)
    int_ids = [i for i in range(n_res) if intensive[i]]
    ext_ids = [i for i in range(n_res) if not intensive[i]]
    order = int_ids + [n_res + i for i in range(n_ins)] + ext_ids
    return Program([staged.inputs[i] for i in order], staged.eqns, staged.outputs), int_ids, ext_ids


def _scan_partial_eval(eqn: Eqn, in_unknowns, in_inst, *, saveable, linearize, hoist=True):
    if linearize:
        return _scan_linearize(eqn, in_unknowns)
    return _scan_partial_eval_custom(eqn, in_unknowns, saveable, hoist)


def _linearized_residual_kinds(pe, known_body_inputs, known_ins, n_kc: int, n_kk: int):
    """Sort a linearized body's residuals, as `_scan_linearize` does:
    intensive ones (a known const forwarded: "fwd_const"; a constant;
    a loop-invariant value, "hoisted" out of the loop) and extensive ones
    (a known xs forwarded: "fwd_xs"; any other value, "stacked" as an
    extra ys of the known scan). Returns each residual's (kind, outer atom
    or index into its list), and the hoisted and stacked body atoms."""
    kind = {}   # known body input id -> ("const" | "carry" | "xs", outer atom)
    for i, v in enumerate(known_body_inputs):
        kind[v.id] = ("const" if i < n_kc else "carry" if i < n_kc + n_kk else "xs", known_ins[i])
    invariant = _loop_invariant(pe.known, n_kc)
    n_known_outs = sum(not u for u in pe.out_unknowns)
    res_kind, hoisted, stacked = [], [], []
    for a in pe.known.outputs[n_known_outs:]:      # each residual's atom in the known body
        if not isinstance(a, Var):
            res_kind.append(("constant", a))
        elif a.id in kind and kind[a.id][0] != "carry":
            res_kind.append(("fwd_" + kind[a.id][0], kind[a.id][1]))
        elif a.id in invariant:
            res_kind.append(("hoisted", len(hoisted)))
            hoisted.append(a)
        else:
            res_kind.append(("stacked", len(stacked)))
            stacked.append(a)
    return res_kind, hoisted, stacked


def _staged_tangent_inputs(inputs, unknowns, promoted) -> tuple[list[Eqn], list]:
    """The staged scan's unknown inputs, where a carry `promoted` (made
    unknown by the fixpoint) is a tangent that was zero at init,
    instantiated by the JVP: JAX instantiates it inside the tangent
    function (`_scan_linearize`'s tangent_fun), so it is made in the staged
    half (the equations returned) and is never a residual (a scalar zero
    is an inline literal)."""
    zeros_eqns, staged_ins = [], []
    for a, u, pr in zip(inputs, unknowns, promoted):
        if not u:
            continue
        if pr:
            with building() as b:
                z = to_atom(zeros_like_type(a.type), b)
            zeros_eqns += [Eqn(e.primitive, e.inputs, e.outputs, e.params, why=TANGENT_ZERO) for e in b.eqns]
            a = z
        staged_ins.append(a)
    return zeros_eqns, staged_ins


def _scan_linearize(eqn: Eqn, in_unknowns):
    """_scan_linearize: split the body (known carries a fixpoint); forward
    residuals that are known consts or xs, hoist loop-invariant ones, stack
    the rest as extra ys of the known scan."""
    p = eqn.params
    body, nc, nk, length = p["jaxpr"], p["num_consts"], p["num_carry"], p["length"]
    n_ys = len(body.outputs) - nk
    pe, carry_uk = carry_fixpoint(body, in_unknowns, nc, nk, lambda uk, cuk: partial_eval(
        body, uk, instantiate=cuk + [False] * n_ys, linearize=True, literals_are_residuals=False,
        order="first_use"))
    uk = _split(in_unknowns, nc, nk)[0] + carry_uk + _split(in_unknowns, nc, nk)[2]
    const_uk, _, xs_uk = _split(uk, nc, nk)
    known_ins = [a for a, u in zip(eqn.inputs, uk) if not u]
    n_kc, n_kk = nc - sum(const_uk), nk - sum(carry_uk)
    res_kind, hoisted, stacked = _linearized_residual_kinds(pe, [v for v, u in zip(body.inputs, uk) if not u],
                                                            known_ins, n_kc, n_kk)

    # the hoisted residuals and the known scan's consts, then the known
    # scan: the known carries and ys, then the stacked residuals
    known_out_uk, known_outs_body, outer_known_outs = _known_scan_outputs(eqn, pe, carry_uk)
    stacked_vars = [Var(_stacked(v.type, length)) for v in stacked]
    hoist, known_loop = _hoisted_and_loop(pe.known, n_kc, known_outs_body + stacked, hoisted)
    known_eqns, hoist_outs = clone_into(hoist, known_ins[:n_kc])
    hoisted_atoms, loop_consts = hoist_outs[:len(hoisted)], hoist_outs[len(hoisted):]
    if outer_known_outs or stacked_vars:
        known_eqns.append(Eqn(scan_p, loop_consts + known_ins[n_kc:], outer_known_outs + stacked_vars,
                              dict(p, jaxpr=known_loop, num_consts=len(loop_consts), num_carry=n_kk)))

    # the staged scan: [intensive res, unknown consts, carries, xs, extensive res]
    res_atoms = []
    for k, v in res_kind:
        if k in ("fwd_const", "fwd_xs", "constant"):
            res_atoms.append(v)
        elif k == "hoisted":
            res_atoms.append(hoisted_atoms[v])
        else:
            res_atoms.append(stacked_vars[v])
    intensive = [k not in ("fwd_xs", "stacked") for k, _ in res_kind]
    promoted = [False] * nc + [u and not i and not _RESTAGING_PRIMALS.get()
                               for u, i in zip(carry_uk, _split(in_unknowns, nc, nk)[1])] + \
        [False] * (len(eqn.inputs) - nc - nk)
    zeros_eqns, staged_ins = _staged_tangent_inputs(eqn.inputs, uk, promoted)
    n_uc, n_ucarry = sum(const_uk), sum(carry_uk)
    staged_body, int_ids, ext_ids = _staged_scan_body(pe.staged, intensive, len(staged_ins))
    staged_outs = [v for v, u in zip(eqn.outputs, known_out_uk) if u]
    staged = Eqn(scan_p, [res_atoms[i] for i in int_ids] + staged_ins + [res_atoms[i] for i in ext_ids],
                 staged_outs, dict(p, jaxpr=staged_body, num_consts=len(int_ids) + n_uc, num_carry=n_ucarry))
    return known_eqns, zeros_eqns + [staged], known_out_uk, known_out_uk, [], {}


def _scan_partial_eval_custom(eqn: Eqn, in_unknowns, saveable, hoist=True):
    """_scan_partial_eval_custom (a scan inside a checkpoint): split the
    body by the policy, every input available to the staged scan (so no
    input is a residual), every output computed by it. The known half is a
    closed_call: the loop-invariant residuals (hoisted), then a scan of the
    known body whose extra ys are the other residuals, stacked.

    The residuals' order is what saved_residuals reports (the order of the
    closed_call's outputs): the body's residuals as partial_eval_jaxpr_custom
    collects them (its `residuals` OrderedSet: in the order the split first
    needs them, the body's not-yet-instantiated outputs last, as
    `ensure_out_inst=True` adds them; order="first_use"), split without
    reordering into the intensive ones (`partition_list(loop_dep_res,
    res_avals)`) and the extensive ones, the call returning
    `[*intensive_res, *out_binders_known, *extensive_res]`
    (jax/_src/lax/control_flow/loops.py, _scan_partial_eval_custom, jax
    0.10.2). Not the order the body produces them in: a body that makes
    a dot's output before another's but reads the second first in its
    tangent half saves the second first.

    With hoist=False (what jax_remat3's `_scan_remat` does: the oracle
    models it) the known half is just the scan, every residual stacked, in
    the order the body produces them (`remat_jaxpr`'s rules save a value as
    a constant of the rematerialized trace when they meet it)."""
    p = eqn.params
    body, nc, nk, length = p["jaxpr"], p["num_consts"], p["num_carry"], p["length"]
    n_out = len(body.outputs)
    # (constants are read by both halves, `ClosedJaxpr(jaxpr_staged_, jaxpr.consts)`;
    # remat3's rematerialized trace saves each constant it meets, stacked)
    pe, carry_uk = carry_fixpoint(body, in_unknowns, nc, nk, lambda uk, cuk: partial_eval(
        body, uk, in_inst=[True] * len(uk), instantiate=True, saveable=saveable,
        constants_are_residuals=not hoist, stage_recomputed_outputs=True,
        order="first_use" if hoist else "production"))
    const_uk, _, xs_uk = _split(in_unknowns, nc, nk)
    uk = const_uk + carry_uk + xs_uk
    known_ins = [a for a, u in zip(eqn.inputs, uk) if not u]
    n_kc, n_kk = nc - sum(const_uk), nk - sum(carry_uk)
    n_known_outs = sum(not u for u in pe.out_unknowns)
    res_known = pe.known.outputs[n_known_outs:]
    if hoist:   # the hoisting traces the known body as split, dead code too, its consts known
        ask_policies(pe.known_traced, [False] * n_kc + [True] * (len(pe.known.inputs) - n_kc))
    invariant = _loop_invariant(pe.known, n_kc) if hoist else set()
    intensive = [hoist and (not isinstance(a, Var) or a.id in invariant) for a in res_known]

    known_out_uk, known_outs_body, outer_known_outs = _known_scan_outputs(eqn, pe, carry_uk)
    pe.known = _with_decisions(pe.known, pe.decisions)
    int_atoms = [a for a, i in zip(res_known, intensive) if i]
    ext_atoms = [a for a, i in zip(res_known, intensive) if not i]
    int_vars = [Var(a.type) for a in int_atoms]
    ext_vars = [Var(_stacked(a.type, length)) for a in ext_atoms]

    known_eqns = []
    if not hoist and (outer_known_outs or ext_vars):
        loop_body, _ = dce(Program(pe.known.inputs, pe.known.eqns, known_outs_body + ext_atoms))
        known_eqns.append(Eqn(eqn.primitive, known_ins, outer_known_outs + ext_vars,
                              dict(p, jaxpr=loop_body, num_consts=n_kc, num_carry=n_kk)))
    elif outer_known_outs or int_vars or ext_vars:
        int_hoisted = [a for a in int_atoms if isinstance(a, Var)]
        hoist, loop_body = _hoisted_and_loop(pe.known, n_kc, known_outs_body + ext_atoms, int_hoisted)

        def known(*ins):    # the call: the hoisted computation, then the loop
            hoist_outs = eval_program_traced(hoist, *ins[:n_kc])
            hoisted, loop_consts = iter(hoist_outs[:len(int_hoisted)]), hoist_outs[len(int_hoisted):]
            int_vals = [next(hoisted) if isinstance(a, Var) else a for a in int_atoms]
            outs = bind(scan_p, *loop_consts, *ins[n_kc:], **dict(
                p, jaxpr=loop_body, num_consts=len(loop_consts), num_carry=n_kk)) if loop_body.outputs else []
            return int_vals + list(outs)
        with building() as b:
            ins = [b.new_input(a.type) for a in known_ins]
            closed = b.build(ins, known(*ins))
        known_eqns.append(Eqn(call_p_(), known_ins, int_vars + outer_known_outs + ext_vars,
                              dict(jaxpr=closed, name=None)))

    # the staged scan: [intensive residuals, every input, extensive residuals]
    staged_body, _, _ = _staged_scan_body(pe.staged, intensive, len(body.inputs))
    staged = Eqn(scan_p, int_vars + list(eqn.inputs) + ext_vars, list(eqn.outputs),
                 dict(p, jaxpr=staged_body, num_consts=len(int_vars) + nc, num_carry=nk))
    return known_eqns, [staged], known_out_uk, [True] * n_out, pe.recomputed, {}


def _with_decisions(known: Program, decisions: dict) -> Program:
    """`known` with the policy's answer recorded on each equation it was
    asked about (spec.explain shows them)."""
    return Program(known.inputs, [
        Eqn(e.primitive, e.inputs, e.outputs, e.params, residual_outputs=e.residual_outputs,
            why=e.why or f"the checkpoint's policy answered {decisions[id(e)]}")
        if id(e) in decisions else e for e in known.eqns], known.outputs)


def call_p_():
    return call_p


partial_eval_rules[scan_p] = _scan_partial_eval
literal_operands_inline.add(scan_p)     # an instantiated scalar zero tangent stays inline (above)


# --------------------------------------------------------------------------
# DCE

def _scan_dce(eqn: Eqn, used_outputs):
    """_scan_dce_rule: a carry is live if its output is used or the body
    reads it to compute something live (a fixpoint); dead consts, xs, ys
    and carries are pruned."""
    p = eqn.params
    body, nc, nk = p["jaxpr"], p["num_consts"], p["num_carry"]
    used_carry, used_ys = list(used_outputs[:nk]), list(used_outputs[nk:])
    for _ in range(1 + nk):
        _, used_in = dce(body, used_carry + used_ys)
        new = [a or b for a, b in zip(used_carry, used_in[nc:nc + nk])]
        if new == used_carry:
            break
        used_carry = new
    pruned, used_in = dce(body, used_carry + used_ys)
    keep_in = used_in[:nc] + used_carry + used_in[nc + nk:]
    new_body = Program([v for v, k in zip(pruned.inputs, keep_in) if k], pruned.eqns, pruned.outputs)
    used_out = used_carry + used_ys
    new_eqn = Eqn(eqn.primitive, [a for a, k in zip(eqn.inputs, keep_in) if k],
                  [v for v, u in zip(eqn.outputs, used_out) if u],
                  dict(p, jaxpr=new_body, num_consts=sum(used_in[:nc]), num_carry=sum(used_carry)),
                  why=eqn.why, residual_outputs=eqn.residual_outputs)
    return new_eqn, keep_in


dce_rules[scan_p] = _scan_dce


# --------------------------------------------------------------------------
# transpose

def _scan_transpose(cts, *args, jaxpr, length, reverse, num_consts, num_carry, unroll):
    """A scan of the transposed body, run the other way. Linear inputs: some
    consts (their cotangents accumulate in extra carries), every carry, some
    xs (their cotangents are the ys); the others are residuals read as they
    are (consts) or per iteration (xs)."""
    linear = [is_undefined(a) for a in args]
    c_lin, init_lin, x_lin = _split(linear, num_consts, num_carry)
    # every carry is transposed as linear, also one whose init is a known
    # value (an instantiated zero tangent): its cotangent is then dropped
    # (JAX's _scan_transpose: `if not all(init_lin): pass`)
    k_lin = [True] * num_carry
    linear = c_lin + k_lin + x_lin
    consts, init, xs = _split(args, num_consts, num_carry)
    res_consts = [c for c, l in zip(consts, c_lin) if not l]
    res_xs = [x for x, l in zip(xs, x_lin) if not l]
    body_t = transpose(jaxpr, linear)    # (res consts, res xs, ct carry, ct ys) -> (ct lin consts, ct carry, ct lin xs)
    n_lc, n_lx = sum(c_lin), sum(x_lin)
    ct_carry = [instantiate(c) for c in cts[:num_carry]]
    ct_ys = [instantiate(c) for c in cts[num_carry:]]
    acc_types = [a.type for a, l in zip(consts, c_lin) if l]     # UndefinedPrimals: their types

    def body(*vals):
        rc = vals[:len(res_consts)]
        acc = vals[len(res_consts):len(res_consts) + n_lc]
        ck = vals[len(res_consts) + n_lc:len(res_consts) + n_lc + num_carry]
        rest = vals[len(res_consts) + n_lc + num_carry:]
        cy, rx = rest[:len(ct_ys)], rest[len(ct_ys):]
        outs = eval_program_traced(body_t, *rc, *rx, *ck, *cy)
        ct_c, ct_k, ct_x = outs[:n_lc], outs[n_lc:n_lc + num_carry], outs[n_lc + num_carry:]
        return [add_any(a, c) for a, c in zip(acc, ct_c)] + list(ct_k) + list(ct_x)

    type_of = lambda v: v.type if isinstance(v, UndefinedPrimal) else to_atom(v).type   # values may be constants
    with building() as b:
        ins = ([b.new_input(type_of(c)) for c in res_consts] + [b.new_input(t) for t in acc_types]
               + [b.new_input(type_of(c)) for c in ct_carry]
               + [b.new_input(_unstacked(type_of(c))) for c in ct_ys]
               + [b.new_input(_unstacked(type_of(x))) for x in res_xs])
        body_prog = b.build(ins, body(*ins))
    outs = bind(scan_p, *res_consts, *[zeros_like_type(t) for t in acc_types], *ct_carry, *ct_ys, *res_xs,
                jaxpr=body_prog, length=length, reverse=not reverse, num_consts=len(res_consts),
                num_carry=n_lc + num_carry, unroll=unroll)
    ct_c, ct_k, ct_x = iter(outs[:n_lc]), outs[n_lc:n_lc + num_carry], iter(outs[n_lc + num_carry:])
    # every carry has a cotangent (k_lin), one per carry; an init that is
    # not linear drops its own
    return ([next(ct_c) if l else None for l in c_lin] + [ct if l else None for ct, l in zip(ct_k, init_lin)]
            + [next(ct_x) if l else None for l in x_lin])


transpose_rules[scan_p] = _scan_transpose


# --------------------------------------------------------------------------
# batching

def _scan_batch(args, dims, *, jaxpr, length, reverse, num_consts, num_carry, unroll):
    """_scan_batching_rule: consts and carries batched at axis 0, xs and ys
    at axis 1 (axis 0 is the scan's); a carry is batched if its init is or
    the body makes it so (a fixpoint)."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    c_b, k_b, x_b = _split([d is not None for d in dims], num_consts, num_carry)
    n_ys = len(jaxpr.outputs) - num_carry
    for _ in range(1 + num_carry):
        in_dims = [0 if b else None for b in c_b + k_b + x_b]
        _, out_dims = vmap_program(jaxpr, in_dims, "zero_if_mapped", size)
        new = [a or d is not None for a, d in zip(k_b, out_dims[:num_carry])]
        if new == k_b:
            break
        k_b = new
    ys_b = [d is not None for d in out_dims[num_carry:]]
    in_dims = [0 if b else None for b in c_b + k_b + x_b]
    body, _ = vmap_program(jaxpr, in_dims, [0 if b else None for b in k_b + ys_b], size)
    consts, init, xs = _split(list(zip(args, dims)), num_consts, num_carry)
    new_args = ([move_to(a, d, 0, size) if d is not None else a for a, d in consts]
                + [move_to(a, d, 0, size) if b else a for (a, d), b in zip(init, k_b)]
                + [move_to(a, d, 1, size) if d is not None else a for a, d in xs])
    outs = bind(scan_p, *new_args, jaxpr=body, length=length, reverse=reverse, num_consts=num_consts,
                num_carry=num_carry, unroll=unroll)
    return outs, [0 if b else None for b in k_b] + [1 if b else None for b in ys_b]


batch_rules[scan_p] = _scan_batch

# a scan's rules are its body's (the carries' and stacked outputs' zeros
# and sums are dtype-generic): complex values pass through it
complex_rules.add(scan_p)
