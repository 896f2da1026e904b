"""`call`: apply a nested program (JAX's `jit`/pjit inside a jaxpr; with
name=None, JAX's anonymous `closed_call`, e.g. the known half of a scan
split inside a checkpoint).

Every transformation maps the body and wraps the result in a new call, so
the structure of the user's program survives differentiation. Partial
evaluation splits the body into a known call and a staged call whose
residuals are outputs of the known call ("output of jitted function"),
except residuals that are just inputs of the call, which are forwarded,
and residuals that are known outputs of the call, which are those outputs.
The call's own constants (a jitted function's closed-over arrays) are no
residuals of a split inside a checkpoint, where both halves close over
them, and are forwarded as they are by a linearization; the split by
which a checkpoint's transpose replays its non-linear part (JaxprTrace's,
`_pjit_partial_eval`) returns them from the known call.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from spec.core import (Example, JaxFacts, examples, jax_facts, PrimitiveError, Zero, bind, dce_rules, eval_rules,
                       instantiate, keeps_constants_closed, jaxpr_trace_rules, linearizes_in_order, jvp_rules, partial_eval_rules, primitive,
                       shape_rules, staging_rules, transpose_rules, trace)
from spec.ir import Eqn, Literal, Program, Var
from spec.partial_eval import dce_body_eqn
from spec.prims_elementwise import mul, sin, sub, tanh
from spec.prims_structural import reduce_sum
from spec.batching import vmap_program
from spec.core import batch_rules, complex_rules, is_undefined
from spec.evaluate import evaluate
from spec.jvp import jvp_program, linearizing
from spec.partial_eval import Source, constant_key, partial_eval, source_rules, splitting_by_jaxpr_trace
from spec.semantics import semantics
from spec.transpose import transpose

call_p = primitive("call", ["jaxpr", "name"], multiple_results=True)
# a named call is a `jit` equation (name=None: JAX's closed_call); sub-programs are
# bound structurally by oracle/to_jax.py and oracle/repro.py (no emitter)
jax_facts[call_p] = JaxFacts("jit", "")


def call(prog: Program, *args, name: str | None = "call"):
    """Apply `prog` to args as one equation; returns a list of outputs.
    name=None makes it an anonymous closed_call.

    The `call` equation evaluates `jaxpr` on the operands (JAX's
    `jit`/`pjit`); every transformation maps the body and wraps it in a
    new `call` with the same name."""
    return bind(call_p, *args, jaxpr=prog, name=name)


def _call_shape(*in_types, jaxpr, name):
    if not isinstance(jaxpr, Program):
        raise PrimitiveError(call_p, f"param jaxpr must be a Program, got {type(jaxpr).__name__}")
    if list(in_types) != jaxpr.in_types:
        raise PrimitiveError(call_p, f"'{name}' takes {jaxpr.in_types}, got {list(in_types)}")
    return jaxpr.out_types


def _call_eval(*args, jaxpr, name):
    return evaluate(jaxpr, *args)


def _call_jvp(primals, tangents, *, jaxpr, name):
    nonzeros = [not isinstance(t, Zero) for t in tangents]
    # when linearizing, the body is linearized too (pjit's linearize rule)
    body, out_nz = jvp_program(jaxpr, nonzeros, instantiate_zeros=False,
                               known_tangents_are_zero=linearizing())
    outs = call(body, *primals, *[t for t in tangents if not isinstance(t, Zero)], name=name)
    n = len(jaxpr.outputs)
    it = iter(outs[n:])
    return outs[:n], [next(it) if nz else None for nz in out_nz]


def _call_transpose(cts, *args, jaxpr, name):
    linear = [is_undefined(a) for a in args]
    body = transpose(jaxpr, linear)
    nonlin = [a for a in args if not is_undefined(a)]
    cts_in = iter(call(body, *nonlin, *[instantiate(c) if isinstance(c, Zero) else c for c in cts],
                       name=name))   # pjit's transpose keeps the name
    return [next(cts_in) if lin else None for lin in linear]


def _call_partial_eval(eqn: Eqn, in_unknowns, in_inst, *, saveable, linearize,
                       constants_shared=True):
    """Split the body with the same policy: a known call computing the known
    outputs and the residuals, and a staged call. Residuals that are inputs
    of the body are forwarded from outside rather than returned by the call
    (as pjit's partial-eval rule does).

    The body's constants (Literals: the jaxpr's consts) are shared by both
    halves of a split inside a checkpoint (closed_call_partial_eval_custom_rule,
    jax/_src/interpreters/partial_eval.py: `ClosedJaxpr(jaxpr_staged_,
    jaxpr.consts)`), so never residuals there; with `constants_shared=False`
    (jax_remat3's `_pjit_remat`, whose forward jit returns every constant the
    rematerialization reads) they are residual outputs of the known call."""
    body, name = eqn.params["jaxpr"], eqn.params["name"]
    # the known call returns its residuals in the order the staged body first
    # reads them: when linearizing (pjit's linearize rule, via
    # ad.linearize_jaxpr whose tangent trace makes them constants on first
    # use) and inside a checkpoint (partial_eval_jaxpr_custom makes a known
    # value a residual when a staged equation first reads it). Inside a
    # checkpoint neither half is DCE'd (closed_call_partial_eval_custom_rule's
    # partial_eval_jaxpr_stateful): a residual only dead staged code reads is
    # returned until an enclosing DCE prunes it, which a cond's merged residual
    # slots may not (found by a pristine campaign, 791dc1fea2); a linearization
    # traces the tangents with auto_dce (ad._linearize_jaxpr)
    pe = partial_eval(body, in_unknowns, saveable=saveable, linearize=linearize,
                      literals_are_residuals=False, constants_are_residuals=linearize or not constants_shared,
                      in_inst=in_inst, stage_recomputed_outputs=True, order="first_use", dce_staged=linearize)
    if not any(in_unknowns) and not pe.recomputed and not pe.residuals and (linearize or not any(pe.staged_outputs)):
        return [eqn], [], [False] * len(eqn.outputs), [False] * len(eqn.outputs), [], {}
    # (inside a checkpoint an output the body returns as a literal is known and
    # instantiated: partial_eval_jaxpr_custom's `read` of a Literal is (False,
    # True), jax/_src/interpreters/partial_eval.py:938, so the staged call
    # computes it again and it is never a residual)
    known_ins = [a for a, u in zip(eqn.inputs, in_unknowns) if not u]
    staged_ins = [a for a, m in zip(eqn.inputs, pe.staged_inputs) if m]
    known_outs = [v for v, u in zip(eqn.outputs, pe.out_unknowns) if not u]
    staged_outs = [v for v, m in zip(eqn.outputs, pe.staged_outputs) if m]
    n_known = len(known_outs)
    res_atoms, new_res_vars, body_res_outs = [], [], []
    forwarding = _Forwarding(known_ins, known_outs, pe.known.outputs[:n_known],
                             {v.id: i for i, v in enumerate(pe.known.inputs)},
                             _forwarded_constants(body, linearize), linearize, constants_shared)
    for r, out in zip(pe.residuals, pe.known.outputs[n_known:]):
        atom = forwarding.atom(out)
        if atom is None:       # returned by the known call
            atom = Var(r.type)
            new_res_vars.append(atom)
            body_res_outs.append(out)
        res_atoms.append(atom)
    known_body = Program(pe.known.inputs, pe.known.eqns, pe.known.outputs[:n_known] + body_res_outs)
    known_eqn = Eqn(call_p, known_ins, known_outs + new_res_vars, dict(jaxpr=known_body, name=name))
    staged_eqn = Eqn(call_p, res_atoms + staged_ins, staged_outs, dict(jaxpr=pe.staged, name=name))
    subst = {}
    if linearize:
        # a known output that is just an input of the body is that input
        # (pjit's linearization forwards it: `pe._jaxpr_forwarding`), so
        # what reads it reads the call's input
        body_in = {v.id: i for i, v in enumerate(pe.known.inputs)}
        for v, a in zip(known_outs, pe.known.outputs[:n_known]):
            if isinstance(a, Var) and a.id in body_in:
                subst[v.id] = known_ins[body_in[a.id]]
    return [known_eqn], [staged_eqn], pe.out_unknowns, pe.staged_outputs, pe.recomputed, subst


@dataclass(frozen=True)
class _Forwarding:
    """How a split call passes a residual (an output of its known body) to
    the staged call: forwarded from outside, or returned (`atom` None)."""
    known_ins: list          # the call's known operands
    known_outs: list         # the call's known outputs
    known_body_outs: list    # what the known body returns for them
    body_inputs: dict        # known body input id -> position
    own_constants: set       # the body's own constants (`constant_key`), when linearizing
    linearize: bool
    constants_shared: bool

    def atom(self, out):
        """The atom outside the call standing for residual `out`, or None."""
        # forwarded where the residual is the body's input itself
        # (`pe._jaxpr_forwarding`), not a value saved_residuals would name by
        # it (a reduce_precision of it is the jit's output: found by a
        # campaign on 0.6.2, measured on 0.10.2 too)
        forwarded = isinstance(out, Var) and out.id in self.body_inputs
        forwards_input = forwarded and (self.linearize or semantics().remat_of_jit_forwards_inputs)
        # a residual that is also a known output is that output (the known
        # call returns it once, in its output's place; the last such place:
        # `idx_map = {id(v): i for i, v in enumerate(out_vars)}`)
        out_index = next((i for i in reversed(range(len(self.known_body_outs))) if self.known_body_outs[i] is out),
                         None)
        if forwards_input and (self.linearize or not self.constants_shared):
            # ad.linearize_jaxpr forwards a residual that is an input before
            # _pjit_linearize looks for it among the outputs; jax_remat3's
            # forward jit is staged with its input forwards (`_pjit_forwarding`)
            return self.known_ins[self.body_inputs[out.id]]
        if isinstance(out, Literal) and constant_key(out) in self.own_constants:
            # one of the body's own constants: pjit's linearize rule forwards it
            # (ad.linearize_jaxpr: `fwd_inputs = (*jaxpr.consts, *in_primals)`,
            # `residuals_ans = subs_list(in_fwd_res, [*jaxpr.consts, ...])`); a
            # constant a nested call forwarded is no const of this jaxpr, and
            # is returned like any other residual
            return out
        if out_index is not None:
            # inside a checkpoint an output forward comes before an input
            # forward (closed_call_partial_eval_custom_rule: `out_binders_known
            # [fout] if fout is not None else ins_known[fin] if fin is not
            # None`): a jit returning its input saves that output (found by a
            # pristine campaign on 0.10.2, 4bbc9ecb62)
            return self.known_outs[out_index]
        return self.known_ins[self.body_inputs[out.id]] if forwards_input else None


def _forwarded_constants(body: Program, linearize: bool) -> set:
    """The body's own constants a split forwards rather than returns from
    the known call: all of them when linearizing (pjit's linearize rule),
    none when the split is JaxprTrace's (`_pjit_partial_eval`, in
    remat_transpose: a constant the transposed part reads is an output of
    a known jit there, which the checkpoint's policy then recomputes; found
    by a pristine campaign on 0.10.2, 4e2b1ed9f8) or inside a checkpoint."""
    return _constants_of(body) if linearize and not splitting_by_jaxpr_trace() else set()


def _constants_of(prog: Program) -> set:
    """The non-scalar constants `prog` itself reads or returns (its jaxpr's
    consts; not those of nested programs), by `constant_key`."""
    atoms = [a for e in prog.eqns for a in e.inputs] + list(prog.outputs)
    return {constant_key(a) for a in atoms if isinstance(a, Literal) and not a.is_scalar}


def _call_source(eqn, var):
    if eqn.params["name"] is None:
        return Source("output", primitive="closed_call")
    return Source("output", primitive="call", name=eqn.params["name"])


shape_rules[call_p] = _call_shape
eval_rules[call_p] = _call_eval
jvp_rules[call_p] = _call_jvp
transpose_rules[call_p] = _call_transpose
partial_eval_rules[call_p] = _call_partial_eval
dce_rules[call_p] = lambda eqn, used_outputs: dce_body_eqn(eqn, used_outputs)
# _pjit_partial_eval traces the body with the operands' unknowns
# (pe.partial_eval_jaxpr_nounits_fwd), known or not
jaxpr_trace_rules[call_p] = lambda eqn, in_unknowns, ask: ask(eqn.params["jaxpr"], in_unknowns)
keeps_constants_closed.add(call_p)     # pjit's closed jaxpr
linearizes_in_order.add(call_p)        # _pjit_linearize: ad.linearize_jaxpr of the body


def _call_staging(eqn: Eqn):
    """pjit's staging rule (`pjit_staging_rule` with `_pjit_forwarding`,
    jax/_src/pjit.py, jax 0.4.29 to 0.5.3): a jit output that is one of
    the body's inputs is dropped, and readers read that input. An anonymous
    closed_call (name None) has no staging rule."""
    body = eqn.params["jaxpr"]
    if eqn.params["name"] is None:
        return eqn, {}
    forwarded = [next((a for x, a in zip(body.inputs, eqn.inputs) if o is x), None) for o in body.outputs]
    if all(a is None for a in forwarded):
        return eqn, {}
    kept = [a is None for a in forwarded]
    pruned = replace(body, outputs=[o for o, k in zip(body.outputs, kept) if k])
    subst = {v.id: a for v, a in zip(eqn.outputs, forwarded) if a is not None}
    n_res = eqn.residual_outputs
    return replace(eqn, outputs=[v for v, k in zip(eqn.outputs, kept) if k], params=dict(eqn.params, jaxpr=pruned),
                   residual_outputs=sum(kept[len(kept) - n_res:]) if n_res else 0), subst


staging_rules[call_p] = _call_staging


def _register_source():
    source_rules[call_p] = _call_source


_register_source()


def _call_batch(args, dims, *, jaxpr, name):
    """pjit's batcher: batch the body; outputs keep the body's batch axes."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    body, out_dims = vmap_program(jaxpr, dims, "any", size)
    return call(body, *args, name=name), out_dims


def _register_batch_rule():
    batch_rules[call_p] = _call_batch


_register_batch_rule()


# --------------------------------------------------------------------------
# examples (checked by tests/test_primitive_examples.py): each reference is
# numpy, written independently of the rules; the body is traced at the
# example's types

def _call_sin_mul(x, y):
    body = trace(lambda a, b: mul(sin(a), b), x.type, y.type)
    return call(body, x, y, name="f")[0]


def _call_two_outputs(x, y):
    body = trace(lambda a, b: (tanh(a) + b, reduce_sum(a * b, (0,))), x.type, y.type)
    return tuple(call(body, x, y, name="g"))


def _call_linear(x, y):
    body = trace(lambda a, b: (sub(a * 2.0, b), reduce_sum(b, (1,))), x.type, y.type)
    return tuple(call(body, x, y, name="lin"))


def _call_linear_in_first(x, y):
    body = trace(lambda a, b: a * b, x.type, y.type)
    return call(body, x, y, name="scale")[0]


def _tanh_reference(x):
    e = np.exp(2.0 * x)
    return (e - 1.0) / (e + 1.0)


examples[call_p] = [
    Example("call", (((3,), "f32", "normal"), ((3,), "f32", "normal")), _call_sin_mul,
            lambda x, y: np.sin(x) * y),
    Example("two-outputs", (((3, 2), "f32", "normal"), ((3, 2), "f32", "normal")), _call_two_outputs,
            lambda x, y: (_tanh_reference(x) + y, np.sum(x * y, axis=0)), cond=3),
    Example("linear", (((2, 3), "f32", "normal"), ((2, 3), "f32", "normal")), _call_linear,
            lambda x, y: (2.0 * x - y, y.sum(1)), linear=((True, True),), cond=3),
    Example("linear-in-first", (((4,), "f32", "normal"), ((4,), "f32", "normal")), _call_linear_in_first,
            lambda x, y: x * y, linear=((True, False),)),
]


# a call's rules are its body's: complex values pass through it
complex_rules.add(call_p)
