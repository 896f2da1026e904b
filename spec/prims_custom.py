"""Custom derivatives: `custom_jvp_call`, `custom_vjp_call` and `custom_lin`
(JAX's `jax.custom_jvp` / `jax.custom_vjp`, jax/_src/custom_derivatives.py).

A custom function is a primal program `jaxpr` plus user rules. The rules
are :class:`Rule` params: traced *lazily*, as JAX's `jvp_jaxpr_fun` /
`fwd_jaxpr_thunk` / `bwd` are, because a rule commonly calls the custom
function itself (`return f(x), ...`), and tracing it eagerly would never
end. A rule is keyed by which inputs are perturbed (nonzero), so that
`symbolic_zeros=True` rules see symbolic zeros (`spec.Zero`) as JAX's see
`SymbolicZero`s; it gives a Program and which outputs are nonzero:

    custom_jvp_call[jaxpr, jvp, num_consts, symbolic_zeros, name] *consts, *args
        jvp(nonzeros) : consts, primals, nonzero tangents -> outs, nonzero tangent outs
    custom_vjp_call[jaxpr, fwd, bwd, num_consts, symbolic_zeros, name] *consts, *args
        fwd(nonzeros) : consts, primals -> outs, residuals
        bwd(nonzeros) : residuals, nonzero output cotangents -> nonzero input cotangents
    custom_lin[bwd, num_res, in_nonzeros, symbolic_zeros, out_types]
        residuals, nonzero tangents -> output tangents      (linear; only transposable)

`num_consts` (None: 0, as JAX prints none) leading inputs are values the
custom function closes over: JAX's `process_custom_jvp_call` /
`process_custom_vjp_call` of DynamicJaxprTrace make the tracers `fun`
closes over leading operands (`num_consts=len(consts)`, the body's
constvars made invars). A rule's key is one flag per input, consts
first: whether a const carries a nonzero tangent, then which arguments
are perturbed (`nonzeros` above are the arguments'). A rule program
takes the consts' values first (a rule that closes over one reads it;
JAX's rule does so through its closure); it is never given their tangents.

Semantics (JAX 0.10.2):

* eval: the primal program (the rules are never run).
* JVP of custom_jvp_call: the user's rule, inlined, on instantiated zero
  tangents unless `symbolic_zeros` (JVPTrace/LinearizeTrace
  `process_custom_jvp_call`; under linearization the rule is partially
  evaluated, as `linearize_from_jvp` does, by the generic
  known-tangents-are-zero machinery of spec/jvp.py). The consts' tangents
  are dropped: JAX's `lift_jvp` (CustomJVPCallPrimitive.get_bind_params)
  calls the rule on `xs[num_consts:n]` and `xs[n+num_consts:]` only, so a
  closed-over value is not differentiated through (no error); the rule
  still runs when only a const is perturbed (the all-zero test of
  process_custom_jvp_call counts the consts).
* JVP of custom_vjp_call: the forward rule, inlined (its residuals are
  ordinary values: a checkpoint's policy decides about them like any other),
  and a `custom_lin` holding `bwd` for the tangents. Evaluating, batching
  or differentiating custom_lin raises JAX's TypeError: forward-mode AD of
  a custom_vjp function is an error; reverse mode transposes custom_lin
  into `bwd`. A perturbed const raises JAX's CustomVJPException: `lift_fwd`,
  the forward rule JAX makes of the equation, raises it, and so does the
  spec's forward rule, told by its key which consts are perturbed (a rule
  imported from the function as written, whose fwd JAX calls itself, drops
  the tangent instead, as a custom_jvp_call does: oracle/from_jax.py). bwd
  gives the consts no cotangent (`_handle_consts_in_bwd`: zeros).
* transpose: custom_jvp_call transposes its primal body, consts and
  arguments alike (JAX's `_custom_jvp_call_transpose_fancy`); custom_lin
  is `bwd`.
* partial evaluation: no rule, as in JAX (`partial_eval_jaxpr_custom` has
  none for either): all-known -> known (the policy decides), else staged.
  (JAX's trace-based partial evaluation would inline the primal of a
  custom_jvp_call with unknown inputs; linearization never builds one, so
  the spec stages it whole.)
* batching: the primal and the rules are batched (BatchTrace's
  `process_custom_*_call`, consts batched as the arguments are); outputs
  keep the primal's batch dims, and bwd's cotangents are moved (summed) to
  the arguments' dims.
* DCE keeps every input, consts included (`_custom_jvp_call_dce` /
  `_custom_vjp_call_dce` DCE the body with instantiate=True).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from spec.core import (Example, JaxFacts, cost_rules, examples, jax_facts, PrimitiveError, Tracer, Zero, bind, building, dce_rules,
                       eval_program_traced, eval_rules, instantiate, is_differentiable,
                       is_undefined, jaxpr_trace_rules, jvp_rules, primitive, shape_rules, to_atom,
                       transpose_rules, zeros_like_type)
from spec.ir import ArrayType, Program
from spec.batching import AxesRefused, BatchingError, broadcast_at, moveaxis, vmap_program, vmap_traced
from spec.core import batch_rules
from spec.evaluate import evaluate
from spec.ir import Eqn
from spec.partial_eval import dce
from spec.prims_structural import reduce_sum
from spec.prims_remat_opt import optimized_fwd
from spec.transpose import transpose_traced

FWD_ERROR = "can't apply forward-mode autodiff (jvp) to a custom_vjp function."
# ad.CustomVJPException's message, word for word: lift_fwd raises it for a
# custom_vjp_call whose closed-over value (a const) carries a nonzero tangent
CLOSED_OVER_ERROR = ("Detected differentiation of a custom_vjp function with respect to "
                     "a closed-over value. That isn't supported because the custom VJP "
                     "rule only specifies how to differentiate the custom_vjp function "
                     "with respect to explicit input parameters. Try passing the "
                     "closed-over value into the custom_vjp function as an argument, and "
                     "adapting the custom_vjp fwd and bwd rules.")


class CustomVJPException(Exception):
    """JAX's ad.CustomVJPException (an Exception): differentiating a
    custom_vjp function with respect to a value it closes over."""

    def __init__(self):
        super().__init__(CLOSED_OVER_ERROR)


# --------------------------------------------------------------------------
# rules

class Rule:
    """A lazily traced custom rule (JAX's `jvp_jaxpr_fun`, `fwd_jaxpr_thunk`,
    `bwd`): rule(nonzeros) -> (Program, out_nonzeros), memoized. Prints as
    its name. Not a sub-program of its equation (it may contain the
    equation's own primitive with the same rule): `map_programs(fn)` gives
    the rule whose programs are fn of these (spec.ir.map_subprograms uses it)."""

    def __init__(self, name: str, trace: Callable, arity: int, base=None, consts: int | None = None):
        self.__name__ = name
        self._trace = trace
        self.arity = arity         # the length of a key
        self._memo: dict = {}
        self._busy: set = set()
        self.base = base           # what the rule was derived from (dce, batching, ...)
        # how many of a key's flags are the consts' (a jvp or fwd rule of a call with num_consts)
        self.consts = consts if consts is not None else (base.consts if base is not None else 0)

    def __call__(self, nonzeros) -> tuple[Program, tuple[bool, ...]]:
        key = tuple(bool(n) for n in nonzeros)
        if key not in self._memo:
            if key in self._busy:
                raise RecursionError(f"custom rule {self.__name__} needs itself to be traced")
            self._busy.add(key)
            try:
                prog, out_nz = self._trace(key)
            finally:
                self._busy.discard(key)
            self._memo[key] = (prog, tuple(bool(n) for n in out_nz))
        return self._memo[key]

    def map_programs(self, fn) -> "Rule":
        def trace(key):
            prog, out_nz = self(key)
            return fn(prog), out_nz
        return Rule(self.__name__, trace, self.arity, base=self)

    def traced_programs(self) -> list[Program]:
        """The programs traced so far, at least the all-perturbed one (every
        argument perturbed, no const: unless tracing it is under way)."""
        full = (False,) * self.consts + (True,) * (self.arity - self.consts)
        if full not in self._memo and full not in self._busy:
            self(full)
        return [p for p, _ in self._memo.values()]

    def __repr__(self):
        return self.__name__


class CustomVJPPrimal(NamedTuple):
    """What a `symbolic_zeros=True` forward rule receives for each argument
    (jax.custom_derivatives.CustomVJPPrimal)."""
    value: object
    perturbed: bool


# --------------------------------------------------------------------------
# primitives

custom_jvp_call_p = primitive("custom_jvp_call", ["jaxpr", "jvp", "num_consts", "symbolic_zeros", "name"],
                              multiple_results=True)
custom_vjp_call_p = primitive("custom_vjp_call", ["jaxpr", "fwd", "bwd", "num_consts", "symbolic_zeros", "name"],
                              multiple_results=True)
custom_lin_p = primitive("custom_lin", ["bwd", "num_res", "in_nonzeros", "symbolic_zeros", "out_types"],
                         multiple_results=True)
# bound structurally (oracle/to_jax.py); custom_lin is made by differentiation, never imported
for _p in (custom_jvp_call_p, custom_vjp_call_p, custom_lin_p):
    jax_facts[_p] = JaxFacts(_p.name, "")


def _body_shape(prim):
    def rule(*in_types, jaxpr, name, symbolic_zeros, num_consts, **rules):
        if not isinstance(jaxpr, Program):
            raise PrimitiveError(prim, f"param jaxpr must be a Program, got {type(jaxpr).__name__}")
        if num_consts is not None and (isinstance(num_consts, bool) or not isinstance(num_consts, int)
                                       or not 0 < num_consts <= len(in_types)):
            raise PrimitiveError(prim, f"param num_consts must be None (no consts) or an int in "
                                       f"1..{len(in_types)}, got {num_consts!r}")
        for k, r in rules.items():
            if not isinstance(r, Rule):
                raise PrimitiveError(prim, f"param {k} must be a spec.prims_custom.Rule, got {type(r).__name__}")
        if list(in_types) != jaxpr.in_types:
            raise PrimitiveError(prim, f"'{name}' takes {jaxpr.in_types}, got {list(in_types)}")
        return jaxpr.out_types
    return rule


def _body_eval(*args, jaxpr, **_):
    return evaluate(jaxpr, *args)


shape_rules[custom_jvp_call_p] = _body_shape(custom_jvp_call_p)
shape_rules[custom_vjp_call_p] = _body_shape(custom_vjp_call_p)
eval_rules[custom_jvp_call_p] = _body_eval
eval_rules[custom_vjp_call_p] = _body_eval


def _custom_jvp_jaxpr_trace(eqn: Eqn, in_unknowns, ask) -> None:
    """JaxprTrace.process_custom_jvp_call: with every input known the call
    is bound whole in the enclosing trace; else `fun` is traced with the
    JaxprTrace, the JVP rule dropped."""
    if any(in_unknowns):
        ask(eqn.params["jaxpr"], in_unknowns)


def _custom_vjp_jaxpr_trace(eqn: Eqn, in_unknowns, ask) -> None:
    """JaxprTrace.process_custom_vjp_call: with every input known the call
    is bound whole in the enclosing trace; else `fun` is traced with every
    input made unknown (`in_knowns = (False,) * len(tracers)`)."""
    if any(in_unknowns):
        ask(eqn.params["jaxpr"], [True] * len(in_unknowns))


jaxpr_trace_rules[custom_jvp_call_p] = _custom_jvp_jaxpr_trace
jaxpr_trace_rules[custom_vjp_call_p] = _custom_vjp_jaxpr_trace


def _lin_shape(*in_types, bwd, num_res, in_nonzeros, symbolic_zeros, out_types):
    """custom_lin: the linear part of a custom_vjp (residuals, tangents ->
    tangents), made by custom_vjp_call's JVP. Evaluating, batching or
    differentiating it raises "can't apply forward-mode autodiff (jvp) to a
    custom_vjp function."; its transpose is the user's `bwd`."""
    if len(in_types) != num_res + sum(in_nonzeros):
        raise PrimitiveError(custom_lin_p, f"takes {num_res} residuals and {sum(in_nonzeros)} tangents, "
                                           f"got {len(in_types)} inputs")
    return list(out_types)


def _raise_fwd(*_, **__):
    """Raises JAX's TypeError: forward mode of a custom_vjp function is an error."""
    raise TypeError(FWD_ERROR)


shape_rules[custom_lin_p] = _lin_shape
eval_rules[custom_lin_p] = _raise_fwd     # ad.raise_custom_vjp_error_on_jvp (custom_lin's impl)
jvp_rules[custom_lin_p] = _raise_fwd
# custom_lin has no cost of its own to recompute: it is never known
# (it reads tangents), so the default cost rule is never asked.


# --------------------------------------------------------------------------
# JVP

def _perturbed(tangents, in_types, symbolic_zeros):
    """The rule's key: which inputs carry a tangent. Without symbolic zeros
    JAX instantiates zero tangents, so every float input is perturbed."""
    if symbolic_zeros:
        return tuple(not isinstance(t, Zero) for t in tangents)
    return tuple(is_differentiable(t) for t in in_types)


def _const_perturbed(tangents, k) -> tuple[bool, ...]:
    """Which of the k consts carry a nonzero tangent (the consts' part of a rule's key)."""
    return tuple(not isinstance(t, Zero) for t in tangents[:k])


def _custom_jvp_jvp(primals, tangents, *, jaxpr, jvp, num_consts, symbolic_zeros, name):
    """process_custom_jvp_call: call the user's rule `jvp` (inlined), traced
    lazily for this set of perturbed inputs. The rule is given the consts'
    values, never their tangents: JAX's lift_jvp drops `xs[n:n+num_consts]`."""
    k = num_consts or 0
    nonzeros = _perturbed(tangents[k:], jaxpr.in_types[k:], symbolic_zeros)
    rule, out_nz = jvp(_const_perturbed(tangents, k) + nonzeros)
    nz_tangents = [instantiate(t) for t, nz in zip(tangents[k:], nonzeros) if nz]
    outs = eval_program_traced(rule, *primals, *nz_tangents)
    n = len(jaxpr.outputs)
    it = iter(outs[n:])
    return outs[:n], [next(it) if nz else None for nz in out_nz]


def _custom_vjp_jvp(primals, tangents, *, jaxpr, fwd, bwd, num_consts, symbolic_zeros, name):
    """process_custom_vjp_call: the forward rule `fwd` inlined (its residuals
    are ordinary values, which a checkpoint's policy may save or recompute),
    then a `custom_lin` holding `bwd` for the tangents; evaluating that
    raises JAX's TypeError: forward mode of a custom_vjp is an error. The
    forward rule's key flags the perturbed consts: lift_fwd's rule raises
    CustomVJPException for one."""
    k = num_consts or 0
    nonzeros = tuple(not isinstance(t, Zero) for t in tangents[k:])
    key = nonzeros if symbolic_zeros else _perturbed(tangents[k:], jaxpr.in_types[k:], False)
    fwd_prog, _ = fwd(_const_perturbed(tangents, k) + key)
    n = len(jaxpr.outputs)
    outs = eval_program_traced(fwd_prog, *primals)
    primals_out, residuals = outs[:n], outs[n:]
    nz_tangents = [t for t in tangents[k:] if not isinstance(t, Zero)]
    tangents_out = bind(custom_lin_p, *residuals, *nz_tangents, bwd=bwd, num_res=len(residuals),
                        in_nonzeros=nonzeros, symbolic_zeros=symbolic_zeros,
                        out_types=tuple(jaxpr.out_types))
    return primals_out, tangents_out


jvp_rules[custom_jvp_call_p] = _custom_jvp_jvp
jvp_rules[custom_vjp_call_p] = _custom_vjp_jvp


# --------------------------------------------------------------------------
# transpose

def _custom_jvp_transpose(cts, *args, jaxpr, jvp, num_consts, symbolic_zeros, name):
    """_custom_jvp_call_transpose_fancy: transpose the primal body, inlined."""
    linear = [is_undefined(a) for a in args]
    nonlin = [a for a in args if not is_undefined(a)]
    cts_in = iter(transpose_traced(jaxpr, linear, nonlin, list(cts)))
    return [next(cts_in) if lin else None for lin in linear]


def _custom_lin_transpose(cts, *args, bwd, num_res, in_nonzeros, symbolic_zeros, out_types):
    """_custom_lin_transpose: bwd(residuals, output cotangents), zeros
    instantiated unless symbolic_zeros; cotangents of unperturbed inputs dropped."""
    residuals = args[:num_res]
    key = tuple(not isinstance(c, Zero) for c in cts) if symbolic_zeros else (True,) * len(cts)
    prog, out_nz = bwd(key)
    given = [instantiate(c) for c, k in zip(cts, key) if k]
    outs = iter(eval_program_traced(prog, *residuals, *given))
    cts_in = [next(outs) if nz else None for nz in out_nz]
    return [None] * num_res + [c for c, nz in zip(cts_in, in_nonzeros) if nz]


transpose_rules[custom_jvp_call_p] = _custom_jvp_transpose
transpose_rules[custom_lin_p] = _custom_lin_transpose


# --------------------------------------------------------------------------
# dead-code elimination: prune outputs, keep every input (JAX's DCE rules
# instantiate the inputs: a rule may read an input the primal does not)

def _pruned_rule(rule: Rule, keep_out, is_jvp: bool) -> Rule:
    """`rule` with its primal outputs (and, for a jvp rule, their tangents)
    restricted to `keep_out`."""

    def trace(key):
        prog, out_nz = rule(key)
        n = len(keep_out)
        if is_jvp:                                 # outs + nonzero tangent outs
            used = list(keep_out) + [k for k, nz in zip(keep_out, out_nz) if nz]
            nz = [z for z, k in zip(out_nz, keep_out) if k]
        else:                                      # fwd: outs + residuals
            used = list(keep_out) + [True] * (len(prog.outputs) - n)
            nz = [z for z, k in zip(out_nz, keep_out) if k]
        return dce(prog, used)[0], nz
    return Rule(rule.__name__, trace, rule.arity, base=rule)


def _bwd_for_used(bwd: Rule, keep_out, out_types, symbolic_zeros) -> Rule:
    """dce_bwd: cotangents of dropped outputs are zeros (symbolic if allowed)."""
    kept_types = [t for t, k in zip(out_types, keep_out) if k]

    def trace(key):
        it = iter(key)
        full = tuple(next(it) if k else not symbolic_zeros for k in keep_out)
        prog, out_nz = bwd(full)
        n_res = len(prog.inputs) - sum(full)
        with building() as b:
            res = [b.new_input(t) for t in prog.in_types[:n_res]]
            cts = [b.new_input(t) for t, k in zip(kept_types, key) if k]
            ct_it = iter(cts)
            given = [next(ct_it) if k else zeros_like_type(t)
                     for t, k, f in zip(out_types, keep_out, full) if f]
            outs = eval_program_traced(prog, *res, *given)
            return b.build(res + cts, outs), out_nz
    return Rule(bwd.__name__, trace, sum(keep_out), base=bwd)


def _custom_dce(eqn, used_outputs):
    p = dict(eqn.params)
    body = dce(p["jaxpr"], used_outputs)[0]          # inputs kept
    keep = list(used_outputs)
    if all(keep):
        return eqn, [True] * len(eqn.inputs)
    p["jaxpr"] = body
    if eqn.primitive is custom_jvp_call_p:
        p["jvp"] = _pruned_rule(p["jvp"], keep, True)
    else:
        p["fwd"] = _pruned_rule(p["fwd"], keep, False)
        p["bwd"] = _bwd_for_used(p["bwd"], keep, eqn.params["jaxpr"].out_types, p["symbolic_zeros"])
    outs = [v for v, u in zip(eqn.outputs, used_outputs) if u]
    return Eqn(eqn.primitive, list(eqn.inputs), outs, p, why=eqn.why), [True] * len(eqn.inputs)


dce_rules[custom_jvp_call_p] = _custom_dce
dce_rules[custom_vjp_call_p] = _custom_dce


# --------------------------------------------------------------------------
# batching

def _match(x, src, dst, size, sum_match=False):
    """batching.matchaxis: move x's batch axis from src to dst (broadcasting
    an unbatched x; summing it out when dst is None and sum_match)."""
    if src == dst:
        return x
    if src is None:
        return broadcast_at(x, size, dst)
    if dst is None:
        if sum_match:
            return reduce_sum(x, (src,))
        raise BatchingError("a custom rule's output is batched where the primal's is not")
    return moveaxis(x, src, dst)


def _custom_jvp_batch(args, dims, *, jaxpr, jvp, num_consts, symbolic_zeros, name):
    """process_custom_jvp_call of BatchTrace: batch the primal; batch the
    rule with the same input dims and move its outputs to the primal's."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    body, out_dims = vmap_program(jaxpr, dims, "any", size)
    nc = num_consts or 0

    def trace(key):
        rule, out_nz = jvp(key)
        arg_key = key[nc:]
        t_dims = [d for d, k in zip(dims[nc:], arg_key) if k]
        with building() as b:
            ins = [b.new_input(t) for t in body.in_types]
            t_types = [_batched_type(t, d, size) for t, d, k in zip(jaxpr.in_types[nc:], dims[nc:], arg_key) if k]
            t_ins = [b.new_input(t) for t in t_types]
            outs, o_dims = vmap_traced(rule, ins + t_ins, list(dims) + t_dims, size)
            n = len(jaxpr.outputs)
            tgt = list(out_dims) + [d for d, nz in zip(out_dims, out_nz) if nz]
            outs = [_match(o, d, t, size) for o, d, t in zip(outs, o_dims, tgt)]
            return b.build(ins + t_ins, outs), out_nz
    rule = Rule(jvp.__name__, trace, jvp.arity, base=jvp)
    return bind(custom_jvp_call_p, *args, jaxpr=body, jvp=rule, num_consts=num_consts,
                symbolic_zeros=symbolic_zeros, name=name), out_dims


def _batched_type(t: ArrayType, d, size) -> ArrayType:
    if d is None:
        return t
    shape = list(t.shape)
    shape.insert(d, size)
    return ArrayType(shape, t.dtype, t.memory_space)


def _custom_vjp_batch(args, dims, *, jaxpr, fwd, bwd, num_consts, symbolic_zeros, name):
    """process_custom_vjp_call of BatchTrace: batch the primal and fwd
    (outputs at the primal's dims, residuals wherever they come out); bwd
    is batched at the residuals' and outputs' dims and its cotangents are
    moved to the inputs' dims, summed where an input is unbatched."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    body, out_dims = vmap_program(jaxpr, dims, "any", size)
    n = len(jaxpr.outputs)
    res_dims: dict = {}

    def trace_fwd(key):
        prog, out_nz = fwd(key)
        with building() as b:
            ins = [b.new_input(t) for t in body.in_types]
            outs, o_dims = vmap_traced(prog, ins, list(dims), size)
            outs = [_match(o, d, t, size) for o, d, t in zip(outs[:n], o_dims[:n], out_dims)] + outs[n:]
            res_dims[key] = o_dims[n:]
            res_dims["last"] = (prog, o_dims[n:])
            return b.build(ins, outs), out_nz

    def trace_bwd(key):
        prog, out_nz = bwd(key)
        fwd_prog, r_dims = res_dims["last"]
        n_res = len(fwd_prog.outputs) - n
        ct_dims = [d for d, k in zip(out_dims, key) if k]
        in_dims = list(r_dims) + ct_dims
        with building() as b:
            ins = [b.new_input(_batched_type(t, d, size)) for t, d in zip(prog.in_types, in_dims)]
            outs, o_dims = vmap_traced(prog, ins, in_dims, size)
            dst = [d for d, nz in zip(dims[num_consts or 0:], out_nz) if nz]   # no cotangent for a const
            outs = [_match(o, d, t, size, sum_match=True) for o, d, t in zip(outs, o_dims, dst)]
            return b.build(ins, outs), out_nz
    new_fwd = Rule(fwd.__name__, trace_fwd, fwd.arity, base=fwd)
    new_bwd = Rule(bwd.__name__, trace_bwd, bwd.arity, base=bwd)
    return bind(custom_vjp_call_p, *args, jaxpr=body, fwd=new_fwd, bwd=new_bwd, num_consts=num_consts,
                symbolic_zeros=symbolic_zeros, name=name), out_dims


def _register_batch_rules():
    batch_rules[custom_jvp_call_p] = _custom_jvp_batch
    batch_rules[custom_vjp_call_p] = _custom_vjp_batch
    batch_rules[custom_lin_p] = _raise_fwd     # JAX: ad.raise_custom_vjp_error_on_jvp


_register_batch_rules()


# --------------------------------------------------------------------------
# the builder API

def _flat(out):
    return (list(out), True) if isinstance(out, (tuple, list)) else ([out], False)


def _types_of(xs):
    return [x.type if isinstance(x, (Tracer, Zero)) else to_atom(x).type for x in xs]


def _trace_body(fn, args):
    with building() as b:
        ins = [b.new_input(a.type) for a in args]
        outs, multiple = _flat(fn(*ins))
        return b.build(ins, outs, input_names=None), multiple


def _check_traced(args, what):
    for i, a in enumerate(args):
        if not isinstance(a, Tracer):
            raise TypeError(f"{what}: argument {i} must be a traced array, got {type(a).__name__}")


def _fn_name(fn, default):
    return getattr(fn, "__name__", default)


def _check_num_consts(num_consts, args, what):
    if isinstance(num_consts, bool) or not isinstance(num_consts, int) or not 0 <= num_consts <= len(args):
        raise TypeError(f"{what}: num_consts must be an int in 0..{len(args)} (the number of leading "
                        f"closed-over values among the arguments), got {num_consts!r}")


def custom_jvp(fn: Callable, jvp_fn: Callable, *, symbolic_zeros: bool = False, num_consts: int = 0):
    """jax.custom_jvp(fn) with fn.defjvp(jvp_fn): returns a function that
    applies `fn` as one custom_jvp_call equation.

    `jvp_fn(primals, tangents)` (tuples) returns (primal outs, tangent outs)
    in fn's output structure. Tangents of unperturbed inputs are zeros
    (instantiated), or, with `symbolic_zeros`, `spec.Zero` values; a tangent
    output may be a `spec.Zero` (or None): a symbolic zero.

    With `num_consts`, the first num_consts arguments are values the
    function closes over (JAX's consts): `fn` takes them first, as it
    takes the others, and the rule is `jvp_fn(consts, primals, tangents)`
    with the consts' values only: their tangents are dropped, as JAX's
    lift_jvp drops them (a closed-over value is not differentiated through).

    The custom_jvp_call equation evaluates `jaxpr` (the rule is never run);
    its JVP is the user's rule `jvp`, traced lazily per set of perturbed
    inputs."""
    name = _fn_name(fn, "custom_jvp")
    nc = num_consts

    traced: dict = {}   # input types -> (body, multiple, rule): a rule calling the function reuses it

    def apply(args, body, multiple, rule):
        outs = bind(custom_jvp_call_p, *args, jaxpr=body, jvp=rule, num_consts=nc or None,
                    symbolic_zeros=symbolic_zeros, name=name)
        return tuple(outs) if multiple else outs[0]

    def wrapped(*args):
        _check_traced(args, f"custom_jvp {name}")
        _check_num_consts(nc, args, f"custom_jvp {name}")
        key = tuple(a.type for a in args)
        if key in traced:
            return apply(args, *traced[key])
        body, multiple = _trace_body(fn, args)
        types = body.in_types

        def trace(flags):
            nonzeros = flags[nc:]          # the consts' flags: their tangents are never given
            with building() as b:
                consts = [b.new_input(t) for t in types[:nc]]
                primals = [b.new_input(t) for t in types[nc:]]
                tangents = [b.new_input(t) if nz else Zero(t) for t, nz in zip(types[nc:], nonzeros)]
                pair = (jvp_fn(tuple(consts), tuple(primals), tuple(tangents)) if nc
                        else jvp_fn(tuple(primals), tuple(tangents)))
                if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                    raise TypeError(f"Custom JVP rule {_fn_name(jvp_fn, 'jvp')} for function {name} must "
                                    f"produce a pair (list or tuple of length two) representing primal "
                                    f"and tangent outputs, but got {pair}.")
                outs, _ = _flat(pair[0])
                t_outs, _ = _flat(pair[1])
                if _types_of(outs) != body.out_types:
                    raise TypeError(f"Custom JVP rule {_fn_name(jvp_fn, 'jvp')} for function {name} must "
                                    f"produce primal outputs of types {body.out_types}, got {_types_of(outs)}")
                out_nz = [not (t is None or isinstance(t, Zero)) for t in t_outs]
                nz_t = [t for t, nz in zip(t_outs, out_nz) if nz]
                want = [t for t, nz in zip(body.out_types, out_nz) if nz]
                if _types_of(nz_t) != want:
                    raise TypeError("Custom JVP rule must produce primal and tangent outputs with "
                                    f"corresponding shapes and dtypes. Expected {want} but got {_types_of(nz_t)}.")
                ins = consts + primals + [t for t in tangents if not isinstance(t, Zero)]
                return b.build(ins, list(outs) + nz_t), out_nz
        rule = Rule(_fn_name(jvp_fn, "jvp"), trace, len(types), consts=nc)
        traced[key] = (body, multiple, rule)
        return apply(args, body, multiple, rule)
    wrapped.__name__ = name
    return wrapped


def _fwd_rule_pair(pair, body: Program, fwd_name: str, name: str) -> tuple[list, object]:
    """A custom_vjp fwd rule's answer checked, as JAX checks it: a pair of
    the primal outputs (the body's types) and the residuals."""
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise TypeError(f"Custom VJP fwd rule {fwd_name} for function {name} must produce a "
                        f"pair (list or tuple of length two) where the first element represents "
                        f"the primal output and the second element represents residuals, but "
                        f"instead of a pair the fwd rule {fwd_name} produced {pair}.")
    outs, _ = _flat(pair[0])
    if _types_of(outs) != body.out_types:
        raise TypeError(f"Custom VJP fwd rule {fwd_name} for function {name} must produce "
                        f"primal outputs of types {body.out_types}, got {_types_of(outs)}")
    return outs, pair[1]


def _residual_structure(res) -> tuple[str, list]:
    """A fwd rule's residuals: their container's kind (none, tuple, list or
    a single array) and the arrays."""
    kind = "none" if res is None else ("tuple" if isinstance(res, tuple) else
                                       "list" if isinstance(res, list) else "single")
    return kind, [] if res is None else (list(res) if kind in ("tuple", "list") else [res])


def _bwd_rule_cotangents(cts_in, n_args: int) -> tuple:
    """A custom_vjp bwd rule's answer checked, as JAX checks it: one
    cotangent per argument of the primal function, a tuple (or list)."""
    if isinstance(cts_in, list):
        cts_in = tuple(cts_in)
    if not isinstance(cts_in, tuple) or len(cts_in) != n_args:
        raise TypeError(f"Custom VJP bwd rule must produce an output with the same container "
                        f"(pytree) structure as the args tuple of the primal function, "
                        f"and in particular must produce a tuple of length equal to the "
                        f"number of arguments to the primal function ({n_args}), "
                        f"but got {cts_in!r}.")
    return cts_in


def custom_vjp(fn: Callable, fwd_fn: Callable, bwd_fn: Callable, *, symbolic_zeros: bool = False,
               optimize_remat: bool = False, num_consts: int = 0):
    """jax.custom_vjp(fn) with fn.defvjp(fwd_fn, bwd_fn): returns a function
    that applies `fn` as one custom_vjp_call equation.

    `fwd_fn(*primals)` returns (outs, residuals) (residuals: an array, a
    tuple/list of arrays, or None); with `symbolic_zeros` each argument is a
    `CustomVJPPrimal(value, perturbed)`. `bwd_fn(residuals, cts)` returns
    one cotangent per argument (None: zero); with `symbolic_zeros` an output
    cotangent may be a `spec.Zero`.

    The custom_vjp_call equation evaluates `jaxpr` (the rules are never
    run); forward-mode differentiation of it is an error (see its JVP).
    With `optimize_remat` the forward rule is one remat_opt equation
    (spec/prims_remat_opt.py), as `defvjp(..., optimize_remat=True)` makes it.

    With `num_consts`, the first num_consts arguments are values the
    function closes over (JAX's consts): `fn` takes them first, the forward
    rule is `fwd_fn(consts, *primals)` and `bwd_fn` returns cotangents of
    the other arguments only; differentiating with respect to a const
    raises JAX's CustomVJPException (lift_fwd)."""
    if symbolic_zeros and optimize_remat:
        raise NotImplementedError("remat optimization for custom_vjp does not support symbolic zeros")
    if num_consts and optimize_remat:
        raise PrimitiveError(custom_vjp_call_p, f"optimize_remat=True with num_consts={num_consts} is not "
                                                f"modelled (supported: either one alone)")
    name = _fn_name(fn, "custom_vjp")
    traced: dict = {}   # input types -> (body, multiple, fwd rule, bwd rule)

    def wrapped(*args):
        _check_traced(args, f"custom_vjp {name}")
        _check_num_consts(num_consts, args, f"custom_vjp {name}")
        key = tuple(a.type for a in args)
        if key not in traced:
            body, multiple = _trace_body(fn, args)
            rules = _VJPRules(fwd_fn, bwd_fn, body, multiple, num_consts, symbolic_zeros, optimize_remat, name)
            traced[key] = body, multiple, rules.fwd_rule(), rules.bwd_rule()
        body, multiple, fwd, bwd = traced[key]
        outs = bind(custom_vjp_call_p, *args, jaxpr=body, fwd=fwd, bwd=bwd, num_consts=num_consts or None,
                    symbolic_zeros=symbolic_zeros, name=name)
        return tuple(outs) if multiple else outs[0]
    wrapped.__name__ = name
    return wrapped


@dataclass
class _VJPRules:
    """The forward and backward rules of one custom_vjp function at one
    input type, traced lazily from the user's `fwd_fn` and `bwd_fn` (JAX's
    `fwd_jaxpr_thunk` and `bwd`). The backward rule reads the residuals in
    the structure the forward rule returned them in (traced first)."""
    fwd_fn: Callable
    bwd_fn: Callable
    body: Program
    multiple: bool
    num_consts: int
    symbolic_zeros: bool
    optimize_remat: bool
    name: str
    res_kind: str | None = None      # "none", "tuple", "list" or "single", once fwd is traced
    res_types: list = field(default_factory=list)

    def fwd_rule(self) -> "Rule":
        return Rule(_fn_name(self.fwd_fn, "fwd"), self.trace_fwd, len(self.body.in_types), consts=self.num_consts)

    def bwd_rule(self) -> "Rule":
        return Rule(_fn_name(self.bwd_fn, "bwd"), self.trace_bwd, len(self.body.outputs))

    def trace_fwd(self, flags):
        """fwd(consts, primals) -> outs + residuals; flags: which inputs are perturbed."""
        nc, body = self.num_consts, self.body
        if any(flags[:nc]):
            raise CustomVJPException()   # lift_fwd: `if any(const_nonzeros): raise ...`
        with building() as b:
            consts = [b.new_input(t) for t in body.in_types[:nc]]
            primals = [b.new_input(t) for t in body.in_types[nc:]]
            given = [CustomVJPPrimal(p, nz) for p, nz in zip(primals, flags[nc:])] \
                if self.symbolic_zeros else primals
            outs, res = _fwd_rule_pair(self.fwd_fn(tuple(consts), *given) if nc else self.fwd_fn(*given),
                                       body, _fn_name(self.fwd_fn, "fwd"), self.name)
            self.res_kind, res_list = _residual_structure(res)
            self.res_types = _types_of(res_list)
            fwd = b.build(consts + primals, list(outs) + res_list)
        return (optimized_fwd(fwd, len(outs), body) if self.optimize_remat else fwd), [True] * len(outs)

    def trace_bwd(self, ct_nonzeros):
        """bwd(residuals, cts) -> the nonzero cotangents of the (non-const) arguments."""
        types = self.body.in_types[self.num_consts:]      # bwd gives the consts no cotangent
        if self.res_kind is None:
            self.trace_fwd((False,) * self.num_consts + (True,) * len(types))
        with building() as b:
            res = [b.new_input(t) for t in self.res_types]
            cts = [b.new_input(t) if nz else Zero(t) for t, nz in zip(self.body.out_types, ct_nonzeros)]
            kind = self.res_kind
            py_res = None if kind == "none" else tuple(res) if kind == "tuple" else res if kind == "list" else res[0]
            cts_in = _bwd_rule_cotangents(self.bwd_fn(py_res, tuple(cts) if self.multiple else cts[0]), len(types))
            out_nz = [not (c is None or isinstance(c, Zero)) and is_differentiable(t)
                      for c, t in zip(cts_in, types)]
            nz = [c for c, k in zip(cts_in, out_nz) if k]
            want = [t for t, k in zip(types, out_nz) if k]
            if _types_of(nz) != want:
                raise ValueError(f"Custom VJP bwd rule must produce an output with the same type as "
                                 f"the args tuple of the primal function: expected {want}, got {_types_of(nz)}")
            return b.build(res + [c for c in cts if not isinstance(c, Zero)], nz), out_nz



# --------------------------------------------------------------------------
# tie: custom_vjp's JVP in releases before stackless (jax 0.4.25's
# _custom_vjp_call_jaxpr_jvp: `tangents_out = map(lax.tie_p.bind,
# primals_out, tangents_out)`) ties each output tangent to its primal
# output, so that the tangent depends on the primal computation

tie_p = primitive("tie")
jax_facts[tie_p] = JaxFacts("tie", "lambda x, y: lax_internal.tie_p.bind(x, y)")


def tie(x, y):
    """lax.tie_p: y, with x a dependency only (its value is not read)."""
    return bind(tie_p, x, y)


class VectorizedBatchingError(AxesRefused, AssertionError):
    """batching.vectorized_batcher's refusal: its bare AssertionError, whose
    message is the batch dims (a BatchingError here too)."""


def _tie_batch(args, dims):
    """batching.defvectorized (vectorized_batcher): both operands batched
    along the same axis, which JAX asserts (`assert all(batch_dims[0] == bd
    for bd in batch_dims[1:]), batch_dims`: one unbatched, or batched along
    another axis, raises its bare AssertionError, word for word here)."""
    if dims[0] != dims[1]:
        raise VectorizedBatchingError(tuple(dims))
    return tie(*args), dims[0]


shape_rules[tie_p] = lambda x, y: [y]
eval_rules[tie_p] = lambda x, y: y
# lax.py: `ad.primitive_jvps[tie_p] = lambda primals, tangents: (tie_p.bind(*primals), tangents[-1])`
jvp_rules[tie_p] = lambda primals, tangents: (tie(*primals), tangents[-1])
# lax.py: `ad.primitive_transposes[tie_p] = lambda ct, x, _: [None, ct]`
transpose_rules[tie_p] = lambda ct, x, y: [None, ct]
batch_rules[tie_p] = _tie_batch
cost_rules[tie_p] = lambda x, y: 0
examples[tie_p] = [
    Example("tie-to-a-product", (((3,), "f32", "normal"), ((3,), "f32", "normal")),
            lambda x, y: tie(x * x, y), lambda x, y: y, linear=((False, True),)),
]
