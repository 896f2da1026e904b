"""remat (jax.checkpoint) and checkpoint_name.

`remat` wraps a sub-program. Evaluating it evaluates the body; its JVP is a
remat of the body's JVP (same policy). What makes it special is partial
evaluation, i.e. differentiation: the body's known values are saved only
where the checkpoint's *policy* allows, and everything else the backward
pass needs is recomputed from saved values and the checkpoint's inputs.

The two rules JAX 0.10.2 follows (remat2, `jax/_src/ad_checkpoint.py`):

1. A checkpoint met by ordinary differentiation (`jax.vjp`, `jax.grad`;
   `linearize=True` here) is split by *its own* policy (None means
   nothing_saveable) with `partial_eval_jaxpr_custom`: the known part is
   inlined into the forward pass ("hoisted out of the remat"), so saved
   values are reported as outputs of their primitives; the staged part
   stays a remat, which reads the residuals and the checkpoint's inputs.
   (`remat_partial_eval`)
2. A checkpoint nested inside a checkpoint that is being split is split by
   the *enclosing* checkpoint's policy; its own policy is not consulted.
   Both halves stay remat equations, so values it saves are reported as
   "output of remat2". (`call_partial_eval_custom_rule` registered for
   remat_p in `partial_eval_jaxpr_custom_rules`)

`name` (checkpoint_name) is the identity; policies see it as an equation
with a `name` param, so saving a named value saves the `name` output.
Names do not name tangents: the tangent passes through unnamed.

Rule 1 also rounds each float residual that the known part reads through
`reduce_precision` to its own format (`_round_residuals`; an identity on
values, but a second equation and a second value: under a second
differentiation both the producer's own output and its rounded copy can be
saved). `saved_residuals` looks through it (`source_rules` below).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

import ml_dtypes

from spec.core import (JaxFacts, jax_facts, PrimitiveError, Zero, bind, instantiate, cost_rules, dce_rules, eval_rules,
                       is_undefined, jaxpr_trace_rules, jvp_rules, partial_eval_rules,
                       primitive, shape_rules, staging_rules, transpose_rules, Tracer)
from spec.ir import Eqn, Program, Var, constants_read, is_complex, is_float, reading_constants_as_inputs
from spec.prims_conv import reduce_precision_p
from spec.semantics import semantics
from spec.partial_eval import (Source, by_jaxpr_trace, dce, dce_body_eqn, inlined_when_known, partial_eval,
                               source_rules)
from spec import policies as _policies
from spec.batching import vectorized_batcher, vmap_program
from spec.core import batch_rules, building, complex_rules
from spec.evaluate import evaluate
from spec.ir import subprograms
from spec.jvp import jvp_program, output_dependence
from spec.transpose import split_nonlinear, transpose_split

# ==========================================================================
# name (checkpoint_name)

name_p = primitive("name", ["name"])
jax_facts[name_p] = JaxFacts("name", "lambda x, name: checkpoint_name(x, name)")


def checkpoint_name(x, name: str):
    """Name a value so that policies can refer to it."""
    if not isinstance(name, str):
        raise PrimitiveError(name_p, f"param name must be a str, got {name!r}")
    return bind(name_p, x, name=name)


shape_rules[name_p] = lambda x, *, name: [x]
eval_rules[name_p] = lambda x, *, name: x
cost_rules[name_p] = lambda x, **_: 0
# name_jvp: the primal is named, the tangent passes through unnamed
jvp_rules[name_p] = lambda primals, tangents, *, name: (checkpoint_name(primals[0], name), tangents[0])
transpose_rules[name_p] = lambda ct, x, *, name: [ct]
source_rules[name_p] = lambda eqn, var: Source("named", name=eqn.params["name"])


# ==========================================================================
# device_put (offloading residuals to another memory space; a copy where it is)

device_put_p = primitive("device_put", ["memory_space"], multiple_results=True)


def _device_put_from_jax(params: dict) -> dict:
    """A JAX device_put that names no device, source or memory kind is a
    copy where the value is: `jnp.asarray` of a constant binds one before
    jax 0.7 (`devices=[None], srcs=[None]`, a list of one per operand from
    jax 0.4.31; `device=None, src=None` before), and `jax.device_put(x)`
    on every release. An imported program's values live in device memory,
    so that is `memory_space='device'`. One that names a memory space
    (`devices=(MemorySpace.Device,)`: what a third derivative of an
    offloading checkpoint binds to bring a value back, found by a pristine
    campaign, 570daba7ef; MemorySpace.Host to offload) moves the value
    there; several operands alike, all to one place. A source that names
    a memory space is where the operand lives already, which its type
    says: JAX's _device_put_transpose (jax/_src/dispatch.py) swaps
    `devices` and `srcs` and names a Host operand's space as its source,
    so the transpose of a reload (grad-of-grad of an offloading checkpoint,
    found by a pristine campaign, 547413e987) binds
    `devices=(MemorySpace.Host,), srcs=(MemorySpace.Device,)`. Anything
    else (a device, a sharding, a memory kind, operands to different
    places) is left as JAX's params, which the spec does not model
    (refused by name)."""
    devices, srcs = ([params.get("device")], [params.get("src")]) if "device" in params else (
        list(params.get("devices", ())), list(params.get("srcs", ())))
    if not devices or any(d is not devices[0] and d != devices[0] for d in devices) or any(
            s is not None and _memory_space(s) is None for s in srcs):
        return params
    if devices[0] is None:
        return dict(memory_space="device")
    space = _memory_space(devices[0])
    return params if space is None else dict(memory_space=space)


def _memory_space(place) -> str | None:
    """The spec's memory space that JAX's `MemorySpace.Device` or `.Host`
    names; None for anything else (a device, a sharding)."""
    return {"memoryspace.device": "device", "memoryspace.host": "pinned_host"}.get(str(place).lower())


jax_facts[device_put_p] = JaxFacts(
    "device_put", "lambda *xs, memory_space: list(jax.device_put(xs) if memory_space == 'device' "
    "else jax.device_put(xs, jax.memory.Space.Host))", from_jax=_device_put_from_jax)


def device_put_eqn(srcs: list[Var], dsts: list[Var], memory_space: str) -> Eqn:
    return Eqn(device_put_p, list(srcs), list(dsts), dict(memory_space=memory_space))


shape_rules[device_put_p] = lambda *xs, memory_space: [
    x.with_memory_space(None if memory_space == "device" else memory_space) for x in xs]
eval_rules[device_put_p] = lambda *xs, memory_space: [x.copy() for x in xs]
cost_rules[device_put_p] = lambda *xs, **_: 0      # a transfer, not arithmetic


def _device_put_jvp(primals, tangents, *, memory_space):
    """ad.linear_jvp: the tangents copied like the primals, every one
    instantiated unless all are zeros."""
    primals_out = bind(device_put_p, *primals, memory_space=memory_space)
    if all(isinstance(t, Zero) for t in tangents):
        return primals_out, [Zero(t.type) for t in primals_out]
    return primals_out, bind(device_put_p, *map(instantiate, tangents), memory_space=memory_space)


jvp_rules[device_put_p] = _device_put_jvp


def _device_put_transpose(cts, *xs, memory_space):
    """_device_put_transpose: the nonzero cotangents copied back, in one
    copy, to where their operands live (one per memory space here: the
    spec's copy has one destination), zeros left zeros."""
    cts_in = list(cts)
    spaces = [x.type.memory_space or "device" for x in xs]
    for space in dict.fromkeys(s for s, ct in zip(spaces, cts) if not isinstance(ct, Zero)):
        at = [i for i, (s, ct) in enumerate(zip(spaces, cts)) if s == space and not isinstance(ct, Zero)]
        for i, copied in zip(at, bind(device_put_p, *[cts[i] for i in at], memory_space=space)):
            cts_in[i] = copied
    return cts_in


transpose_rules[device_put_p] = _device_put_transpose


def _device_put_batch(args, dims, *, memory_space):
    """_device_put_batcher: every operand copied as it is batched."""
    return bind(device_put_p, *args, memory_space=memory_space), list(dims)


batch_rules[device_put_p] = _device_put_batch


# ==========================================================================
# remat

remat_p = primitive("remat", ["jaxpr", "policy", "prevent_cse", "differentiated"],
                    multiple_results=True)
jax_facts[remat_p] = JaxFacts("remat2", "")   # jax.checkpoint, bound structurally (oracle/to_jax.py)


def checkpoint(fn: Callable, policy=None, prevent_cse: bool = True, static_argnums=()):
    """jax.checkpoint: returns a function that applies `fn` as one remat equation.

    `fn` is traced on the argument types when the returned function is
    called; arguments at `static_argnums` are passed to `fn` as Python values.

    The remat equation evaluates `jaxpr` on the operands (JAX's `remat2`);
    `policy` and `prevent_cse` only matter to partial evaluation
    (docs/semantics.md)."""
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint policy must be callable or None, got {policy!r}")

    def wrapped(*args):
        dyn = [a for i, a in enumerate(args) if i not in static]
        for i, a in enumerate(dyn):
            if not isinstance(a, Tracer):
                raise TypeError(f"checkpoint: argument {i} must be a traced array "
                                f"(or listed in static_argnums), got {type(a).__name__}")
        with building() as b:
            ins = [b.new_input(a.type) for a in dyn]
            it = iter(ins)
            out = fn(*[a if i in static else next(it) for i, a in enumerate(args)])
            multiple = isinstance(out, (tuple, list))
            prog = b.build(ins, list(out) if multiple else [out])
        _check_policy_names(policy, prog)
        # fun_remat binds the constants the body closes over as leading
        # operands, never prevented from CSE (jax/_src/ad_checkpoint.py)
        consts = constants_read(prog)
        cse = (False,) * len(consts) + prevent_cse if isinstance(prevent_cse, tuple) else prevent_cse
        outs = bind(remat_p, *consts, *dyn, jaxpr=reading_constants_as_inputs(prog, consts), policy=policy,
                    prevent_cse=cse, differentiated=False)
        return tuple(outs) if multiple else outs[0]
    wrapped.__name__ = f"checkpoint({getattr(fn, '__name__', 'fn')})"
    return wrapped


def names_in(prog: Program, _seen=None) -> set[str]:
    """The checkpoint names bound anywhere in `prog` (sub-programs included,
    and the programs of lazily traced custom rules: a custom_vjp's forward
    rule may name its residuals).

    A rule's programs may contain its own custom call again: a custom_jvp
    defined with `defjvps` (jax.nn.relu) computes its primal output by
    calling itself (`primal_out = self(*primals)` in custom_jvp.defjvps),
    and an imported rule's program holds that call with a rule of its own,
    a new Rule object each time a rule is traced (oracle.from_jax converts
    each traced jaxpr afresh; so does a rule mapped by map_programs). So a
    rule is walked once per object and once per distinct set of traced
    programs (compared as printed: the same function's rule traces to the
    same programs), which ends the walk where the call recurs."""
    seen = set() if _seen is None else _seen
    out = set()
    for e in prog.eqns:
        if e.primitive is name_p:
            out.add(e.params["name"])
        subs = [sub for _, sub in subprograms(e.params)]
        for v in e.params.values():
            if hasattr(v, "traced_programs") and id(v) not in seen:
                seen.add(id(v))
                traced = v.traced_programs()
                printed = ("rule programs",) + tuple(str(p) for p in traced)
                if printed not in seen:
                    seen.add(printed)
                    subs += traced
        for sub in subs:
            out |= names_in(sub, seen)
    return out


def _check_policy_names(policy, prog: Program) -> None:
    """A built-in name policy that mentions a name the checkpointed function
    never binds is almost always a typo: the builder API reports it. (JAX
    ignores such names silently; the oracle's importer does not check.)"""
    mentioned = set()
    for attr in ("names", "names_which_can_be_saved", "names_which_can_be_offloaded"):
        mentioned |= set(getattr(policy, attr, ()) or ())
    for sub in (getattr(policy, "policy_1", None), getattr(policy, "policy_2", None)):
        for attr in ("names", "names_which_can_be_saved", "names_which_can_be_offloaded"):
            mentioned |= set(getattr(sub, attr, ()) or ())
    unknown = mentioned - names_in(prog)
    if unknown:
        raise _policies.PolicyError(
            f"checkpoint policy {_policies.policy_name(policy)} mentions name(s) {sorted(unknown)} "
            f"that the checkpointed function never binds with checkpoint_name; "
            f"names bound: {sorted(names_in(prog)) or 'none'}")


def _remat_shape(*in_types, jaxpr, policy, prevent_cse, differentiated):
    if not isinstance(jaxpr, Program):
        raise PrimitiveError(remat_p, f"param jaxpr must be a Program, got {type(jaxpr).__name__}")
    if list(in_types) != jaxpr.in_types:
        raise PrimitiveError(remat_p, f"body takes {jaxpr.in_types}, got {list(in_types)}")
    if policy is not None and not callable(policy):
        raise PrimitiveError(remat_p, f"policy must be callable or None, got {policy!r}")
    if not isinstance(prevent_cse, bool) and (
            not isinstance(prevent_cse, tuple) or len(prevent_cse) != len(in_types)):
        raise PrimitiveError(remat_p, f"prevent_cse must be a bool or one bool per input, got {prevent_cse!r}")
    return jaxpr.out_types


def _remat_eval(*args, jaxpr, **params):
    return evaluate(jaxpr, *args)


def _remat_jvp(primals, tangents, *, jaxpr, policy, prevent_cse, differentiated):
    """remat_jvp: a remat of the body's JVP, with the same policy."""
    return remat_of_body_jvp(remat_p, lambda body, nonzeros: jvp_program(body, nonzeros, instantiate_zeros=False),
                             primals, tangents, jaxpr=jaxpr, policy=policy, prevent_cse=prevent_cse,
                             differentiated=differentiated)


def remat_of_body_jvp(prim, body_jvp, primals, tangents, *, jaxpr, policy, prevent_cse, differentiated):
    """A checkpoint `prim` of `body_jvp(jaxpr, nonzeros) -> (JVP program,
    which output tangents it returns)`, applied to the primals and the
    nonzero tangents: (primal outputs, output tangents, None for a zero)."""
    nonzeros = [not isinstance(t, Zero) for t in tangents]
    body, out_nz = body_jvp(jaxpr, nonzeros)
    nz_tangents = [t for t in tangents if not isinstance(t, Zero)]
    if isinstance(prevent_cse, tuple):
        prevent_cse = prevent_cse + (True,) * len(nz_tangents)
    outs = bind(prim, *primals, *nz_tangents, jaxpr=body, policy=policy,
                prevent_cse=prevent_cse, differentiated=differentiated)
    n = len(jaxpr.outputs)
    it = iter(outs[n:])
    return outs[:n], [next(it) if nz else None for nz in out_nz]


def policy_saveable(policy) -> Callable[[Eqn], object]:
    """The partial evaluator's view of a checkpoint policy: ask it about an
    equation with the primitive, the input types and the params."""
    policy = _policies.nothing_saveable if policy is None else policy
    return lambda eqn: _policies.ask(policy, eqn.primitive, [a.type for a in eqn.inputs], eqn.params)


def _clone(eqns: Sequence[Eqn], env: dict, why=lambda e: None) -> list[Eqn]:
    """Copy equations with fresh output vars; `env` maps old var ids to atoms."""
    out = []
    for e in eqns:
        ins = [env.get(a.id, a) if isinstance(a, Var) else a for a in e.inputs]
        outs = [Var(v.type) for v in e.outputs]
        env.update({v.id: n for v, n in zip(e.outputs, outs)})
        out.append(Eqn(e.primitive, ins, outs, e.params, why=why(e) or e.why,
                       residual_outputs=e.residual_outputs))
    return out


def _staged_remat(pe, eqn, res_atoms, params, body_dce=True):
    """The staged remat: its body is pe.staged, with its dead code and
    unused inputs removed where the rule DCEs it (remat_partial_eval's
    `pe.dce_jaxpr`; not call_partial_eval_custom_rule, Rule 2)."""
    staged_ins_outer = [a for a, m in zip(eqn.inputs, pe.staged_inputs) if m]
    body, used = dce(pe.staged, prune_inputs=True) if body_dce else (pe.staged, [True] * len(pe.staged.inputs))
    args = [a for a, u in zip(list(res_atoms) + staged_ins_outer, used) if u]
    prevent_cse = params["prevent_cse"]
    if isinstance(prevent_cse, tuple):
        flags = [True] * len(res_atoms) + [f for f, m in zip(prevent_cse, pe.staged_inputs) if m]
        prevent_cse = tuple(f for f, u in zip(flags, used) if u)
    staged_outs = [v for v, m in zip(eqn.outputs, pe.staged_outputs) if m]
    return Eqn(remat_p, args, staged_outs,
               dict(params, jaxpr=body, prevent_cse=prevent_cse, differentiated=True))


def _staged_if_reached(staged: Eqn) -> list[Eqn]:
    """The staged checkpoint of a linearization, if the linear program
    reaches it. remat_partial_eval stages it with pe.new_eqn_recipe and
    registers no EffectHandle (jax/_src/ad_checkpoint.py), where
    JaxprTrace.default_process_primitive registers one for an equation with
    an effect; so tracers_to_jaxpr keeps it only if one of its outputs is
    an output of the linearization (ad.linearize_from_jvp linearizes one
    equation at a time: the checkpoint's own tangents), and only then does
    the linear program's DCE keep it for its effects. A staged checkpoint
    without outputs (a jax.debug.print of known values in a checkpoint with
    no float output) is dropped: the print does not run again in the
    backward pass, and what it reads is not saved (found by a pristine
    campaign; measured on 0.6.2 and 0.10.2)."""
    return [staged] if staged.outputs else []


def _remat_partial_eval(eqn: Eqn, in_unknowns, in_inst, *, saveable, linearize):
    body, params = eqn.params["jaxpr"], eqn.params
    n_out = len(eqn.outputs)
    if linearize:
        # Rule 1 (remat_partial_eval): split by this checkpoint's own policy,
        # with every input instantiated; hoist the known part out. The staged
        # remat reads the residuals in the order of jaxpr_known's residual
        # outputs, partial_eval_jaxpr_custom's insertion order
        # (`res_tracers = map(trace.new_instantiated_const, residuals)`,
        # jax/_src/ad_checkpoint.py): invisible at top level, where
        # saved_residuals lists the hoisted equations' outputs, but the
        # order in which an enclosing linearization (a scan's or a jit's
        # body) first reads them, so the order of their outputs.
        pe = partial_eval(body, in_unknowns, in_inst=[True] * len(in_unknowns),
                          saveable=policy_saveable(params["policy"]), order="first_use")
        env = {v.id: a for v, a in zip(body.inputs, eqn.inputs)}
        name = _policies.policy_name(params["policy"] or _policies.nothing_saveable)
        known_eqns = _clone(pe.known.eqns, env, why=lambda e: (
            f"policy {name} answered {pe.decisions[id(e)]}" if id(e) in pe.decisions else None))
        known_out_atoms = [env.get(a.id, a) if isinstance(a, Var) else a for a in pe.known.outputs]
        n_known = n_out - sum(pe.out_unknowns)
        # the checkpoint's known outputs *are* the hoisted values
        known_vars = [v for v, u in zip(eqn.outputs, pe.out_unknowns) if not u]
        known_eqns, known_out_atoms = _round_residuals(known_eqns, known_out_atoms, n_known)
        if semantics().jit_staging_forwards_inputs:
            known_eqns, known_out_atoms = _staged_again(known_eqns, known_out_atoms)
        subst = {v.id: a for v, a in zip(known_vars, known_out_atoms[:n_known])}
        res_atoms = known_out_atoms[n_known:]
        staged = _staged_remat(pe, eqn, res_atoms, params)
        return known_eqns, _staged_if_reached(staged), pe.out_unknowns, pe.out_unknowns, [], subst
    # Rule 2 (nested): split by the enclosing policy; both halves stay remats.
    # The known remat returns [*known outputs, *residuals], the residuals
    # in partial_eval_jaxpr_custom's insertion order
    # (pe.call_partial_eval_custom_rule, jax/_src/interpreters/partial_eval.py).
    # Neither half is DCE'd (call_partial_eval_custom_rule, jax 0.10.2): the
    # known remat computes every known value, dead ones too (which a scan's
    # hoisting then asks the checkpoint's policy about: pristine campaign
    # finding 57f43d1872, a JVP rule's constants); the
    # staged remat reads what its dead code reads, until an enclosing DCE
    # prunes it (dce_rules[remat_p], as remat_dce); a cond's staged branches
    # are not DCE'd, so there a dead nested checkpoint keeps its residuals
    # (campaign finding 43c5367912, 0.4.36; measured on 0.4.25-0.10.2).
    pe = partial_eval(body, in_unknowns, in_inst=in_inst, saveable=saveable,
                      stage_recomputed_outputs=True, order="first_use", dce_staged=False)
    res_vars = [Var(r.type) for r in pe.residuals]
    known_ins = [a for a, u in zip(eqn.inputs, in_unknowns) if not u]
    known_outs = [v for v, u in zip(eqn.outputs, pe.out_unknowns) if not u]
    known = Eqn(remat_p, known_ins, known_outs + res_vars,
                dict(params, jaxpr=pe.known_traced, prevent_cse=_known_prevent_cse(params, in_unknowns)),
                why="a checkpoint nested in a checkpoint: split by the enclosing checkpoint's policy",
                residual_outputs=len(res_vars))
    staged = _staged_remat(pe, eqn, res_vars, params, body_dce=False)
    return [known], [staged], pe.out_unknowns, pe.staged_outputs, pe.recomputed, {}


def _staged_again(known_eqns: list[Eqn], known_outs: list) -> tuple[list[Eqn], list]:
    """A step of Rule 1 on releases whose staging rules rewrite equations
    (spec/semantics.py: jit_staging_forwards_inputs): remat_partial_eval
    evaluates the known jaxpr with `core.eval_jaxpr` under the enclosing
    trace (jax/_src/ad_checkpoint.py), which stages each hoisted equation
    again through its primitive's staging rule (spec.core.staging_rules).
    Equations inside their sub-programs are not staged again."""
    subst, eqns = {}, []
    for e in known_eqns:
        e = replace(e, inputs=[subst.get(a.id, a) if isinstance(a, Var) else a for a in e.inputs])
        rule = staging_rules.get(e.primitive)
        if rule is not None:
            e, forwarded = rule(e)
            subst.update(forwarded)
        eqns.append(e)
    return eqns, [subst.get(a.id, a) if isinstance(a, Var) else a for a in known_outs]


# The `why` of the reduce_precision equations _round_residuals adds.
ROUNDED = "a residual rounded to its own format (JAX's _insert_reduce_precision)"


# JAX's `_insert_reduce_precision` rounds every np.inexact residual the
# known part reads, complex ones too, and lax.reduce_precision's dtype rule
# refuses complex dtypes: jax 0.10.2 raises this TypeError (JAX's words)
# where a checkpoint saves a complex value that its hoisted part reads. The
# spec leaves such a residual as it is (rounding is the identity on values);
# JAX's error is the oracle's known divergence remat2-rounds-complex-residuals
COMPLEX_RESIDUAL_ERROR = "reduce_precision does not accept dtype {dtype}. Accepted dtypes are subtypes of floating."


def _round_residuals(known_eqns: list[Eqn], known_outs: list, n_known: int) -> tuple[list[Eqn], list]:
    """JAX's `_insert_reduce_precision` (jax/_src/ad_checkpoint.py, from
    0.4.31, jax-ml/jax#22244: against XLA's excess precision), a step of
    Rule 1: every float residual `v` that some hoisted equation reads is
    made `v = reduce_precision(u)` to its own format, `u` the value as
    produced. Its producer now writes `u`; every reader of `v` (hoisted
    equations, known outputs, the staged remat) reads the rounded copy. A
    residual that is a checkpoint input is rounded before the hoisted
    equations read it. A residual already so rounded is left as it is."""
    read = {a.id for e in known_eqns for a in e.inputs if isinstance(a, Var)}
    eqns, outs = list(known_eqns), list(known_outs)
    for v in known_outs[n_known:]:
        if not isinstance(v, Var) or not is_float(v.type.dtype) or v.id not in read:
            continue
        info = ml_dtypes.finfo(v.type.dtype)
        params = dict(exponent_bits=int(info.nexp), mantissa_bits=int(info.nmant))
        if is_complex(v.type.dtype):    # no complex format to round to (COMPLEX_RESIDUAL_ERROR)
            continue
        producer = next((i for i, e in enumerate(eqns) if any(o is v for o in e.outputs)), None)
        if producer is None:              # a checkpoint input: its readers read the rounded copy
            rounded = Var(v.type)
            eqns = [Eqn(reduce_precision_p, [v], [rounded], params, why=ROUNDED)] + [_reading(e, v, rounded) for e in eqns]
            outs = [rounded if a is v else a for a in outs]
            continue
        e = eqns[producer]
        if e.primitive is reduce_precision_p and e.params == params:
            continue
        unrounded = Var(v.type)
        eqns[producer] = replace(e, outputs=[unrounded if o is v else o for o in e.outputs])
        eqns.insert(producer + 1, Eqn(reduce_precision_p, [unrounded], [v], params, why=ROUNDED))
    return eqns, outs


def _reading(e: Eqn, old: Var, new: Var) -> Eqn:
    return replace(e, inputs=[new if a is old else a for a in e.inputs])


def _known_prevent_cse(params, in_unknowns):
    p = params["prevent_cse"]
    return tuple(f for f, u in zip(p, in_unknowns) if not u) if isinstance(p, tuple) else p


def ask_policies(body: Program, unknowns) -> None:
    """Ask the checkpoint policies JAX's JaxprTrace asks when it partially
    evaluates `body` with these inputs `unknowns`, discarding the answers.
    remat_transpose partially evaluates the checkpoint's body so, its
    linear inputs unknown (`pe.partial_eval_jaxpr_nounits` in
    ad_checkpoint._transpose_jaxpr), and so does a scan's linearization to
    its known loop body, its loop-varying inputs unknown
    (_scan_known_hoisting, spec/prims_scan.py). JaxprTrace.process_primitive
    runs a primitive's custom partial-eval rule whether or not its inputs
    are known: a checkpoint's (remat_partial_eval) asks its policy about its
    body's equations, a jit's, scan's, cond's or while's traces its bodies
    in turn (`jaxpr_trace_rules`). The answers change nothing the spec
    models (the values are evaluated inline or staged whatever they are),
    but a policy that raises when asked (save_from_both_policies of an
    offload policy: PolicyCombinationError) raises in the backward pass of
    an enclosing checkpoint, where the forward pass never asked it (found by
    pristine campaigns, b6a0087fd3; 9ca57f4501 in a scan, a jit, a cond)."""
    unknown_ids = {v.id for v, uk in zip(body.inputs, unknowns) if uk}
    for e in body.eqns:
        in_unknowns = [isinstance(a, Var) and a.id in unknown_ids for a in e.inputs]
        if e.primitive in jaxpr_trace_rules:
            jaxpr_trace_rules[e.primitive](e, in_unknowns, ask_policies)
        unknown_ids.update(v.id for v, uk in zip(e.outputs, output_dependence(e, in_unknowns)) if uk)


def _remat_transpose(cts, *args, jaxpr, policy, prevent_cse, differentiated):
    """remat_transpose: a remat of the transposed body, which takes the
    nonzero cotangents only and returns the nonzero cotangents of the
    linear inputs (`transpose_jaxpr(jaxpr, in_linear, out_zeros)`). With
    every cotangent zero it is still bound where the body has an effect
    (backward_pass transposes every linear equation): the effects of the
    body's nonlinear part run again."""
    linear = [is_undefined(a) for a in args]
    ask_policies(jaxpr, linear)
    nonzero_cts = [c for c in cts if not isinstance(c, Zero)]
    with building() as b:
        nonlin_in = [b.new_input(v.type) for v, lin in zip(jaxpr.inputs, linear) if not lin]
        cts_in = [Zero(c.type) if isinstance(c, Zero) else b.new_input(c.type) for c in cts]
        # transpose_jaxpr partially evaluates the body with JaxprTrace
        # (`pe.trace_to_jaxpr_nounits`), then runs backward_pass on the rest
        with by_jaxpr_trace():
            split = split_nonlinear(jaxpr, linear)
        in_cts = transpose_split(split, jaxpr, linear, nonlin_in, cts_in)
        in_nonzero = [not isinstance(c, Zero) for c in in_cts]
        body = b.build(nonlin_in + [c for c in cts_in if not isinstance(c, Zero)],
                       [c for c in in_cts if not isinstance(c, Zero)])
    nonlin = [a for a in args if not is_undefined(a)]
    if isinstance(prevent_cse, tuple):
        prevent_cse = tuple(f for f, lin in zip(prevent_cse, linear) if not lin) + (True,) * len(nonzero_cts)
    outs = iter(bind(remat_p, *nonlin, *nonzero_cts, jaxpr=body, policy=policy,
                     prevent_cse=prevent_cse, differentiated=differentiated))
    in_nonzero = iter(in_nonzero)
    return [(next(outs) if next(in_nonzero) else None) if lin else None for lin in linear]


shape_rules[remat_p] = _remat_shape
eval_rules[remat_p] = _remat_eval
jvp_rules[remat_p] = _remat_jvp
transpose_rules[remat_p] = _remat_transpose
partial_eval_rules[remat_p] = _remat_partial_eval
dce_rules[remat_p] = lambda eqn, used_outputs: dce_body_eqn(eqn, used_outputs, ("prevent_cse",))


def _remat_jaxpr_trace(eqn: Eqn, in_unknowns, ask) -> None:
    """remat_partial_eval: `pe.partial_eval_jaxpr_custom(jaxpr, in_unknowns,
    ..., policy)` asks the checkpoint's policy about each equation of its
    body whose inputs are all known, whether or not the checkpoint reads an
    unknown value; a checkpoint inside is split with this policy
    (call_partial_eval_custom_rule), its own unasked."""
    partial_eval(eqn.params["jaxpr"], in_unknowns, saveable=policy_saveable(eqn.params["policy"]))


jaxpr_trace_rules[remat_p] = _remat_jaxpr_trace
source_rules[remat_p] = lambda eqn, var: Source("output", primitive="remat2")  # JAX's primitive name
inlined_when_known.add(remat_p)     # remat_partial_eval evaluates a known checkpoint's body inline


# ==========================================================================
# batching

def _remat_batch(args, dims, *, jaxpr, policy, prevent_cse, differentiated):
    """remat_vmap: batch the body (inputs keep their batch axes, batched
    outputs move to axis 0); policy and prevent_cse are kept."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    body, out_dims = vmap_program(jaxpr, dims, "zero_if_mapped", size)
    outs = bind(remat_p, *args, jaxpr=body, policy=policy, prevent_cse=prevent_cse,
                differentiated=differentiated)
    return outs, out_dims


def _register_batch_rules():
    batch_rules[remat_p] = _remat_batch
    batch_rules[name_p] = vectorized_batcher(name_p)


_register_batch_rules()


# a checkpoint's rules are its body's, a name's the identity: complex values pass through them
complex_rules.update({remat_p, name_p})
