"""Forward-mode AD: `jvp(prog)` is a program of (primals, tangents).

Tangents are either traced values or symbolic zeros (`Zero`). An equation
whose inputs all have zero tangents is copied as it is and creates no
tangent equations; otherwise its primitive's JVP rule (spec/core.py's
`jvp_rules`) emits both the primal and the tangent computation. Integer and
bool values never carry tangents.
"""
from __future__ import annotations

import contextvars

from spec.core import (Tracer, Zero, bind, building, instantiate,
                       is_differentiable, jvp_rules)
from spec.ir import Program, Var
from spec.partial_eval import partial_eval
from spec.core import current_builder
from spec.ir import subprograms
from spec.tangent_lifetimes import TangentHolds, last_readers


class JVPError(TypeError):
    pass


def jvp_traced(prog: Program, primals, tangents, known_tangents_are_zero=False):
    """Emit the JVP of `prog` into the current trace. `tangents` holds
    Tracers or Zeros; returns (primal outs, tangent outs).

    With `known_tangents_are_zero` (what linearization does, as JAX's
    `linearize_from_jvp`), a tangent a rule computes without reading any
    input tangent, such as integer_pow's zeros for y == 0, is a symbolic
    zero: it is never a residual and creates no tangent equations."""
    token = _LINEARIZING.set(known_tangents_are_zero)
    try:
        return _jvp_traced(prog, primals, tangents, known_tangents_are_zero)
    finally:
        _LINEARIZING.reset(token)


# Whether the JVP being emitted is part of a linearization (so that a call's
# JVP rule linearizes its body the same way, as pjit's linearize rule does;
# a checkpoint's JVP rule does not: remat_jvp uses plain jvp_jaxpr).
_LINEARIZING = contextvars.ContextVar("linearizing", default=False)


def linearizing() -> bool:
    return _LINEARIZING.get()


# ad.linearize_from_jvp's error, word for word: a JVP rule whose primal
# outputs depend on tangents (the generic reduce_window's) has no linearization
LINEARIZATION_ERROR = ("Linearization failed to produce known values for all output primals. "
                       "This is typically caused by attempting to differentiate a function "
                       "uses an operation that does not support reverse-mode autodiff.")


def _jvp_traced(prog: Program, primals, tangents, known_tangents_are_zero):
    primal_env, tangent_env = {}, {}
    builder = current_builder()
    first = len(builder.eqns)
    depends: set[int] = {t.atom.id for t in tangents if isinstance(t, Tracer) and isinstance(t.atom, Var)}

    def read_p(a):
        return primal_env[a.id] if isinstance(a, Var) else a.value

    def read_t(a):
        return tangent_env[a.id] if isinstance(a, Var) else Zero(a.type)

    for v, p, t in zip(prog.inputs, primals, tangents):
        primal_env[v.id] = p
        tangent_env[v.id] = t if is_differentiable(v.type) else Zero(v.type)
    lifetimes = _Lifetimes(builder, prog, tangent_env)
    for e in prog.eqns:
        lifetimes.step_begins()
        ps = [read_p(a) for a in e.inputs]
        ts = [read_t(a) for a in e.inputs]
        if all(isinstance(t, Zero) for t in ts):
            outs = bind(e.primitive, *ps, **e.params)
            outs = outs if e.primitive.multiple_results else [outs]
            out_ts = [None] * len(outs)
        else:
            rule = jvp_rules.get(e.primitive)
            if rule is None:
                raise JVPError(f"primitive {e.primitive.name!r} has no JVP rule")
            start = len(builder.eqns)
            try:
                outs, out_ts = rule(ps, ts, **e.params)
            except ValueError as err:
                if not (known_tangents_are_zero and str(err) == LINEARIZATION_ERROR):
                    raise
                # raised linearizing a sub-program (a cond branch): JAX has
                # linearized this program's equations before it, and what
                # partially evaluating them raises comes first (found by a
                # pristine campaign, 2a521d8404: a while body's policy)
                _partially_evaluated(builder.eqns[first:start], depends)
                raise
            if not e.primitive.multiple_results:
                outs, out_ts = [outs], [out_ts]
            if known_tangents_are_zero and e.primitive in jaxpr_linearized:
                # linearized as a jaxpr (ad.linearize_jaxpr): every tangent the
                # rule returns is a tangent, a constant one included
                depends.update(t.atom.id for t in out_ts if isinstance(t, Tracer) and isinstance(t.atom, Var))
            elif known_tangents_are_zero:
                for new in builder.eqns[start:]:
                    flags = [isinstance(a, Var) and a.id in depends for a in new.inputs]
                    outs_dep = output_dependence(new, flags)
                    depends.update(v.id for v, d in zip(new.outputs, outs_dep) if d)
                _primal_outputs_known(outs, builder.eqns[first:], depends)
                out_ts = [t if isinstance(t, Tracer) and isinstance(t.atom, Var) and t.atom.id in depends
                          else None for t in out_ts]
        for v, o, t in zip(e.outputs, outs, out_ts):
            primal_env[v.id] = o
            tangent_env[v.id] = (Zero(v.type) if t is None or not is_differentiable(v.type) else t)
        lifetimes.step_ends(e)
    return [read_p(a) for a in prog.outputs], [read_t(a) for a in prog.outputs]


class _Lifetimes:
    """Records on `builder` how long JAX's linearization holds each tangent
    (spec.tangent_lifetimes): eval_jaxpr's env drops a value, its tangent
    with it, once its last reader has run; a JVP rule's equations end
    together."""

    def __init__(self, builder, prog: Program, tangent_env: dict):
        self.builder, self.tangent_env = builder, tangent_env
        self.read = last_readers(prog)
        self.released_by = {}       # equation index -> the vars its step drops
        for vid, j in self.read.items():
            self.released_by.setdefault(j, []).append(vid)
        for v in prog.inputs:               # never read: held by nothing
            if v.id not in self.read:
                self._release(v.id)
        self.index, self.start = -1, len(builder.eqns)

    def step_begins(self):
        self.index += 1
        self.start = len(self.builder.eqns)

    def step_ends(self, e):
        end = len(self.builder.eqns)
        self.builder.step_end.update({i: end for i in range(self.start, end)})
        # an output no equation reads is never dropped: core.last_used has no
        # entry for it, so clean_up_dead_vars keeps it in the env to the end
        # (found by a pristine nightly, bebee5b131: a dead log of a jit's value
        # makes that value the jit's first residual)
        for vid in self.released_by.get(self.index, []):
            self._release(vid)
        for v in e.outputs:
            if v.id not in self.read:
                self._release(v.id, forever=True)

    def _release(self, vid, forever=False):
        t = self.tangent_env.get(vid)
        if isinstance(t, Tracer) and isinstance(t.atom, Var):
            released = self.builder.tangent_released
            until = float("inf") if forever else len(self.builder.eqns)
            released[t.atom.id] = max(released.get(t.atom.id, 0), until)


def _primal_outputs_known(primal_outs, jvp_eqns, depends):
    """ad.linearize_from_jvp's check, made for each equation it linearizes
    (a primitive without a linearization rule of its own: a checkpoint, a
    while loop, the generic reduce_window), whether or not its outputs are
    used: no primal output the JVP rule returns may depend on a tangent.
    A checkpoint whose body holds a generic reduce_window has such an output
    (found by a pristine campaign, 468ab22284: one the program never reads).
    linearize_from_jvp checks after partially evaluating the JVP rule's
    equations, and JAX linearizes the equations before it first, so what
    partially evaluating those raises comes first: a checkpoint's policy
    raising when asked, in this equation (found by a pristine campaign,
    c1fdeb0562) or an earlier one (a cond's branch: 2904291a57).
    `jvp_eqns`: the equations this JVP has emitted so far."""
    if any(isinstance(p, Tracer) and isinstance(p.atom, Var) and p.atom.id in depends for p in primal_outs):
        _partially_evaluated(jvp_eqns, depends)
        raise ValueError(LINEARIZATION_ERROR)


def _partially_evaluated(eqns, depends) -> None:
    """Partially evaluate `eqns` as linearization does, the values in
    `depends` unknown, for what that raises."""
    defined = {v.id for e in eqns for v in e.outputs}
    free = list({a.id: a for e in eqns for a in e.inputs if isinstance(a, Var) and a.id not in defined}.values())
    prog = Program(free, eqns, [v for e in eqns for v in e.outputs])
    partial_eval(prog, [v.id in depends for v in free], linearize=True)


# Primitives whose linearization (JAX's, e.g. `_scan_linearize` via
# `ad.linearize_jaxpr`) returns a tangent for every output the JVP rule
# gives one, also where the body computes it from primals alone (a constant
# zero tangent is still a tangent there, saved as a residual): the tangents
# such a primitive's rule returns are not checked for dependence.
jaxpr_linearized: set = set()


# primitive -> fn(eqn, in_flags) -> out_flags, for a primitive whose
# outputs' dependence on its inputs is not what its body says (the default)
dependence_rules: dict = {}


def output_dependence(eqn, in_flags) -> list[bool]:
    """Which outputs of `eqn` depend on the inputs flagged in `in_flags`
    (looking through the body of a call or checkpoint)."""
    if eqn.primitive in dependence_rules:
        return dependence_rules[eqn.primitive](eqn, in_flags)
    subs = subprograms(eqn.params)
    if not subs:
        return [any(in_flags)] * len(eqn.outputs)
    return program_dependence(subs[0][1], in_flags)


def program_dependence(prog: Program, in_flags) -> list[bool]:
    """Which outputs of `prog` depend on its inputs flagged in `in_flags`."""
    dep = {v.id for v, f in zip(prog.inputs, in_flags) if f}
    for e in prog.eqns:
        flags = [isinstance(a, Var) and a.id in dep for a in e.inputs]
        dep.update(v.id for v, d in zip(e.outputs, output_dependence(e, flags)) if d)
    return [isinstance(a, Var) and a.id in dep for a in prog.outputs]


def jvp_program(prog: Program, nonzeros=None, instantiate_zeros=True, known_tangents_are_zero=False):
    """The JVP program of `prog` and which tangent outputs it returns.

    Inputs: all primals, then a tangent for each input with nonzeros[i]
    (default: every floating input). Outputs: all primal outputs, then a
    tangent for each floating output (zeros instantiated as `broadcast_in_dim
    0.0`, as JAX does) or, with instantiate_zeros=False, only for the
    outputs whose tangent is not a symbolic zero. Returns (program,
    out_nonzeros)."""
    if nonzeros is None:
        nonzeros = [is_differentiable(t) for t in prog.in_types]
    nonzeros = [bool(nz) and is_differentiable(t) for nz, t in zip(nonzeros, prog.in_types)]
    with building() as b:
        primals = [b.new_input(t) for t in prog.in_types]
        tangent_ins = [b.new_input(t) for t, nz in zip(prog.in_types, nonzeros) if nz]
        it = iter(tangent_ins)
        tangents = [next(it) if nz else Zero(t) for t, nz in zip(prog.in_types, nonzeros)]
        outs, out_ts = jvp_traced(prog, primals, tangents, known_tangents_are_zero)
        if instantiate_zeros:
            out_nz = [is_differentiable(t) for t in prog.out_types]
        else:
            out_nz = [not isinstance(t, Zero) for t in out_ts]
        kept = [instantiate(t) for t, nz in zip(out_ts, out_nz) if nz]
        names = prog.input_names + tuple(f"{n}_dot" for n, nz in zip(prog.input_names, nonzeros) if nz) \
            if prog.input_names else None
        built = b.build(primals + tangent_ins, outs + kept, input_names=names)
        built.tangent_holds = TangentHolds(dict(b.tangent_released), tuple(
            b.step_end.get(i, i + 1) for i in range(len(built.eqns))), tuple(id(e) for e in built.eqns))
        return built, out_nz


def jvp(prog: Program) -> Program:
    """Program (primals, tangents of float inputs) -> (outputs, tangents of
    float outputs)."""
    return jvp_program(prog)[0]
