"""Control flow: `cond` (lax.cond / lax.switch) and `while` (lax.while_loop).

cond
    outs = cond[branches=(b_0, ..., b_{n-1})] index *operands
         = b_index(*operands) for 0 <= index < n, else b_{n-1}(*operands)
    (an out-of-range index runs the last branch: JAX lowers cond to HLO's
    `case`, which does so; lax.cond and lax.switch clamp before binding)
    `index` is an i32[] scalar; every branch has the operands' types and the
    same output types. `spec.cond(pred, true_fn, false_fn, *operands)` binds
    it as lax.cond does: index = convert_element_type(pred, i32) and
    branches = (false, true).

    JVP (`_cond_jvp`): a cond of the branches' JVPs, with a tangent output
    wherever *some* branch's tangent is nonzero (the others instantiate
    zeros, on the primal side: under linearization they are residuals).
    Transpose: a cond of the transposed branches. Partial
    evaluation splits every branch with the same unknowns; each branch's
    residuals become outputs of the known cond, merged across branches by
    type (`_merge_branch_residuals`: a branch fills the slots it does not
    use with zeros), so a residual is reported as "output of cond", and the
    staged cond reads the index (itself a residual) and the merged list.
    vmap with an unbatched index batches the branches; with a batched index
    it runs every branch and picks per member with select_n, as JAX does.

while
    carry = init; while cond_jaxpr(*cconsts, *carry): carry = body_jaxpr(*bconsts, *carry)
    inputs: cconsts (cond_nconsts), bconsts (body_nconsts), init; outputs:
    the final carry. A batched predicate (bool[B] under vmap) runs while
    any member's predicate holds and updates only the members whose
    predicate holds.

    JVP (`_while_loop_jvp`): the carried tangents are found by a fixpoint
    (a carry has a tangent if its init has one or the body gives it one),
    then one while loop carries primals and tangents together. Partial
    evaluation (`_while_partial_eval`) runs the known carries in a known
    loop and stages the *whole* loop for the unknown ones, so every known
    input is a residual: `jax.linearize` works. Reverse mode does not: the
    transpose rule raises JAX's error.
"""
from __future__ import annotations

import itertools
from typing import Callable, Sequence

import numpy as np

from spec.core import (JaxFacts, jax_facts, PrimitiveError, Tracer, Zero, batch_rules, bind, building,
                       cost_rules, dce_rules, eval_program_traced, eval_rules,
                       has_effects, instantiate, is_differentiable, is_undefined, jaxpr_trace_rules, jvp_rules, linearizes_in_order, loops_until_a_value,
                       partial_eval_rules, primitive, shape_rules, transpose_rules,
                       zeros_like_type)
from spec.ir import ArrayType, Eqn, Literal, Program, Var, constants_read, reading_constants_as_inputs
from spec.arrays import SymbolicError
from spec.batching import bdim_at_front, broadcast_at, moveaxis, vmap_program
from spec.core import complex_rules, current_builder, to_atom
from spec.evaluate import evaluate
from spec.explain import eqn_flops
from spec.jvp import (LINEARIZATION_ERROR, dependence_rules, jaxpr_linearized, jvp_traced, linearizing,
                      program_dependence)
from spec.partial_eval import dce, instantiate_tangent, literal_operands_inline, partial_eval
from spec.remat import ask_policies
from spec.prims_elementwise import eq, select_n, stop_gradient
from spec.prims_structural import broadcast_in_dim
from spec.transpose import transpose
from spec.semantics import semantics

cond_p = primitive("cond", ["branches"], multiple_results=True)
while_p = primitive("while", ["cond_jaxpr", "body_jaxpr", "cond_nconsts", "body_nconsts"],
                    multiple_results=True)
jax_facts[cond_p] = JaxFacts("cond", "")    # bound structurally (oracle/to_jax.py)
jax_facts[while_p] = JaxFacts("while", "")
loops_until_a_value.add(while_p)

I32 = np.dtype(np.int32)


# ==========================================================================
# builders

def _trace_fn(fn: Callable, types: Sequence[ArrayType]) -> tuple[Program, bool]:
    """Trace fn(*args) into a Program; also whether fn returned a tuple/list."""
    with building() as b:
        ins = [b.new_input(t) for t in types]
        out = fn(*ins)
        multiple = isinstance(out, (tuple, list))
        return b.build(ins, list(out) if multiple else [out]), multiple


def cond_eqn(index, *operands, branches):
    """Bind `cond` directly (JAX's cond_p.bind): returns the list of outputs."""
    return bind(cond_p, index, *operands, branches=tuple(branches))


def switch(index, branches: Sequence[Callable], *operands):
    """branches[index](*operands) as one cond equation on an i32[] index.

    Unlike lax.switch this binds no `clamp` (the spec has none): the cond
    runs its last branch for an out-of-range index. Use it with an index known to be
    in range to match a JAX program written with lax.switch."""
    return _cond(index, list(branches), operands, trace_order=range(len(branches)))


def cond(pred, true_fn: Callable, false_fn: Callable, *operands):
    """lax.cond: true_fn(*operands) if pred else false_fn(*operands).

    As in lax.cond: a non-bool pred is compared with 0 (`ne`), the index is
    convert_element_type(pred, i32), branches are (false_fn, true_fn), and
    an output that both branches forward from the same operand is not an
    output of the cond (the operand is returned as it is)."""
    from spec import ops  # a cycle: ops gathers this module's cond
    if isinstance(pred, Tracer) and pred.shape != ():
        raise PrimitiveError(cond_p, f"pred must be a scalar, got {pred.type}")
    if np.dtype(getattr(pred, "dtype", np.asarray(pred).dtype)) != np.bool_:
        pred = ops.ne(pred, 0)
    index = ops.convert_element_type(pred, np.int32)
    return _cond(index, [false_fn, true_fn], operands, trace_order=(1, 0))    # true_fun is traced first


def passthroughs(branches) -> list[int | None]:
    """Per output of a cond's branches, the operand position every branch
    returns there as it is, or None: what lax.cond and lax.switch prune
    ("prune passthrough outputs", jax/_src/lax/control_flow/conditionals.py,
    from jax 0.6.0; pe._jaxpr_forwarding per branch)."""
    forwards = [[next((i for i, x in enumerate(b.inputs) if o is x), None) for o in b.outputs] for b in branches]
    return [f[0] if len(set(f)) == 1 else None for f in zip(*forwards)]


def _with_common_constants(progs: list[Program], trace_order) -> tuple[list[Program], list[Literal]]:
    """lax.cond's `_merge_common_consts` (jax/_src/lax/control_flow/common.py):
    every branch's constants, concatenated in the order the branches were
    traced and de-duplicated (by identity), become leading operands of the
    cond, and each branch takes all of them as its first inputs, reading
    its own. So no branch of a cond lax.cond or lax.switch makes closes over
    an array (a branch with consts is bound only by JAX's own rules, e.g. a
    partial evaluation's staged branch, which from_jax reads as it is)."""
    consts = []
    for i in trace_order:
        consts += [c for c in constants_read(progs[i]) if all(c.value is not d.value for d in consts)]
    if not consts:
        return progs, []
    return [reading_constants_as_inputs(p, consts) for p in progs], consts


def _cond(index, fns, operands, trace_order):
    builder = next((a.builder for a in (index, *operands) if isinstance(a, Tracer)), None) \
        or current_builder()
    types = [to_atom(x, builder).type for x in operands]
    traced = [_trace_fn(f, types) for f in fns]
    progs, consts = _with_common_constants([p for p, _ in traced], trace_order)
    operands = (*consts, *operands)
    if any(p.out_types != progs[0].out_types for p in progs[1:]):
        raise PrimitiveError(cond_p, "branches must have equal output types, got "
                                     + " and ".join(str(p.out_types) for p in progs))
    # prune passthrough outputs (pe._jaxpr_forwarding in lax.cond / lax.switch)
    in_fwd = passthroughs(progs)
    keep = [f is None for f in in_fwd]
    progs = [Program(p.inputs, p.eqns, [o for o, k in zip(p.outputs, keep) if k]) for p in progs]
    outs = iter(cond_eqn(index, *operands, branches=progs))
    result = [next(outs) if f is None else operands[f] for f in in_fwd]
    return tuple(result) if traced[0][1] else result[0]


def while_loop(cond_fn: Callable, body_fn: Callable, init, cond_consts=(), body_consts=()):
    """lax.while_loop: `init` is one value or a tuple (the carry, as JAX's
    pytree of leaves); cond_fn(*cond_consts, carry) -> bool[] and
    body_fn(*body_consts, carry) -> carry. Values of the enclosing trace
    cannot be closed over: pass them as consts (they become the while's
    cond_consts / body_consts operands, as JAX hoists closed-over values)."""
    multiple = isinstance(init, (tuple, list))
    carry = list(init) if multiple else [init]
    builder = next((a.builder for a in (*carry, *cond_consts, *body_consts) if isinstance(a, Tracer)),
                   None) or current_builder()
    ctypes = [to_atom(x, builder).type for x in carry]
    cc_types = [to_atom(x, builder).type for x in cond_consts]
    bc_types = [to_atom(x, builder).type for x in body_consts]
    n_cc, n_bc = len(cond_consts), len(body_consts)

    def pack(xs):
        return tuple(xs) if multiple else xs[0]
    cond_prog, _ = _trace_fn(lambda *a: cond_fn(*a[:n_cc], pack(a[n_cc:])), cc_types + ctypes)
    body_prog, _ = _trace_fn(lambda *a: body_fn(*a[:n_bc], pack(a[n_bc:])), bc_types + ctypes)
    outs = bind(while_p, *cond_consts, *body_consts, *carry, cond_jaxpr=cond_prog,
                body_jaxpr=body_prog, cond_nconsts=n_cc, body_nconsts=n_bc)
    return pack(outs)


# ==========================================================================
# cond: shape, eval, cost

class BranchTypesError(PrimitiveError):
    """cond's branches return different types (JAX's _cond_typecheck:
    `core.typematch`, memory spaces compared); `types` holds branch 0's
    output types and the other branch's."""

    def __init__(self, i: int, first: list, other: list):
        super().__init__(cond_p, f"branches 0 and {i} have different output types: {first} vs {other}")
        self.types = (list(first), list(other))


def _cond_shape(index, *ops, branches):
    if not isinstance(branches, tuple) or not branches or not all(isinstance(b, Program) for b in branches):
        raise PrimitiveError(cond_p, f"param branches must be a non-empty tuple of Programs, got {branches!r}")
    if index.shape != () or index.dtype != I32:
        raise PrimitiveError(cond_p, f"index must be i32[], got {index}")
    for i, b in enumerate(branches):
        if b.in_types != list(ops):
            raise PrimitiveError(cond_p, f"branch {i} takes {b.in_types}, called with {list(ops)}")
        if b.out_types != branches[0].out_types:
            raise BranchTypesError(i, branches[0].out_types, b.out_types)
    return branches[0].out_types


def _concrete_int(x) -> int:
    v = np.asarray(x).item()
    try:
        return int(v)
    except TypeError:
        raise SymbolicError(f"cond: the index {v} is not a concrete integer") from None


def _cond_eval(index, *ops, branches):
    """b_index(*ops); an out-of-range index (negative too) runs the last
    branch, as HLO's `case` does (jax's _cond_lowering; measured on 0.10.2:
    cond_p.bind(-1, ...) and (n, ...) run b_{n-1})."""
    i = _concrete_int(index)
    return evaluate(branches[i if 0 <= i < len(branches) else len(branches) - 1], *ops)


def _program_flops(prog: Program) -> int:
    return sum(eqn_flops(e) for e in prog.eqns)


shape_rules[cond_p] = _cond_shape
eval_rules[cond_p] = _cond_eval
# one branch runs: the most expensive one bounds the recompute cost
cost_rules[cond_p] = lambda *types, branches: max(_program_flops(b) for b in branches)


# ==========================================================================
# cond: JVP

def _branch_jvp(branch: Program, nonzeros, instantiate_out, linearizing: bool):
    """The JVP program of one branch: (primals, nonzero tangents) -> (primal
    outs, tangent outs). With `instantiate_out`, exactly the flagged tangent
    outputs (symbolic zeros made on the tangent side); else the nonzero
    ones. Returns (program, out nonzeros)."""
    with building() as b:
        primals = [b.new_input(t) for t in branch.in_types]
        tans = [b.new_input(t) if nz else Zero(t) for t, nz in zip(branch.in_types, nonzeros)]
        outs, out_ts = jvp_traced(branch, primals, tans, known_tangents_are_zero=linearizing)
        out_nz = [not isinstance(t, Zero) for t in out_ts]
        flags = out_nz if instantiate_out is None else instantiate_out
        kept = [_known_zero(t, linearizing) if isinstance(t, Zero) else instantiate_tangent(t)
                for t, f in zip(out_ts, flags) if f]
        prog = b.build(primals + [t for t in tans if not isinstance(t, Zero)], outs + kept)
    return prog, out_nz


def _known_zero(t: Zero, linearizing: bool):
    """A branch's zero tangent instantiated because another branch's is
    nonzero, made as a known value (not on the tangent side): JAX
    instantiates it with the branch's primal computation (`instantiate_zeros`
    under ad.linearize_jaxpr's LinearizeTrace in _cond_linearize; under
    jvp_jaxpr before partial eval in _cond_jvp), so the tangent branch reads
    it as a residual: `cond(p, lambda x: 2.0 * ones_like(x), lambda x: x, x)`
    saves an f32[n] zero as an output of the cond. Linearizing before jax
    0.7.1 a scalar one is a literal, kept inline (spec.semantics:
    cond_saves_scalar_zero_tangents)."""
    if linearizing and not t.type.shape and not semantics().cond_saves_scalar_zero_tangents:
        return np.zeros((), t.type.dtype)
    return broadcast_in_dim(np.zeros((), t.type.dtype), t.type.shape, ())


def _register_jaxpr_linearized():
    jaxpr_linearized.add(cond_p)


def _cond_jvp(primals, tangents, *, branches):
    """_cond_jvp: tangent outputs are the union of the branches' nonzero
    tangents; each branch's JVP instantiates zeros for the rest. When
    linearizing (`_cond_linearize` via ad.linearize_jaxpr), a tangent a
    branch computes without reading input tangents is a zero there."""
    index, *ops = primals
    _, *op_ts = tangents
    nonzeros = [not isinstance(t, Zero) for t in op_ts]
    # when linearizing, _cond_linearize runs ad.linearize_jaxpr on each branch:
    # its LinearizeTrace linearizes equation by equation, a rule without a
    # linearization of its own by linearize_from_jvp, which makes a constant
    # tangent a symbolic zero (integer_pow(x, 0)'s zeros: found by a campaign
    # on 0.6.2, a custom_vjp of it in a branch, and measured on 0.10.2:
    # `(h ** 0) * h` in a branch saves no zero); a zero tangent output of a
    # branch is still a residual output of the cond (`_known_zero`)
    lin = linearizing()
    per_branch = _branch_tangents(branches, nonzeros, lin)
    out_nz = [any(z) for z in zip(*per_branch)]
    jvps = tuple(_branch_jvp(b, nonzeros, out_nz, lin)[0] for b in branches)
    outs = cond_eqn(index, *ops, *[t for t, nz in zip(op_ts, nonzeros) if nz], branches=jvps)
    n = len(branches[0].outputs)
    it = iter(outs[n:])
    return outs[:n], [next(it) if nz else None for nz in out_nz]


def _branch_tangents(branches, nonzeros, lin: bool) -> list:
    """Which tangent outputs each branch's JVP makes nonzero. Linearizing,
    _cond_linearize linearizes the branches one after the other, so where
    one cannot be linearized (LINEARIZATION_ERROR: a generic reduce_window)
    what linearizing the branches before it raises comes first (a
    checkpoint's policy raising when asked: found by a pristine nightly,
    ae0271da1c); the spec partially evaluates their JVPs, as linearizing
    does, before it raises."""
    done = []
    for b in branches:
        try:
            done.append(_branch_jvp(b, nonzeros, None, lin))
        except ValueError as err:
            if lin and str(err) == LINEARIZATION_ERROR:
                for prog, _ in done:
                    partial_eval(prog, [False] * len(b.inputs) + [True] * sum(nonzeros), linearize=True)
            raise
    return [out_nz for _, out_nz in done]


def _cond_dependence(eqn, in_flags):
    """An output depends on an input if it does in some branch (the
    default, the first sub-program, would look at branch 0 only)."""
    index_flag, *op_flags = in_flags
    if index_flag:
        return [True] * len(eqn.outputs)
    per = [program_dependence(b, op_flags) for b in eqn.params["branches"]]
    return [any(d) for d in zip(*per)]


jvp_rules[cond_p] = _cond_jvp
_register_jaxpr_linearized()


# ==========================================================================
# cond: partial evaluation

def _merge_branch_residuals(branch_res_types):
    """JAX's _merge_branch_residuals: residual slots shared by type across
    branches. [x], [y], [x, x] -> [x, y, x], [[0], [1], [0, 2]]."""
    tagged = []
    for types in branch_res_types:
        counts: dict = {}
        row = []
        for t in types:
            k = counts.get(t, 0)
            counts[t] = k + 1
            row.append((t, k))
        tagged.append(row)
    all_tagged = list(dict.fromkeys(itertools.chain.from_iterable(tagged)))
    index = {tk: i for i, tk in enumerate(all_tagged)}
    return [t for t, _ in all_tagged], [[index[tk] for tk in row] for row in tagged]


def _empty_like_type(t: ArrayType):
    """ad_util.empty_like_aval (lax.py:3639 empty_like_shaped_array): a value
    of type `t` whose value is never read (zeros here), in `t`'s memory
    space (JAX: `empty2(dtype, memory_space=aval.memory_space)` broadcast),
    so a slot one branch fills with an offloaded residual has the same
    type in every branch (core.typematch compares memory spaces)."""
    zero = zeros_like_type(t)
    if t.memory_space is None:
        return zero
    from spec.remat import device_put_p  # imported here: spec/__init__ registers cond before remat's rules
    return bind(device_put_p, zero, memory_space=t.memory_space)[0]


def _join_known(known: Program, n_outs_kept: Sequence[bool], all_res, slots) -> Program:
    """_join_cond_outputs: the known branch returns its kept outputs, then a
    value for every merged residual slot (`_empty_like_type` where it has
    none: JAX fills them with `empty`, whose value is never read)."""
    n_known = len(n_outs_kept)
    with building() as b:
        ins = [b.new_input(t) for t in known.in_types]
        vals = eval_program_traced(known, *ins)
        outs = [v for v, k in zip(vals[:n_known], n_outs_kept) if k]
        res = [None] * len(all_res)
        for slot, v in zip(slots, vals[n_known:]):
            res[slot] = v
        res = [_empty_like_type(t) if r is None else r for r, t in zip(res, all_res)]
        return b.build(ins, outs + res)


def _join_staged(staged: Program, n_res: int, all_res, slots, outputs_fn=None) -> Program:
    """_join_cond_pe_staged_jaxpr_inputs: the staged branch takes every
    merged residual slot (ignoring the ones it does not use)."""
    with building() as b:
        res = [b.new_input(t) for t in all_res]
        rest = [b.new_input(t) for t in staged.in_types[n_res:]]
        outs = eval_program_traced(staged, *[res[s] for s in slots], *rest)
        if outputs_fn is not None:
            outs = outputs_fn(outs)
        return b.build(res + rest, outs)


def _saves_literals() -> bool:
    """Whether linearizing a cond saves a branch's literal tangent output
    (a scalar zero) as a residual: from jax 0.7.1 (spec.semantics)."""
    return semantics().cond_saves_scalar_zero_tangents


def _cond_partial_eval(eqn: Eqn, in_unknowns, in_inst, *, saveable, linearize, constants_shared=True):
    """Split every branch with the same unknowns; residuals of all branches
    are merged by type into outputs of the known cond.

    linearize (`_cond_linearize`): each branch is linearized as a jaxpr
    (ad.linearize_jaxpr with allow_fwds=False): residuals in the order the
    tangent branch first reads them, inputs of the branch included (never
    forwarded), literals inline; a zero tangent a rule makes in a branch is
    created in its tangent branch, never saved (JAX saves a scalar one: the
    divergence cond-linearize-saves-an-instantiated-zero), while a zero
    output tangent a branch instantiates because another branch's is
    nonzero is known (`_known_zero`) and saved. The staged cond
    reads only the index, the residuals and the unknown operands.

    inside a checkpoint (`_cond_partial_eval_custom`): each branch is split
    by partial_eval_jaxpr_custom with the enclosing policy, every input
    available to the staged branch (in_inst=True) and every output
    instantiated (ensure_out_inst=True), so the staged cond returns all
    outputs, known ones too, and reads every operand. A branch's constants
    are read by both halves as they are (`core.ClosedJaxpr(jaxpr_staged,
    jaxpr.consts)`; partial_eval_jaxpr_custom writes constvars known and
    instantiated), never residuals; with `constants_shared=False`
    (jax_remat3's `_cond_remat`, whose remat.remat_jaxpr makes every
    constant the rematerialization reads an output of the forward branch)
    they are residual outputs of the known cond."""
    branches = eqn.params["branches"]
    index_uk, *ops_uk = in_unknowns
    n_out = len(eqn.outputs)
    if index_uk:                       # the whole cond is staged
        return [], [eqn], [True] * n_out, [True] * n_out, [], {}
    index, ops = eqn.inputs[0], eqn.inputs[1:]
    pes = _split_branches(branches, ops_uk, saveable, linearize, constants_shared)
    unks_out = [any(u) for u in zip(*[pe.out_unknowns for pe in pes])]
    all_res, slots = _merge_branch_residuals([[r.type for r in pe.residuals] for pe in pes])
    known_branches = []
    for pe, s in zip(pes, slots):
        kept = [not u for u, bu in zip(unks_out, pe.out_unknowns) if not bu]
        known_branches.append(_join_known(pe.known, kept, all_res, s))
    res_vars = [Var(t) for t in all_res]
    known_ins = [a for a, u in zip(ops, ops_uk) if not u]
    known_outs = [v for v, u in zip(eqn.outputs, unks_out) if not u]
    known_eqn = Eqn(cond_p, [index, *known_ins], known_outs + res_vars,
                    dict(eqn.params, branches=tuple(known_branches)), residual_outputs=len(res_vars))
    if linearize:
        def staged_outputs(pe):
            def pick(outs):
                it = iter(outs)
                return [next(it) for v, u in zip(eqn.outputs, unks_out) if u]
            return pick
        staged_branches = [_join_staged(pe.staged, len(pe.residuals), all_res, s, staged_outputs(pe))
                           for pe, s in zip(pes, slots)]
        staged_ins = [a for a, u in zip(ops, ops_uk) if u]
        staged_outs = [v for v, u in zip(eqn.outputs, unks_out) if u]
        out_inst = unks_out
    else:
        staged_branches = [_join_staged(pe.staged, len(pe.residuals), all_res, s)
                           for pe, s in zip(pes, slots)]
        staged_ins, staged_outs, out_inst = list(ops), list(eqn.outputs), [True] * n_out
    staged_eqn = Eqn(cond_p, [index, *res_vars, *staged_ins], staged_outs,
                     dict(eqn.params, branches=tuple(staged_branches)))
    if not staged_outs and (linearize or not has_effects(staged_eqn)
                            or not semantics().cond_stages_effects_alone):
        # _cond_partial_eval_custom returns its staged cond whatever it
        # returns, and DCE keeps one with an effect (a print its staged
        # branch runs again: an enclosing checkpoint's backward pass then
        # traces it, asking a nested checkpoint's policy: pristine nightly
        # finding 7f69def811)
        return [known_eqn], [], unks_out, out_inst, [], {}
    return [known_eqn], [staged_eqn], unks_out, out_inst, [], {}


def _split_branches(branches, ops_uk, saveable, linearize: bool, constants_shared: bool) -> list:
    """Each branch partially evaluated with the operands' unknowns, as
    `_cond_partial_eval` says (its docstring: linearized, or inside a
    checkpoint)."""
    if linearize:
        pes = [partial_eval(b, ops_uk, saveable=saveable, linearize=True,
                            literals_are_residuals=False, order="first_use") for b in branches]
        # an output some branch computes in its tangent part is returned by
        # every tangent branch: a branch that knows it (a constant tangent a
        # rule made) saves it as a residual, a scalar literal too (from 0.7.1)
        staged_anywhere, saved = [any(u) for u in zip(*[pe.out_unknowns for pe in pes])], _saves_literals()
        return [partial_eval(b, ops_uk, saveable=saveable, linearize=True, instantiate=staged_anywhere,
                             literals_are_residuals=False, literal_outputs_are_residuals=saved,
                             order="first_use") for b in branches]
    # residuals counted before DCE, as partial_eval_jaxpr_custom does
    # (what a dead staged equation reads is a residual too)
    return [partial_eval(b, ops_uk, in_inst=[True] * len(ops_uk), saveable=saveable, instantiate=True,
                         constants_are_residuals=not constants_shared, order="first_use", dce_staged=False)
            for b in branches]


def _cond_dce(eqn: Eqn, used_outputs):
    """_cond_dce_rule: an operand is kept if some branch reads it (the index
    always); every branch is pruned to the kept operands and used outputs."""
    branches = eqn.params["branches"]
    used_inputs = [False] * len(branches[0].inputs)
    for b in branches:
        _, used = dce(b, used_outputs)
        used_inputs = [x or y for x, y in zip(used_inputs, used)]
    new = []
    for b in branches:
        pruned, _ = dce(b, used_outputs)
        new.append(Program([v for v, u in zip(pruned.inputs, used_inputs) if u], pruned.eqns,
                           pruned.outputs))
    n_res = eqn.residual_outputs
    kept_res = sum(used_outputs[len(used_outputs) - n_res:]) if n_res else 0
    out = Eqn(cond_p, [eqn.inputs[0]] + [a for a, u in zip(eqn.inputs[1:], used_inputs) if u],
              [v for v, u in zip(eqn.outputs, used_outputs) if u],
              dict(eqn.params, branches=tuple(new)), why=eqn.why, residual_outputs=kept_res)
    return out, [True] + used_inputs


partial_eval_rules[cond_p] = _cond_partial_eval
dce_rules[cond_p] = _cond_dce


# ==========================================================================
# cond: transpose

def _cond_transpose(cts, index, *args, branches):
    """A cond of the transposed branches (`_cond_transpose_fancy`): each
    branch maps (non-linear operands, output cotangents) to the cotangents
    of the linear operands."""
    if is_undefined(index):
        raise PrimitiveError(cond_p, "transpose with respect to the index (not linear)")
    linear = [is_undefined(a) for a in args]
    trans = tuple(transpose(b, linear) for b in branches)
    nonlin = [a for a in args if not is_undefined(a)]
    outs = iter(cond_eqn(index, *nonlin, *[instantiate(c) for c in cts], branches=trans))
    return [None] + [next(outs) if lin else None for lin in linear]


transpose_rules[cond_p] = _cond_transpose


# ==========================================================================
# cond: batching

def _bcast_select(pred, on_true, on_false):
    if pred.ndim != on_true.ndim:
        pred = broadcast_in_dim(pred, on_true.shape, tuple(range(pred.ndim)))
    return select_n(pred, on_false, on_true)      # lax.select(pred, on_true, on_false)


def _bcast_select_n(pred, *cases):
    if pred.ndim != cases[0].ndim:
        pred = broadcast_in_dim(pred, cases[0].shape, tuple(range(pred.ndim)))
    return select_n(pred, *cases)


def _cond_batch(args, dims, *, branches):
    """_cond_batching_rule. Unbatched index: batch the branches (batched
    operands at axis 0; an output is batched if it is in some branch).
    Batched index: every branch runs on all members (its operands selected
    against their stop_gradient copies, for reverse mode's sake) and
    select_n picks each member's branch."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    index, *ops = args
    index_dim, *op_dims = dims
    if index_dim is not None:
        index, *ops = [bdim_at_front(x, d, size) for x, d in zip(args, dims)]
        n_out = len(branches[0].outputs)
        branch_outs = []
        for i, b in enumerate(branches):
            batched, _ = vmap_program(b, [0] * len(ops), [0] * n_out, size)
            pred = eq(index, np.int32(i))
            ops_ = [_bcast_select(pred, x, stop_gradient(x)) if is_differentiable(x.type) else x
                    for x in ops]
            branch_outs.append(eval_program_traced(batched, *ops_))
        return [_bcast_select_n(index, *outs) for outs in zip(*branch_outs)], [0] * n_out
    ops_bat = [d is not None for d in op_dims]
    ops = [moveaxis(x, d, 0) if d is not None else x for x, d in zip(ops, op_dims)]
    in_dims = [0 if b else None for b in ops_bat]
    per = [vmap_program(b, in_dims, "any", size)[1] for b in branches]
    out_bat = [any(d is not None for d in ds) for ds in zip(*per)]
    out_dims = [0 if b else None for b in out_bat]
    batched = tuple(vmap_program(b, in_dims, out_dims, size)[0] for b in branches)
    return cond_eqn(index, *ops, branches=batched), out_dims


batch_rules[cond_p] = _cond_batch


# ==========================================================================
# while: shape, eval, cost

def _split(xs, *sizes):
    out, i = [], 0
    for n in sizes:
        out.append(list(xs[i:i + n]))
        i += n
    out.append(list(xs[i:]))
    return out


def _while_shape(*in_types, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    if not isinstance(cond_jaxpr, Program) or not isinstance(body_jaxpr, Program):
        raise PrimitiveError(while_p, "params cond_jaxpr and body_jaxpr must be Programs")
    cconsts, bconsts, carry = _split(in_types, cond_nconsts, body_nconsts)
    if cond_jaxpr.in_types != cconsts + carry:
        raise PrimitiveError(while_p, f"cond_jaxpr takes {cond_jaxpr.in_types}, got {cconsts + carry}")
    if body_jaxpr.in_types != bconsts + carry:
        raise PrimitiveError(while_p, f"body_jaxpr takes {body_jaxpr.in_types}, got {bconsts + carry}")
    if body_jaxpr.out_types != carry:
        raise PrimitiveError(while_p, f"body_jaxpr returns {body_jaxpr.out_types}, the carry is {carry}")
    (pred,) = cond_jaxpr.out_types if len(cond_jaxpr.outputs) == 1 else (None,)
    if pred is None or pred.dtype != np.bool_ or any(
            c.shape[:pred.ndim] != pred.shape for c in carry):
        raise PrimitiveError(while_p, f"cond_jaxpr must return one bool whose shape prefixes "
                                      f"every carry's (bool[] unless batched), got {cond_jaxpr.out_types}")
    return carry


def _while_eval(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cconsts, bconsts, carry = _split(args, cond_nconsts, body_nconsts)
    while True:
        (pred,) = evaluate(cond_jaxpr, *cconsts, *carry)
        pred = np.asarray(pred)
        if pred.dtype == object:
            raise SymbolicError("while: the predicate must be concrete")
        if not pred.any():
            return carry
        new = evaluate(body_jaxpr, *bconsts, *carry)
        if pred.ndim == 0:
            carry = new
        else:   # a batched predicate: only members whose predicate holds step
            carry = [np.where(pred.reshape(pred.shape + (1,) * (np.ndim(c) - pred.ndim)), n, c)
                     .astype(np.asarray(c).dtype) for n, c in zip(new, carry)]


shape_rules[while_p] = _while_shape
eval_rules[while_p] = _while_eval
# the number of iterations is not known: the cost of one (cond + body)
cost_rules[while_p] = lambda *types, cond_jaxpr, body_jaxpr, **_: (
    _program_flops(cond_jaxpr) + _program_flops(body_jaxpr))


# ==========================================================================
# while: JVP

def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    """_while_loop_jvp: fixpoint over which carries have tangents, then one
    loop over (cconsts, bconsts, bconst tangents, carry, carry tangents);
    the cond ignores the tangents."""
    nonzeros = [not isinstance(t, Zero) for t in tangents]
    cconst_nz, bconst_nz, init_nz = _split(nonzeros, cond_nconsts, body_nconsts)
    n_carry = len(init_nz)
    bconst_types = body_jaxpr.in_types[:body_nconsts]
    carry_types = body_jaxpr.out_types

    def body_jvp(carry_nz):
        """(bconsts, bconst dots, carry, carry dots) -> (carry, carry dots), dots instantiated for carry_nz."""
        with building() as b:
            bc = [b.new_input(t) for t in bconst_types]
            bc_dot = [b.new_input(t) for t, nz in zip(bconst_types, bconst_nz) if nz]
            c = [b.new_input(t) for t in carry_types]
            c_dot = [b.new_input(t) for t, nz in zip(carry_types, carry_nz) if nz]
            it_b, it_c = iter(bc_dot), iter(c_dot)
            tans = ([next(it_b) if nz else Zero(t) for t, nz in zip(bconst_types, bconst_nz)]
                    + [next(it_c) if nz else Zero(t) for t, nz in zip(carry_types, carry_nz)])
            outs, out_ts = jvp_traced(body_jaxpr, bc + c, tans)
            out_nz = [not isinstance(t, Zero) for t in out_ts]
            kept = [instantiate(t) for t, nz in zip(out_ts, carry_nz) if nz]
            return b.build(bc + bc_dot + c + c_dot, outs + kept), out_nz

    carry_nz = [nz and is_differentiable(t) for nz, t in zip(init_nz, carry_types)]
    for _ in range(1 + n_carry):
        body, out_nz = body_jvp(carry_nz)
        if [a or b for a, b in zip(carry_nz, out_nz)] == carry_nz:
            break
        carry_nz = [a or b for a, b in zip(carry_nz, out_nz)]
    cconst, bconst, init = _split(primals, cond_nconsts, body_nconsts)
    _, bconst_t, init_t = _split(tangents, cond_nconsts, body_nconsts)
    bconst_dot = [t for t in bconst_t if not isinstance(t, Zero)]
    init_dot = [_init_tangent(t) for t, nz in zip(init_t, carry_nz) if nz]
    # the cond takes the carry tangents too, and ignores them
    cond_aug = Program(cond_jaxpr.inputs + [Var(t) for t, nz in zip(carry_types, carry_nz) if nz],
                       cond_jaxpr.eqns, cond_jaxpr.outputs)
    outs = bind(while_p, *cconst, *bconst, *bconst_dot, *init, *init_dot,
                cond_jaxpr=cond_aug, body_jaxpr=body, cond_nconsts=cond_nconsts,
                body_nconsts=len(bconst) + len(bconst_dot))
    it = iter(outs[n_carry:])
    return outs[:n_carry], [next(it) if nz else None for nz in carry_nz]


def _init_tangent(t):
    """A carry's initial tangent, a zero instantiated (`ad.instantiate_zeros`
    in _while_loop_jvp). JAX computes that zero in the primal trace
    (`lax.full` binds convert_element_type there), so when linearizing it is
    a known value the staged loop reads: a residual, which saved_residuals
    names `from a literal` for a scalar (tracing folds it to one). So a
    scalar zero is a `traced` literal, which the loop does not keep inline."""
    if not isinstance(t, Zero) or t.type.ndim:
        return instantiate(t)
    return Literal(np.zeros((), t.type.dtype), t.type, traced=True)


def _carry_dependence(body: Program, body_flags: list, carry: list) -> list[bool]:
    """Which carries depend on the flagged inputs after any number of
    iterations: a fixpoint through the body (a flagged init is one)."""
    for _ in range(1 + len(carry)):
        new = [a or b for a, b in zip(carry, program_dependence(body, body_flags + carry))]
        if new == carry:
            return carry
        carry = new
    raise AssertionError("while: carry fixpoint not reached")


def _while_dependence(eqn, in_flags):
    """Which carries depend on the flagged inputs: a fixpoint through the
    body; if the predicate depends on them, every carry does."""
    p = eqn.params
    cflags, bflags, carry = _split(in_flags, p["cond_nconsts"], p["body_nconsts"])
    carry = _carry_dependence(p["body_jaxpr"], bflags, carry)
    if any(program_dependence(p["cond_jaxpr"], cflags + carry)):
        return [True] * len(carry)
    return carry


jvp_rules[while_p] = _while_jvp


# ==========================================================================
# while: partial evaluation, DCE, transpose

def _known_part(prog: Program, unknowns, n_outs: int) -> Program:
    """The known part of `prog` computing its first n_outs outputs (known),
    from its known inputs; nothing is saved (nothing_saveable)."""
    pe = partial_eval(prog, unknowns)
    known = Program(pe.known.inputs, pe.known.eqns, pe.known.outputs[:n_outs])
    return dce(known)[0]


def _while_partial_eval(eqn: Eqn, in_unknowns, in_inst, *, saveable, linearize):
    """_while_partial_eval (linearize) / _while_partial_eval_custom: the
    unknown carries are found by a fixpoint through the body; a known loop
    computes the known carries, and the whole loop is staged for the
    unknown ones (so it reads, and saves, every known input). If the
    predicate is unknown, or all inputs are known or all unknown, the whole
    equation is staged."""
    p = eqn.params
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cond_uk, body_uk, carry_uk = _split(list(in_unknowns), nc, nb)
    body = p["body_jaxpr"]
    if linearize:           # JAX linearizes a while by JVP and a JaxprTrace
        _while_jaxpr_trace(eqn, in_unknowns, ask_policies)
    carry_uk = _carry_dependence(body, body_uk, carry_uk)
    pred_uk = any(program_dependence(p["cond_jaxpr"], cond_uk + carry_uk))
    n = len(carry_uk)
    stage_all = pred_uk or (linearize and (not any(in_unknowns) or all(in_unknowns)))
    if stage_all:
        return [], [eqn], [True] * n, [True] * n, [], {}
    n_known = n - sum(carry_uk)
    body_known = _known_part(body, body_uk + carry_uk, n_known)
    cond_known = _known_part(p["cond_jaxpr"], cond_uk + carry_uk, 1)
    uks = cond_uk + body_uk + carry_uk
    known_ins = [a for a, u in zip(eqn.inputs, uks) if not u]
    known_outs = [v for v, u in zip(eqn.outputs, carry_uk) if not u]
    known_eqn = Eqn(while_p, known_ins, known_outs,
                    dict(cond_jaxpr=cond_known, body_jaxpr=body_known,
                         cond_nconsts=nc - sum(cond_uk), body_nconsts=nb - sum(body_uk)))
    if linearize and not any(carry_uk) and not has_effects(eqn):
        # no carry unknown: the whole loop JAX stages beside the known one
        # (default_process_primitive) has no output anything reads, and
        # linearize_from_jvp's tracers_to_jaxpr keeps only what the tangent
        # outputs reach: nothing is staged, no known operand read there (found
        # by a pristine nightly, e35a82cb42: a body const that only the dead
        # staged loop read came first among a jit's residuals). A loop with an
        # effect is kept (tracers_to_jaxpr's roots include the trace's
        # effect_handles), and saves what it reads (campaign, 9164e12ae9).
        return [known_eqn], [], carry_uk, carry_uk, [], {}
    if linearize:
        # the staged loop's known carries are recomputed and dropped: the
        # known values downstream are the known loop's
        outs = [v if u else Var(v.type) for v, u in zip(eqn.outputs, carry_uk)]
        staged_eqn = Eqn(while_p, eqn.inputs, outs, dict(p))
        return [known_eqn], [staged_eqn], carry_uk, carry_uk, [], {}
    return [known_eqn], [eqn], carry_uk, [True] * n, [], {}


def _while_dce(eqn: Eqn, used_outputs):
    """A loop is kept whole (its carries feed each other and the predicate)."""
    return eqn, [True] * len(eqn.inputs)


WHILE_TRANSPOSE_ERROR = ("Reverse-mode differentiation does not work for "
                         "lax.while_loop or lax.fori_loop with dynamic start/stop values. "
                         "Try using lax.scan, or using fori_loop with static start/stop.")


def _while_transpose(*_, **__):
    """_while_transpose_error: JAX's message, word for word."""
    raise ValueError(WHILE_TRANSPOSE_ERROR)


partial_eval_rules[while_p] = _while_partial_eval
dce_rules[while_p] = _while_dce
transpose_rules[while_p] = _while_transpose


# ==========================================================================
# while: batching

def _while_batch(args, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    """_while_loop_batching_rule: a fixpoint over which carries are batched;
    if the predicate is then batched, every carry is batched (at axis 0)
    and the loop runs until no member's predicate holds."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    cconsts, bconsts, init = _split(args, cond_nconsts, body_nconsts)
    cconst_dims, bconst_dims, init_dims = _split(dims, cond_nconsts, body_nconsts)
    bconst_bat = [d is not None for d in bconst_dims]
    carry_bat = [d is not None for d in init_dims]
    probe = lambda flags: [0 if f else None for f in flags]
    for _ in range(1 + len(carry_bat)):
        _, out = vmap_program(body_jaxpr, probe(bconst_bat + carry_bat), "any", size)
        new = [a or (d is not None) for a, d in zip(carry_bat, out)]
        if new == carry_bat:
            break
        carry_bat = new
    _, (pred_dim,) = vmap_program(cond_jaxpr, probe([d is not None for d in cconst_dims]) + probe(carry_bat),
                                  "any", size)
    if pred_dim is not None:
        carry_dims = [0] * len(carry_bat)
        body, _ = vmap_program(body_jaxpr, bconst_dims + carry_dims, carry_dims, size)
        cond, _ = vmap_program(cond_jaxpr, cconst_dims + carry_dims, [0], size)
    else:
        rank = cond_jaxpr.out_types[0].ndim
        carry_dims = [rank if b else None for b in carry_bat]
        body, _ = vmap_program(body_jaxpr, bconst_dims + carry_dims, carry_dims, size)
        cond, _ = vmap_program(cond_jaxpr, cconst_dims + carry_dims, [None], size)
    new_init = []
    for x, old, new in zip(init, init_dims, carry_dims):
        if old is None and new is not None:
            new_init.append(broadcast_at(x if isinstance(x, Tracer) else np.asarray(x), size, new))
        elif old is None:
            new_init.append(x)
        else:
            new_init.append(moveaxis(x, old, new))
    outs = bind(while_p, *cconsts, *bconsts, *new_init, cond_jaxpr=cond, body_jaxpr=body,
                cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
    return outs, carry_dims


batch_rules[while_p] = _while_batch


# ==========================================================================

def _register():
    dependence_rules[cond_p] = _cond_dependence
    literal_operands_inline.add(while_p)
    dependence_rules[while_p] = _while_dependence


_register()


def _cond_jaxpr_trace(eqn: Eqn, in_unknowns, ask) -> None:
    """_cond_partial_eval: an unknown index stages the whole cond
    (default_process_primitive); else each branch is traced
    (pe.partial_eval_jaxpr_nounits) with the operands' unknowns."""
    index_unknown, *ops_unknown = in_unknowns
    if not index_unknown:
        for branch in eqn.params["branches"]:
            ask(branch, ops_unknown)


def _while_jaxpr_trace(eqn: Eqn, in_unknowns, ask) -> None:
    """_while_partial_eval traces the body (pe.partial_eval_jaxpr_nounits)
    until its unknown carries are a fixpoint, first with the carries
    unknown at init (which asks each question a later trace asks), then the
    predicate with the fixpoint's carries, before it decides whether to
    stage the whole loop."""
    p = eqn.params
    cond_uk, body_uk, carry_uk = _split(list(in_unknowns), p["cond_nconsts"], p["body_nconsts"])
    ask(p["body_jaxpr"], body_uk + carry_uk)
    ask(p["cond_jaxpr"], cond_uk + _carry_dependence(p["body_jaxpr"], body_uk, carry_uk))


jaxpr_trace_rules[cond_p] = _cond_jaxpr_trace
jaxpr_trace_rules[while_p] = _while_jaxpr_trace
linearizes_in_order.add(cond_p)   # _cond_linearize: ad.linearize_jaxpr of each branch

# a cond's and a while's rules are their branches' and body's: complex
# values pass through them
complex_rules.update({cond_p, while_p})
