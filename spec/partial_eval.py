"""Partial evaluation: split a program into a *known* part, run now, and a
*staged* part, run later, connected by residuals.

Given which inputs are unknown, each equation is classified in program
order, as JAX's `partial_eval_jaxpr_custom` does:

* all inputs known  -> the equation is *known*. The policy (`saveable`) is
  asked whether its outputs may be saved. If yes they stay in the known
  program only; if not, the equation is *also copied into the staged
  program* (recomputed there) and its own inputs are what the staged program
  needs instead.
* some input unknown -> the equation is *staged*; its outputs are unknown.

Then the staged program is dead-code eliminated, and the **residuals** are
exactly the known values the live staged equations still read: its free
variables. Each residual has a provenance (`Source`): an argument of the
program, the output of a primitive (or a name, or a call), a literal or a
constant. Without a policy everything is saveable; remat (spec/remat.py)
passes its checkpoint policy.

Two flavours (the `linearize` flag): JAX's trace-based linearization,
used by `jax.vjp` outside any checkpoint, and the jaxpr-to-jaxpr
`partial_eval_jaxpr_custom`, used inside a checkpoint. The first turns a
scalar literal read by a tangent equation into a residual ("from a
literal") and splits each checkpoint it meets by that checkpoint's own
policy; the second keeps literals inline and splits nested checkpoints by
the policy of the enclosing one (see spec/remat.py).
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from spec.core import dce_rules, has_effects, keeps_constants_closed, partial_eval_rules
from spec.ir import ArrayType, Eqn, Literal, Program, Var, subprograms
from spec.core import Zero, current_builder
from spec.policies import Offload, Recompute, Saveable
import numpy as np
from spec.semantics import semantics
from spec.tangent_lifetimes import capture_order, holds_of


# --------------------------------------------------------------------------
# residual provenance

@dataclass(frozen=True)
class Source:
    """Where a residual comes from, in the terms `jax.ad_checkpoint.saved_residuals` uses.

    kind is one of 'argument', 'output', 'named', 'literal', 'constant';
    `index`/`name` identify an argument, `primitive` the producing equation
    (`name` also holds a checkpoint_name or a called function's name)."""
    kind: str
    index: int | None = None
    name: str | None = None
    primitive: str | None = None

    def __str__(self):
        if self.kind == "argument":
            return (f"from the argument {self.name}" if self.name
                    else f"from the argument at flattened index {self.index}")
        if self.kind == "literal":
            return "from a literal"
        if self.kind == "constant":
            return "from a constant"
        if self.kind == "named":
            return f"named '{self.name}'"
        if self.primitive == "call":
            return f"output of jitted function '{self.name}'"
        return f"output of {self.primitive}"


@dataclass(frozen=True)
class Residual:
    """A value saved by the forward pass for the backward pass."""
    type: ArrayType
    source: Source
    var: Any = field(default=None, compare=False, repr=False)     # its Var in known/staged
    value: Any = field(default=None, compare=False, repr=False)   # filled in by spec.vjp

    def __str__(self):
        return f"{self.type} {self.source}"


def source_of(atom, known: Program, look_through: bool = True) -> Source:
    """The provenance of a known value, found in the known program (through
    a `looked_through` equation to its operand's)."""
    if isinstance(atom, Literal):
        return Source("literal") if atom.is_scalar else Source("constant")
    for i, v in enumerate(known.inputs):
        if v is atom:
            name = known.input_names[i] if known.input_names else None
            return Source("argument", index=i, name=name)
    for e in known.eqns:
        if any(v is atom for v in e.outputs):
            if e.primitive in looked_through and look_through:
                return source_of(e.inputs[0], known, look_through=False)
            return eqn_source(e, atom)
    raise ValueError(f"{atom!r} is not defined in the known program")


source_rules: dict = {}   # primitive -> fn(eqn, var) -> Source, for name/call/remat

# Primitives saved_residuals does not count as a residual's producer: it
# names the producer of their operand instead, one level deep (`subst` in
# jax/_src/ad_checkpoint.py:_saved_residuals, jax 0.10.2: reduce_precision).
looked_through: set = set()


def looked_through_value(atom, producers: dict):
    """The value saved_residuals names for `atom` (`producers`: var id ->
    its equation): the operand of a `looked_through` equation writing it,
    else `atom` itself."""
    e = producers.get(atom.id) if isinstance(atom, Var) else None
    return e.inputs[0] if e is not None and e.primitive in looked_through else atom

# Primitives whose equation, its inputs all known, a JaxprTrace evaluates
# inline, binding its body's equations in the enclosing trace (remat:
# remat_partial_eval's `core.eval_jaxpr(jaxpr_known, ...)`, jax/_src/
# ad_checkpoint.py). A scan's loop-invariant residuals are computed so
# (_scan_partial_eval evaluates the known body with its consts known), and
# named by what computes them inside.
inlined_when_known: set = set()


def clone_into(prog: Program, args) -> tuple[list[Eqn], list]:
    """`prog`'s equations with fresh outputs, reading `args` for its inputs;
    returns (equations, output atoms)."""
    env = {v.id: a for v, a in zip(prog.inputs, args)}
    read = lambda a: env.get(a.id, a) if isinstance(a, Var) else a  # noqa: E731
    eqns = []
    for e in prog.eqns:
        outs = [Var(v.type) for v in e.outputs]
        eqns.append(Eqn(e.primitive, [read(a) for a in e.inputs], outs, e.params, why=e.why))
        env.update({v.id: n for v, n in zip(e.outputs, outs)})
    return eqns, [read(a) for a in prog.outputs]


def inline_known(prog: Program) -> Program:
    """`prog` with each equation of a primitive in `inlined_when_known`
    replaced by its body's equations (theirs inlined too); `prog` itself
    where the spec follows releases before stackless tracing
    (spec.semantics: partial_eval_inlines_known_checkpoints)."""
    if not semantics().partial_eval_inlines_known_checkpoints:
        return prog
    env: dict = {}
    read = lambda a: env.get(a.id, a) if isinstance(a, Var) else a  # noqa: E731
    eqns = []
    for e in prog.eqns:
        ins = [read(a) for a in e.inputs]
        if e.primitive not in inlined_when_known:
            eqns.append(Eqn(e.primitive, ins, e.outputs, e.params, why=e.why, residual_outputs=e.residual_outputs))
            continue
        (_, body), = subprograms(e.params)
        body_eqns, outs = clone_into(inline_known(body), ins)
        eqns += body_eqns
        env.update({v.id: o for v, o in zip(e.outputs, outs)})
    return Program(prog.inputs, eqns, [read(a) for a in prog.outputs], input_names=prog.input_names)


# Primitives whose staged equation JAX's linearization builds with a
# JaxprTrace (the fallback `linearize_from_jvp` of a primitive with a custom
# partial-eval rule: `while`): a known scalar literal operand stays inline
# there, so it is never a residual ("from a literal").
literal_operands_inline: set = set()

# The `why` of an equation that makes a zero tangent on the tangent side
# (as JAX instantiates zeros inside a tangent function, e.g. scan's or a
# cond branch's): when linearizing it is staged, whatever it reads, and its
# literal operands stay inline.
TANGENT_ZERO = "a zero tangent made in the linear part"


def instantiate_tangent(t):
    """A symbolic zero tangent made an array on the tangent side (its
    equation, also for a scalar, marked TANGENT_ZERO); any other tangent as
    it is."""
    from spec.prims_structural import broadcast_in_dim  # a cycle: through prims_elementwise's rules
    if not isinstance(t, Zero):
        return t
    builder = current_builder()
    start = len(builder.eqns)
    zeros = broadcast_in_dim(np.zeros((), t.type.dtype), t.type.shape, ())
    for e in builder.eqns[start:]:
        e.why = TANGENT_ZERO
    return zeros


def eqn_source(e: Eqn, var) -> Source:
    rule = source_rules.get(e.primitive)
    return rule(e, var) if rule else Source("output", primitive=e.primitive.name)


# --------------------------------------------------------------------------
# the split

def everything_saveable(eqn: Eqn):
    """Without remat, every known value may be saved."""
    return Saveable


@dataclass
class PartialEval:
    """known:  known inputs -> known outputs + residuals
    staged: residuals + staged inputs -> unknown outputs, where the staged
            inputs are the unknown inputs and the known ones marked `in_inst`"""
    known: Program
    staged: Program
    residuals: list[Residual]
    out_unknowns: list[bool]
    staged_inputs: list[bool]                               # which inputs `staged` takes
    recomputed: list[Eqn] = field(default_factory=list)     # known eqns copied into staged
    decisions: dict = field(default_factory=dict)           # id(eqn) -> policy answer
    staged_outputs: list[bool] = field(default_factory=list)  # which outputs `staged` returns
    known_traced: Program | None = None                     # `known` before its dead code is removed

    def __iter__(self):   # (known, staged, residuals)
        return iter((self.known, self.staged, self.residuals))


@dataclass
class _Split:
    """A split in progress, equation by equation: the values that are
    unknown (computed by the staged program), those the staged program has
    (`inst`: unknown, or known and recomputed or copied there), and the
    equations of each side."""
    unknown: set[int]
    inst: set[int]
    known_eqns: list[Eqn] = field(default_factory=list)
    staged_eqns: list[Eqn] = field(default_factory=list)
    recomputed: list[Eqn] = field(default_factory=list)
    decisions: dict[int, Any] = field(default_factory=dict)   # id(eqn) -> policy answer
    subst: dict[int, Any] = field(default_factory=dict)   # vars a rule replaced (hoisted checkpoint outputs)
    uses: list = field(default_factory=list)   # atoms in the order the split first needs them
    readers: list = field(default_factory=list)   # for each use: (equation index, the staged equation reading it)
    staged_at: list = field(default_factory=list)   # for each staged equation: its equation's index
    at: int = 0     # the index of the equation being classified

    def is_unknown(self, a) -> bool:
        return isinstance(a, Var) and a.id in self.unknown

    def is_inst(self, a) -> bool:
        return not isinstance(a, Var) or a.id in self.inst

    def substituted(self, atoms) -> list:
        return [self.subst.get(a.id, a) if isinstance(a, Var) else a for a in atoms]

    def reading_substitutes(self, e: Eqn) -> Eqn:
        if self.subst and any(isinstance(a, Var) and a.id in self.subst for a in e.inputs):
            return replace(e, inputs=self.substituted(e.inputs))
        return e

    def classify(self, eqns: list[Eqn], saveable, linearize: bool):
        """Each equation in program order: staged if an input is unknown,
        split by its primitive's rule if it has one, known otherwise."""
        for self.at, e in enumerate(eqns):
            e = self.reading_substitutes(e)
            in_unknowns = [self.is_unknown(a) for a in e.inputs]
            rule = partial_eval_rules.get(e.primitive)
            if linearize and e.why == TANGENT_ZERO:     # made on the tangent side: staged
                self.stage(e)
            elif rule is not None and (any(in_unknowns) or not linearize):
                # (a trace-based evaluator binds an all-known equation as it is)
                self.split_by_rule(e, rule, saveable, linearize)
            elif any(in_unknowns):
                self.stage(e)
            else:
                self.keep_known(e, saveable(e))

    def stage(self, e: Eqn):
        """`e` runs in the staged program; its outputs are unknown."""
        self.staged_eqns.append(e)
        self.staged_at.append(self.at)
        self.read(e.inputs, e)
        self.unknown.update(v.id for v in e.outputs)
        self.inst.update(v.id for v in e.outputs)

    def split_by_rule(self, e: Eqn, rule, saveable, linearize: bool):
        """`e` split by its primitive's partial-eval rule, which returns the
        known and staged equations, which outputs are unknown and which
        the staged program has, the equations recomputed inside a staged
        body, and the outputs it replaced by other atoms."""
        if not linearize:   # the rule's `new_inst` come first
            self.read([a for a in e.inputs if isinstance(a, Var) and not self.is_inst(a)], None)
        known_es, staged_es, out_unknowns, out_inst, recomputed, subst = rule(
            e, [self.is_unknown(a) for a in e.inputs], [self.is_inst(a) for a in e.inputs],
            saveable=saveable, linearize=linearize)
        for s_e in staged_es:
            self.read(s_e.inputs, s_e)
        self.known_eqns += known_es
        self.staged_eqns += staged_es
        self.staged_at += [self.at] * len(staged_es)
        self.recomputed += recomputed
        self.subst.update(subst)
        self.unknown.update(v.id for v, u in zip(e.outputs, out_unknowns) if u)
        self.inst.update(v.id for v, i in zip(e.outputs, out_inst) if i)

    def read(self, atoms, reader):
        """The staged equation `reader` (None: the rule's own) reads `atoms`."""
        self.uses += atoms
        self.readers += [(self.at, reader)] * len(atoms)

    def staged_outputs(self, outputs: list, instantiate: list, linearize: bool,
                       stage_recomputed_outputs: bool) -> list[bool]:
        """Which of the (substituted) program `outputs` the staged program
        returns: the unknown and the instantiated ones, and with
        `stage_recomputed_outputs` those it has anyway. A literal output
        is available to the staged program as it is, except to trace-based
        linearization, which makes it a residual like any constant it meets
        (pjit's linearize rule saves a jit's literal outputs)."""
        out_inst = [self.is_inst(a) and (isinstance(a, Var) or not linearize) for a in outputs]
        return [self.is_unknown(a) or i or (stage_recomputed_outputs and r)
                for a, i, r in zip(outputs, instantiate, out_inst)]

    def keep_known(self, e: Eqn, answer):
        """An all-known `e`, with the policy's `answer` for it: Saveable
        (its outputs stay known, and may be saved), Recompute (copied into
        the staged program too) or Offload (its outputs saved as copies in
        memory `dst`, and copied back)."""
        self.known_eqns.append(e)
        self.decisions[id(e)] = answer
        if answer is Recompute:
            self.staged_eqns.append(e)
            self.staged_at.append(self.at)
            self.read(e.inputs, e)
            self.recomputed.append(e)
            self.inst.update(v.id for v in e.outputs)
        elif isinstance(answer, Offload):
            # one copy of all its outputs each way, as partial_eval_jaxpr_custom
            # binds them (`offload_eqn`, `reload_eqn`): DCE keeps the copy back
            # whole where one output is read, so every output is saved (jax's
            # memories_test test_primitive_with_multiple_outputs: top_k's two)
            from spec.remat import device_put_eqn  # a cycle: remat partially evaluates with this module
            hosts = [Var(v.type.with_memory_space(answer.dst)) for v in e.outputs]
            out_copy = device_put_eqn(e.outputs, hosts, answer.dst)
            self.decisions[id(out_copy)] = answer      # explain: why the copy is saved
            self.known_eqns.append(out_copy)
            reload = device_put_eqn(hosts, e.outputs, answer.src)
            self.staged_eqns.append(reload)
            self.staged_at.append(self.at)
            self.read(hosts, reload)
            self.inst.update(v.id for v in e.outputs)


# remat_transpose splits a checkpoint's body with JaxprTrace
# (ad_checkpoint.transpose_jaxpr: `pe.trace_to_jaxpr_nounits`), not with a
# linearization's rules: there a jit is split by `_pjit_partial_eval`
# (jax/_src/pjit.py), whose `pe.partial_eval_jaxpr_nounits_fwd` forwards a
# residual that is a known input but returns one of the jit's own constants
# from the known jit; pjit's linearize rule forwards those constants
# (spec/prims_call.py `_Forwarding`).
_JAXPR_TRACE_SPLIT = contextvars.ContextVar("jaxpr_trace_split", default=False)


def splitting_by_jaxpr_trace() -> bool:
    """Whether the split under way is JaxprTrace's (`by_jaxpr_trace`)."""
    return _JAXPR_TRACE_SPLIT.get()


@contextlib.contextmanager
def by_jaxpr_trace():
    """Split as `pe.trace_to_jaxpr_nounits` does (remat_transpose)."""
    token = _JAXPR_TRACE_SPLIT.set(True)
    try:
        yield
    finally:
        _JAXPR_TRACE_SPLIT.reset(token)


def partial_eval(prog: Program, unknowns: Sequence[bool], *,
                 instantiate: bool | Sequence[bool] = False,
                 saveable: Callable[[Eqn], Any] = everything_saveable,
                 linearize: bool = False,
                 literals_are_residuals: bool | None = None,
                 constants_are_residuals: bool = True,
                 in_inst: Sequence[bool] | None = None,
                 stage_recomputed_outputs: bool = False,
                 order: str = "production",
                 dce_staged: bool = True,
                 literal_outputs_are_residuals: bool = False) -> PartialEval:
    """Split `prog` given which inputs are `unknowns`.

    * `instantiate[i]` forces output i to be computed by the staged program
      (a known value there becomes a residual forwarded to the output).
    * `saveable(eqn)` is the policy for all-known equations: Saveable,
      Recompute (copy the equation into the staged program) or Offload.
    * `linearize`: JAX's trace-based linearization (what `jax.vjp` and
      `jax.linearize` use outside any checkpoint) rather than the jaxpr-level
      `partial_eval_jaxpr_custom` (used inside a checkpoint). They differ in
      two ways: literals read by staged equations become residuals, and a
      checkpoint met on the way is split by its own policy.
    * `in_inst[i]`: known input i is also an input of the staged program
      (so reading it there does not make it a residual).
    * `literals_are_residuals`, `constants_are_residuals`,
      `literal_outputs_are_residuals`: which constants become residuals
      (`free_atoms`).
    * `stage_recomputed_outputs`: known outputs that the staged program
      recomputes anyway are outputs of the staged program too (as
      `partial_eval_jaxpr_custom` does for a call or checkpoint nested in a
      checkpoint), so that nothing needs to save them.
    * `dce_staged=False` keeps the staged program's dead equations, and
      the residuals they read (as a cond's branches need).
    * `order` of the residuals: "production" (`residual_order`) or
      "first_use" (`first_use_order`)."""
    if literals_are_residuals is None:
        literals_are_residuals = linearize
    unknowns = list(unknowns)
    if len(unknowns) != len(prog.inputs):
        raise ValueError(f"unknowns has {len(unknowns)} entries for {len(prog.inputs)} inputs")
    in_inst = [False] * len(unknowns) if in_inst is None else list(in_inst)
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * len(prog.outputs)
    split = _Split(unknown={v.id for v, u in zip(prog.inputs, unknowns) if u},
                   inst={v.id for v, u, i in zip(prog.inputs, unknowns, in_inst) if u or i})
    split.classify(prog.eqns, saveable, linearize)
    outputs = split.substituted(prog.outputs)
    out_unknowns = [split.is_unknown(a) for a in outputs]
    staged_out_mask = split.staged_outputs(outputs, instantiate, linearize, stage_recomputed_outputs)
    staged_outs = [a for a, m in zip(outputs, staged_out_mask) if m]
    staged_inputs = [u or i for u, i in zip(unknowns, in_inst)]
    staged_ins = [v for v, m in zip(prog.inputs, staged_inputs) if m]
    # dead code in the staged program reads nothing: drop it before counting
    staged_eqns = dce_eqns(split.staged_eqns, staged_outs) if dce_staged else split.staged_eqns
    recomputed = still_staged(split.recomputed, staged_eqns)

    free, lit_subst = free_atoms(staged_ins, staged_eqns, staged_outs, literals_are_residuals,
                                 constants_are_residuals, literal_outputs_are_residuals)
    outs_read = list(staged_outs)   # ensure_out_inst: the outputs read last, before any literal is replaced
    staged_eqns, staged_outs = read_constants_through(lit_subst, staged_eqns, staged_outs)

    known_outs = [a for a, u in zip(outputs, out_unknowns) if not u]
    known_ins = [v for v, u in zip(prog.inputs, unknowns) if not u]
    names = [n for n, u in zip(prog.input_names, unknowns) if not u] if prog.input_names else None
    known_all = Program(known_ins, split.known_eqns, known_outs + list(free.values()), input_names=names)
    residuals = [Residual(a.type, source_of(a, known_all),
                          var=lit_subst[constant_key(a)] if isinstance(a, Literal) else a)
                 for a in free.values()]
    order = (_first_use_permutation(prog, split, outs_read, list(free), linearize) if order == "first_use"
             else residual_order(residuals, known_all, list(free.values())))
    residuals, res_atoms = [residuals[i] for i in order], [list(free.values())[i] for i in order]

    known = Program(known_ins, dce_eqns(split.known_eqns, known_outs + res_atoms),
                    known_outs + res_atoms, input_names=names)
    staged = Program([r.var for r in residuals] + staged_ins, staged_eqns, staged_outs)
    traced = Program(known_ins, split.known_eqns, known_outs + res_atoms, input_names=names)
    return PartialEval(known, staged, residuals, out_unknowns, staged_inputs, recomputed, split.decisions,
                       staged_outputs=staged_out_mask, known_traced=traced)


def free_atoms(staged_ins, staged_eqns, staged_outs, literals_are_residuals: bool,
               constants_are_residuals: bool, literal_outputs_are_residuals: bool) -> tuple[dict, dict]:
    """The residuals: the free variables of the staged program (keyed
    ("var", id) -> the known Var), and the constants it reads that become
    residuals too (keyed ("lit", constant_key) -> the Literal), in order of
    first use; and for each such constant the residual Var standing for it.

    * `literals_are_residuals` (partial_eval's default: `linearize`): a
      scalar literal read by a staged equation is a residual. False inside
      the body of a `call`: JAX linearizes a jit's body as a jaxpr, so its
      literals stay inline there. Literal operands of primitives in
      `literal_operands_inline`, and of equations made on the tangent side,
      stay inline always, unless `traced` (a value JAX computes).
    * `constants_are_residuals=False`: a non-scalar constant read by a staged
      equation stays inline too (a jit's constants are closed over by both
      halves of a jaxpr-level split: closed_call_partial_eval_custom_rule
      gives `jaxpr.consts` to the known and the staged jaxpr alike).
    * `literal_outputs_are_residuals`: a literal the staged program returns
      is a residual (ad.linearize_jaxpr saves a constant tangent)."""
    defined = {v.id for v in staged_ins} | {v.id for e in staged_eqns for v in e.outputs}
    free: dict[tuple, Any] = {}          # key -> known atom, in order of first use
    lit_subst: dict[int, Var] = {}       # constant_key -> the residual var standing for it

    def need(a):
        if isinstance(a, Var):
            if a.id not in defined:
                free.setdefault(("var", a.id), a)
        elif literals_are_residuals if a.is_scalar else constants_are_residuals:
            if constant_key(a) not in lit_subst:
                lit_subst[constant_key(a)] = Var(a.type)
                free[("lit", constant_key(a))] = a
    for e in staged_eqns:
        inline = e.primitive in literal_operands_inline or e.why == TANGENT_ZERO
        for a in e.inputs:
            if not (inline and isinstance(a, Literal) and a.is_scalar and not a.traced):
                need(a)
    for a in staged_outs:
        if literal_outputs_are_residuals and isinstance(a, Literal) and constant_key(a) not in lit_subst:
            lit_subst[constant_key(a)] = Var(a.type)      # an output the staged half takes from the known one
            free[("lit", constant_key(a))] = a
        need(a)
    return free, lit_subst


def read_constants_through(lit_subst: dict, staged_eqns: list[Eqn], staged_outs: list) -> tuple[list, list]:
    """The staged equations and outputs reading each constant that became a
    residual through the residual Var standing for it."""
    if not lit_subst:
        return staged_eqns, staged_outs
    sub = lambda a: lit_subst.get(constant_key(a), a) if isinstance(a, Literal) else a
    staged_eqns = [replace(e, inputs=[sub(a) for a in e.inputs]) if any(
        isinstance(a, Literal) and constant_key(a) in lit_subst for a in e.inputs) else e
        for e in staged_eqns]
    return staged_eqns, [sub(a) for a in staged_outs]


def _first_use_permutation(prog: Program, split: _Split, outs_read: list, keys: list, linearize: bool) -> list[int]:
    """The residuals (`keys`) in the order the split first needs them
    (`first_use_order`), or, linearizing a JVP program that records its
    tangents' lifetimes (a jit's linearization: its tangent trace drops a
    constant whose readers all died and makes it again), in the order they
    were last made (spec.tangent_lifetimes.capture_order)."""
    holds = holds_of(prog) if linearize else None
    if holds is None:
        return first_use_order(split.uses + outs_read, keys)
    return capture_order(split.uses, split.readers, split.staged_eqns, split.staged_at, outs_read,
                         keys, _use_key, holds)


def _use_key(a) -> tuple:
    """A residual's key in `free_atoms`: a Var by id, a constant by constant_key."""
    return ("var", a.id) if isinstance(a, Var) else ("lit", constant_key(a))


def first_use_order(uses: list, keys: list) -> list[int]:
    """The residuals (keyed as `free_atoms` keys them) in the order in which
    the split first needs them. That is the order of the known half's
    residual outputs wherever that half stays one equation (a jit, a nested
    checkpoint, a scan's known loop, a cond): with `linearize`, the order in
    which the tangent trace of ad.linearize_jaxpr makes known values its
    constants (operand order of the staged equations, dead ones included;
    where the JVP program records its tangents' lifetimes, a constant whose
    readers all died is made again: spec.tangent_lifetimes.capture_order);
    without, the insertion order of the `residuals` OrderedSet of
    partial_eval_jaxpr_custom (jax/_src/interpreters/partial_eval.py,
    _partial_eval_jaxpr_custom_cached): equation by equation, a staged or
    recomputed equation adds its not-instantiated operands in operand
    order, a rule adds what it returns (`new_inst`, the equation's
    not-instantiated operands, then its own residuals, as
    call_partial_eval_custom_rule and the scan/cond rules do), and at the
    end `ensure_out_inst` adds the outputs not yet instantiated."""
    first = {}
    for k, a in enumerate(uses):
        first.setdefault(_use_key(a), k)
    return sorted(range(len(keys)), key=lambda i: first.get(keys[i], len(first)))


def still_staged(recomputed: list[Eqn], staged_eqns: list[Eqn]) -> list[Eqn]:
    """The recomputed equations that the staged program still runs, at any
    depth: a rule (a call, a scan, a nested checkpoint) reports the
    equations it recomputes inside its staged body, which stay recomputed
    while that staged equation survives DCE (a call nested in a call whose
    inputs are all known is recomputed whole, from its inputs)."""
    alive: set[int] = set()

    def walk(eqns):
        for e in eqns:
            alive.add(id(e))
            for _, sub in subprograms(e.params):
                walk(sub.eqns)
    walk(staged_eqns)
    return [e for e in recomputed if id(e) in alive]


def constant_key(a: Literal) -> int:
    """Which constant a Literal is: a non-scalar constant is its array
    (JAX makes one constvar of one array object, however often it is read:
    the spec's rules re-wrap the same array in new Literals), a scalar
    literal each occurrence."""
    return id(a) if a.is_scalar else id(a.value)


_KIND_ORDER = {"literal": 0, "constant": 1, "argument": 2}


def residual_order(residuals: list[Residual], known: Program, atoms: list) -> list[int]:
    """JAX's `saved_residuals` order: literals, constants (in the order the
    trace first captures them: `jaxpr.constvars`, the known program's first
    reader first; found by a pristine nightly, 85523c4c91), arguments (in
    argument order), then equation outputs in the known program's order; a
    `looked_through` residual where the value it names is. `atoms`: what
    each residual saves, in the known program."""
    position = {}
    for i, v in enumerate(known.inputs):
        position[v.id] = (2, i, 0)
    for j, e in enumerate(known.eqns):
        for k, v in enumerate(e.outputs):
            position[v.id] = (3, j, k)
    producers = {v.id: e for e in known.eqns for v in e.outputs}
    captured = _constants_first_read(known)

    def key(i):
        r = residuals[i]
        named = looked_through_value(r.var, producers)
        if isinstance(named, Var) and named.id in position:
            return position[named.id]
        if r.source.kind == "constant" and isinstance(atoms[i], Literal):
            return (_KIND_ORDER["constant"], captured.get(constant_key(atoms[i]), len(known.eqns)), i)
        return (_KIND_ORDER.get(r.source.kind, 3), i, 0)
    return sorted(range(len(residuals)), key=key)


def _constants_first_read(prog: Program) -> dict:
    """constant_key -> the index of the first equation of `prog` reading that
    non-scalar constant (in a sub-program too, one whose constants JAX hoists
    into operands: not a jit's, `keeps_constants_closed`; a jit's constant
    that is a residual the trace meets when the residuals are returned, after
    those an equation reads: found by a pristine nightly, 80d5663daa)."""
    first: dict = {}

    def visit(p: Program, j: int | None):
        for k, e in enumerate(p.eqns):
            at = k if j is None else j
            for a in e.inputs:
                if isinstance(a, Literal) and not a.is_scalar:
                    first.setdefault(constant_key(a), at)
            if e.primitive in keeps_constants_closed:
                continue
            for _, sub in subprograms(e.params):
                visit(sub, at)
    visit(prog, None)
    return first


# --------------------------------------------------------------------------
# dead-code elimination

def dce_eqns(eqns: list[Eqn], outputs) -> list[Eqn]:
    """Keep the equations whose outputs are (transitively) needed, and those
    with an effect (JAX's dce_jaxpr: `not any(used_outs) and not has_effects(eqn)`)."""
    live = {a.id for a in outputs if isinstance(a, Var)}
    kept = []
    for e in reversed(eqns):
        used = [v.id in live for v in e.outputs]
        if not any(used) and not has_effects(e):
            continue
        rule = dce_rules.get(e.primitive)
        new_e, used_inputs = rule(e, used) if rule is not None else (e, [True] * len(e.inputs))
        kept.append(new_e)
        live.update(a.id for a, u in zip(e.inputs, used_inputs) if u and isinstance(a, Var))
    return kept[::-1]


def dce(prog: Program, used_outputs: Sequence[bool] | None = None,
        prune_inputs: bool = False) -> tuple[Program, list[bool]]:
    """Remove dead equations (and unused outputs); returns the program and
    which inputs it still reads. Inputs are kept, so the signature is
    stable, unless `prune_inputs`."""
    outs = prog.outputs if used_outputs is None else [a for a, u in zip(prog.outputs, used_outputs) if u]
    eqns = dce_eqns(prog.eqns, outs)
    read = {a.id for e in eqns for a in e.inputs if isinstance(a, Var)} | {
        a.id for a in outs if isinstance(a, Var)}
    used_inputs = [v.id in read for v in prog.inputs]
    inputs = [v for v, u in zip(prog.inputs, used_inputs) if u] if prune_inputs else prog.inputs
    names = prog.input_names
    if prune_inputs and names:
        names = tuple(n for n, u in zip(names, used_inputs) if u)
    return Program(inputs, eqns, outs, input_names=names), used_inputs


def dce_body_eqn(eqn: Eqn, used_outputs: Sequence[bool], per_input_params=()) -> tuple[Eqn, list[bool]]:
    """The DCE rule of a primitive that applies its `jaxpr` param to its
    inputs (call, remat): prune the body's dead code, unused outputs and
    unread inputs; params in `per_input_params` hold one entry per input
    when they are tuples, and are pruned alike."""
    body, used_inputs = dce(eqn.params["jaxpr"], used_outputs, prune_inputs=True)
    params = dict(eqn.params, jaxpr=body)
    for name in per_input_params:
        if isinstance(params[name], tuple):
            params[name] = tuple(f for f, u in zip(params[name], used_inputs) if u)
    n_res = eqn.residual_outputs
    kept_res = sum(used_outputs[len(used_outputs) - n_res:]) if n_res else 0
    return (Eqn(eqn.primitive, [a for a, u in zip(eqn.inputs, used_inputs) if u],
                [v for v, u in zip(eqn.outputs, used_outputs) if u], params, why=eqn.why,
                residual_outputs=kept_res),
            used_inputs)
