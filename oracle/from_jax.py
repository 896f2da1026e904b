"""JAX -> spec: convert a closed jaxpr into a spec Program.

Every spec primitive is covered with its params; `jit` becomes `call`;
`cond` and `while` keep their branches / cond and body jaxprs as
sub-programs; remat2 (`remat2`) and remat3 (`call_hi_primitive` with RematTraced /
CheckpointName) both become the spec's `remat` / `name`; literals and
constants become spec literals. A JAX checkpoint policy becomes a spec
policy (see oracle/policies.py). Anything else raises `Unsupported` naming
the primitive, where it occurs, and what is supported.
"""
from __future__ import annotations

import contextvars
from typing import NamedTuple

import numpy as np

import spec
from spec.core import primitives as SPEC_PRIMS
from spec.ir import ArrayType, Eqn, Literal, Program, Var, as_constvar, is_key

from oracle.conventions import spec_value_of
from oracle.jax_api import internals as jx
from oracle.jax_api.capabilities import capabilities
from oracle.errors import InvalidArgument, Unsupported
from oracle.jax_params import spec_params, spec_type, supported_primitives  # noqa: F401 (re-exported)
from oracle.policies import from_jax_policy
from spec.prims_custom import Rule
from spec.prims_linear_solve import LinearSolveTuple


def _location(eqn) -> str:
    try:
        here = jx.source_summary(eqn.source_info)
    except Exception:   # source info is best-effort: never hide the real error
        return ""
    return "" if not here or here.startswith("unknown") else here


def _where(eqn, enclosing: str = "") -> str:
    """Where an equation comes from in the user's code. An equation inside
    a library's jitted function (e.g. jnp.cumsum) has no user frame of its
    own: then the enclosing user-level equation is named instead."""
    here = _location(eqn)
    if here:
        return f" (at {here})"
    return f" (inside {enclosing})" if enclosing else ""


# The constants met while converting one program, by the identity of JAX's
# const array: JAX makes one constvar of one array object, in whichever
# jaxprs close over it (a jit's and the one around it), and forwards it by
# that identity (ad.linearize_jaxpr's `id_map`), so one array is one spec
# constant throughout.
_CONSTANTS: contextvars.ContextVar = contextvars.ContextVar("constants", default=None)

# Where the equations being converted were staged, which decides what a
# custom rule that closes over a traced value does (`_rule_closure`):
#   "direct"  the function as written (the top level of the jaxpr oracle.check
#             traces with oracle.AS_IS, and the rules of its custom functions):
#             JAX differentiates it by calling the rules themselves, whose
#             closed-over tracers are live;
#   "staged"  inside a jaxpr JAX staged (a checkpoint, scan, cond or while body):
#             the rule is traced later, when the tracer it closes over is stale;
#   "jit"     the same, inside a jitted function.
_STAGING: contextvars.ContextVar = contextvars.ContextVar("staging", default="direct")
# The constvars of the jaxpr being converted: id(var) -> (var, JAX's value
# for it), for matching a rule's closed-over tracer to a const operand.
_BOUND: contextvars.ContextVar = contextvars.ContextVar("bound", default=None)


def from_jaxpr(closed_jaxpr, input_names=None, _enclosing: str = "", _lead=()) -> Program:
    """Convert a ClosedJaxpr (or Jaxpr without consts) to a spec Program.
    (`_lead`: (types, {constvar position: lead position}): leading inputs
    of these types, which the mapped constvars read.)"""
    if _CONSTANTS.get() is not None:
        return _from_jaxpr(closed_jaxpr, input_names, _enclosing, _lead)
    token = _CONSTANTS.set({})
    try:
        return _from_jaxpr(closed_jaxpr, input_names, _enclosing, _lead)
    finally:
        _CONSTANTS.reset(token)


def _constant(c, aval) -> Literal:
    """The spec constant for JAX's const array `c` (one per array object)."""
    t = spec_type(aval)
    seen = _CONSTANTS.get()
    key = (id(c), t)
    if isinstance(c, jx.core().Tracer):
        raise InvalidArgument(
            f"the function closes over a traced value ({aval.str_short()}) that escaped the transformation "
            "that made it (a value saved from an earlier call into a Python variable, say): its jaxpr holds "
            "a tracer as a constant, which jax.jit rejects with UnexpectedTracerError; pass the value as an "
            "argument, or compute it inside the function")
    if key not in seen:
        value = spec_value_of(c) if is_key(t.dtype) else np.asarray(c, dtype=t.dtype)   # a closed-over key
        if np.ndim(c) == 0 and not is_key(t.dtype):     # a jaxpr constvar: a constant, though 0-d
            value = as_constvar(np.array(value))
        seen[key] = (c, Literal(value, ArrayType(np.shape(c), t.dtype)))   # c kept alive: ids stay unique
    return seen[key][1]


def _from_jaxpr(closed_jaxpr, input_names, _enclosing, _lead=()) -> Program:
    jcore = jx.core()
    jaxpr = closed_jaxpr.jaxpr if hasattr(closed_jaxpr, "consts") else closed_jaxpr
    consts = list(closed_jaxpr.consts) if hasattr(closed_jaxpr, "consts") else []
    env: dict = {}

    def read(x):
        if isinstance(x, jcore.Literal):
            t = spec_type(x.aval)
            return Literal(np.asarray(x.val, dtype=t.dtype), ArrayType(t.shape, t.dtype))
        return env[x]

    lead_types, lead_of = _lead if _lead else ((), {})
    inputs = [Var(t) for t in lead_types]
    for i, (v, c) in enumerate(zip(jaxpr.constvars, consts)):
        env[v] = inputs[lead_of[i]] if i in lead_of else _constant(c, v.aval)
    for v in jaxpr.invars:
        nv = Var(spec_type(v.aval))
        env[v] = nv
        inputs.append(nv)
    eqns = []
    token = _BOUND.set({id(v): (v, c) for v, c in zip(jaxpr.constvars, consts)})
    try:
        for e in jaxpr.eqns:
            ins = [read(x) for x in e.invars]
            prim, params = _convert_eqn(e, _enclosing)
            outs = [Var(spec_type(v.aval)) for v in e.outvars]
            for v, nv in zip(e.outvars, outs):
                env[v] = nv
            eqns.append(Eqn(prim, ins, outs, params))
    finally:
        _BOUND.reset(token)
    outputs = [read(x) for x in jaxpr.outvars]
    names = tuple(input_names) if input_names else None
    if names is None:
        arg_names = jx.arg_names(jaxpr)
        if arg_names and len(arg_names) == len(inputs) and all(arg_names):
            names = tuple(arg_names)
    prog = Program(inputs, eqns, outputs, input_names=names)
    try:
        spec.check_program(prog)
    except spec.PrimitiveError as e:    # a use of a primitive the spec's rule refuses
        raise Unsupported(f"{e}{_where_any(jaxpr, _enclosing)}; the spec models the forms listed in "
                          f"docs/rules.md") from None
    return prog


def _where_any(jaxpr, enclosing) -> str:
    """Where the first equation of `jaxpr` with a user location comes from."""
    for e in jaxpr.eqns:
        here = _location(e)
        if here:
            return f" (in the function at {here})"
    return f" (inside {enclosing})" if enclosing else ""


def _convert_eqn(e, enclosing=""):
    name = jx.canonical_eqn(e.primitive.name, dict(e.params), [v.aval for v in e.invars])[0]
    staging = _STAGING.get()
    token = _STAGING.set("jit" if name == "jit" or staging == "jit" else "staged")   # for its sub-jaxprs
    try:
        return _convert_eqn_staged(e, enclosing, staging)
    finally:
        _STAGING.reset(token)


def _convert_eqn_staged(e, enclosing, staging):
    where = _where(e, enclosing)
    name, params = jx.canonical_eqn(e.primitive.name, dict(e.params), [v.aval for v in e.invars])
    here = _location(e)
    label = f"jitted function '{params['name']}'" if name == "jit" else f"a {name}"
    inner = f"{label} at {here}" if here else (f"{label} inside {enclosing}" if enclosing else label)
    if name == "jit":
        body = from_jaxpr(params["jaxpr"], _enclosing=inner)
        return SPEC_PRIMS["call"], dict(jaxpr=body, name=str(params["name"]))
    if name == "remat2":
        if isinstance(params["prevent_cse"], (tuple, list)) and not capabilities().per_argument_prevent_cse:
            raise Unsupported(f"checkpoint{where}: prevent_cse={params['prevent_cse']!r} per argument is not an "
                              f"API of jax {capabilities().version} (a bool is; per-argument flags from jax 0.7.2)")
        body = from_jaxpr(params["jaxpr"], _enclosing=inner)
        return SPEC_PRIMS["remat"], dict(jaxpr=body, policy=from_jax_policy(params["policy"]),
                                         prevent_cse=params["prevent_cse"],
                                         differentiated=params["differentiated"])
    if name == "scan":
        p = params
        body = from_jaxpr(p["jaxpr"], _enclosing=inner)
        extra = sorted(set(p) - {"jaxpr", "length", "reverse", "num_consts", "num_carry", "unroll",
                                 "_split_transpose"})
        if extra or p.get("_split_transpose", False):
            raise Unsupported(f"scan{where}: params {extra or ['_split_transpose=True']} are not supported "
                              f"(the spec models jaxpr, length, reverse, num_consts, num_carry, unroll)")
        return SPEC_PRIMS["scan"], dict(jaxpr=body, length=int(p["length"]), reverse=bool(p["reverse"]),
                                        num_consts=int(p["num_consts"]), num_carry=int(p["num_carry"]),
                                        unroll=p["unroll"])
    if name == "closed_call":
        body = from_jaxpr(params["call_jaxpr"], _enclosing=inner)
        return SPEC_PRIMS["call"], dict(jaxpr=body, name=None)
    if name == "cond":
        # branches_platforms (lax.platform_dependent) only tells the lowering which
        # branches a platform needs (conditionals.py, _cond_lowering); the index,
        # platform_index's, chooses among them as any cond's does
        extra = {k: v for k, v in params.items() if k not in ("branches", "branches_platforms") and v is not None}
        if extra:
            raise Unsupported(f"cond{where}: param(s) {sorted(extra)} not supported "
                              f"(the spec models ['branches'])")
        branches = tuple(from_jaxpr(b, _enclosing=f"{inner} branch {i}")
                         for i, b in enumerate(params["branches"]))
        return SPEC_PRIMS["cond"], dict(branches=branches)
    if name == "remat_opt":
        jaxpr, consts = params["fun_jaxpr_thunk"]()
        return SPEC_PRIMS["remat_opt"], dict(
            num_consts=int(params["num_consts"]), num_res=int(params["num_res"]),
            fwd_jaxpr=from_jaxpr(params["fwd_jaxpr"], _enclosing=inner),
            fun_jaxpr=from_jaxpr(jx.core().ClosedJaxpr(jaxpr, consts), _enclosing=inner))
    if name == "custom_linear_solve":
        jaxprs = params["jaxprs"]
        return SPEC_PRIMS["custom_linear_solve"], dict(
            const_lengths=LinearSolveTuple(*(int(n) for n in params["const_lengths"])),
            jaxprs=LinearSolveTuple(*(None if j is None else from_jaxpr(j, _enclosing=f"{inner} {field}")
                                      for field, j in zip(LinearSolveTuple._fields, jaxprs))))
    if name == "while":
        return SPEC_PRIMS["while"], dict(
            cond_jaxpr=from_jaxpr(params["cond_jaxpr"], _enclosing=inner),
            body_jaxpr=from_jaxpr(params["body_jaxpr"], _enclosing=inner),
            cond_nconsts=int(params["cond_nconsts"]), body_nconsts=int(params["body_nconsts"]))
    if name == "reduce_window":
        window = {k: v for k, v in params.items() if k not in ("jaxpr", "consts")}
        body = from_jaxpr(jx.core().ClosedJaxpr(params["jaxpr"], list(params["consts"])), _enclosing=inner)
        return spec_params(name, dict(jaxpr=body, **window), where)
    if name == "call_hi_primitive":
        hi = params["_prim"]
        kind = type(hi).__name__
        if kind == "RematTraced":
            body = from_jaxpr(hi.jaxpr, _enclosing=inner)
            return SPEC_PRIMS["remat"], dict(jaxpr=body, policy=from_jax_policy(hi.policy),
                                             prevent_cse=getattr(hi, "prevent_cse", True),
                                             differentiated=False)
        if kind in ("CheckpointName", "CheckpointNameFwd"):
            return SPEC_PRIMS["name"], dict(name=hi.name)
        raise Unsupported(f"call_hi_primitive {kind}{where} is not supported; supported: RematTraced, CheckpointName")
    if name in ("custom_jvp_call", "custom_vjp_call"):
        return _convert_custom(name, params, inner, where, e.invars, staging)
    return spec_params(name, params, where)


def _zero_tangents_inlined(prog: Program, n_primals: int, asked, nonzeros) -> Program:
    """A rule program traced with tangent inputs for `asked`, taking those for
    `nonzeros` only: each other tangent is a zero literal of its type (the
    instantiated zero JAX passes)."""
    if list(asked) == list(nonzeros):
        return prog
    tangents = iter(prog.inputs[n_primals:])
    zeros, kept = {}, list(prog.inputs[:n_primals])
    for a, nz in zip(asked, nonzeros):
        if a:
            v = next(tangents)
            if nz:
                kept.append(v)
            else:
                zeros[v.id] = Literal(np.zeros(v.type.shape, v.type.dtype), v.type)
    read = lambda x: zeros.get(x.id, x) if isinstance(x, Var) else x
    eqns = [Eqn(e.primitive, [read(x) for x in e.inputs], e.outputs, e.params, why=e.why) for e in prog.eqns]
    return Program(kept, eqns, [read(x) for x in prog.outputs], input_names=None)


# mlir's error for a tracer among a jaxpr's constants, word for word
# (jax/_src/interpreters/mlir.py, ir_constant)
NO_CONSTANT_HANDLER = "No constant handler for type: {}"
STALE_TRACER_ISSUE = "https://github.com/jax-ml/jax/issues/20889"


def _source_index(tracer, sources) -> int | None:
    """Which const operand of the equation the rule's closed-over `tracer`
    is: the tracer of that operand's variable (`tracer.val`, the jaxpr
    variable JAX traced it as), or the value the enclosing jaxpr binds
    that operand's constvar to."""
    val = getattr(tracer, "val", None)
    for i, (var, bound) in enumerate(sources):
        if bound is tracer or (val is not None and val is var):
            return i
    return None


def _rule_closure(consts, sources, here, perturbed, rule: str) -> tuple[list, dict]:
    """The consts of a rule's jaxpr, with those that are tracers (values the
    rule closes over, traced when the custom function was) resolved:
    (consts, {constvar position: const operand it reads}).

    Where JAX calls the rule itself (`here` == "direct": the function as
    written) the tracer is live: the rule reads the equation's const operand
    of that tracer (a constant's tracer: its value). A perturbed one is
    Unsupported: JAX's rule closes over a JVPTracer and leaks it (an
    UnexpectedTracerError, or a tracer among the constants of the jaxpr JAX
    compiles). Where JAX staged the equation (a checkpoint, scan, cond or
    while body, or a jit), the rule is traced when the custom function's
    trace is over and the tracer is stale (jax-ml/jax#20889): in a jitted
    function it becomes a constant of that jit's jaxpr, whose lowering
    raises mlir's TypeError (raised here, as JAX raises it); elsewhere it
    leaks into the jaxpr of the whole function, which fails (or not) as that
    function is run: Unsupported."""
    jcore = jx.core()
    out, lead = [], {}
    for i, c in enumerate(consts):
        if not isinstance(c, jcore.Tracer):
            out.append(c)
            continue
        j = _source_index(c, sources) if here == "direct" else None
        literal = getattr(c, "val", None)
        if j is not None and not perturbed[j]:
            lead[i] = j
            out.append(None)
            continue
        if here == "direct" and isinstance(literal, jcore.Literal) and j is None:
            out.append(np.asarray(literal.val))          # a constant's tracer, live: its value
            continue
        aval = getattr(c, "aval", None)
        what = f"a traced {aval.str_short() if aval is not None else 'value'}"
        if j is not None:
            raise Unsupported(
                f"{rule} closes over {what} that is differentiated (the custom "
                f"function's closed-over value {j} has a nonzero tangent): JAX's rule closes over "
                f"a JVPTracer and leaks it (an UnexpectedTracerError, or a tracer among the "
                f"constants of the jaxpr it compiles), which the spec does not model; pass the "
                f"value to the custom function as an argument (num_consts counts the values it "
                f"closes over)")
        if here == "jit":
            raise TypeError(NO_CONSTANT_HANDLER.format(type(c)))
        raise Unsupported(
            f"{rule} closes over {what} of a trace that is over ("
            + ("not a closed-over value of the custom function (num_consts) given to the rule"
               if here == "direct" else "the custom function was staged out: a checkpoint, scan, "
               "cond or while body, traced before the rule") +
            f"): JAX leaks that tracer into the jaxpr it differentiates ({STALE_TRACER_ISSUE}), "
            f"an error or not as the jaxpr is run, which the spec does not model; pass the value "
            f"to the custom function as an argument")
    return out, lead


def _rule_program(jaxpr, consts, lead_types, sources, here, perturbed, rule, inner) -> Program:
    """A rule's jaxpr as a spec program taking the equation's consts first
    (those the rule closes over are read from there) and the jaxpr's
    inputs, converted where the equation was staged (`here`)."""
    consts, lead = _rule_closure(consts, sources, here, perturbed, rule)
    token = _STAGING.set(here)
    try:
        return from_jaxpr(jx.core().ClosedJaxpr(jaxpr, consts), _enclosing=inner, _lead=(lead_types, lead))
    finally:
        _STAGING.reset(token)


class _CustomCall(NamedTuple):
    """What the rules of one custom_jvp_call / custom_vjp_call equation are
    converted with."""
    body: Program            # the primal body
    fname: str               # the custom function's name
    symbolic_zeros: bool
    num_consts: int          # leading operands: values the function closes over
    sources: list            # (jaxpr var, where it was bound) of each const
    where: str               # where the equation is, for messages
    here: str                # where it was staged ("direct", "staged", "jit")
    inner: str               # the enclosing description, for nested conversions

    @property
    def const_types(self) -> list:
        return self.body.in_types[:self.num_consts]

    def rule_program(self, jaxpr, consts, perturbed, rule_name) -> Program:
        return _rule_program(jaxpr, consts, self.const_types, self.sources, self.here, perturbed, rule_name,
                             self.inner)


def _convert_custom(name: str, p: dict, inner: str, where: str, invars=(), here: str = "staged"):
    """custom_jvp_call / custom_vjp_call: the primal body, and the rules as
    spec Rules that trace JAX's lazily (`jvp_jaxpr_fun(*in_zeros)`,
    `fwd_jaxpr_thunk(*nonzeros)`, and `bwd` traced with jax.make_jaxpr at
    the residuals' and cotangents' avals), converted on first use.

    `num_consts` leading operands are values the custom function closes over
    (JAX's lift_jvp / lift_fwd drop them before calling the rules); a rule
    program takes them first, reading those the rule closes over (see
    `_rule_closure`). A key's first num_consts flags say which consts are
    perturbed: the forward rule of a custom_vjp_call raises JAX's
    CustomVJPException for one (lift_fwd)."""
    known = {"call_jaxpr", "num_consts", "symbolic_zeros", "jvp_jaxpr_fun", "fwd_jaxpr_thunk", "bwd", "out_trees"}
    extra = sorted(set(p) - known)
    if extra:
        raise Unsupported(f"{name}{where}: param(s) {extra} not supported (the spec models {sorted(known)})")
    nc = int(p.get("num_consts", 0) or 0)
    bound = _BOUND.get() or {}
    call = _CustomCall(from_jaxpr(p["call_jaxpr"], _enclosing=inner), jx.func_name(p["call_jaxpr"], "fun"),
                       bool(p["symbolic_zeros"]), nc,
                       [(v, bound.get(id(v), (None, None))[1]) for v in list(invars)[:nc]], where, here, inner)
    common = dict(num_consts=nc or None, symbolic_zeros=call.symbolic_zeros, name=call.fname)
    if name == "custom_jvp_call":
        return SPEC_PRIMS["custom_jvp_call"], dict(jaxpr=call.body, jvp=_jvp_rule(call, p["jvp_jaxpr_fun"]),
                                                   **common)
    fwd_rule = _fwd_rule(call, p["fwd_jaxpr_thunk"], p["out_trees"])
    return SPEC_PRIMS["custom_vjp_call"], dict(jaxpr=call.body, fwd=fwd_rule, bwd=_bwd_rule(call, p["bwd"], fwd_rule),
                                               **common)


def _float0_tangents_dropped(jaxpr, consts, n_primals: int, asked, out_zeros, rule: str):
    """A custom JVP rule's jaxpr without float0 tangents: JAX hands the rule
    a float0 zero as the tangent of each integer argument and takes one back
    for each integer output (jax.dtypes.float0), where the spec's tangent of
    an integer is a symbolic zero. So a float0 tangent input the rule does
    not read is no input (`asked` False for it: jnp.ldexp's exponent), and
    a float0 tangent output is a zero (`out_zeros` True: jnp.frexp's
    exponent); the jaxpr is DCE'd of what only those outputs read (a
    float0 zero constant, on releases that close over one, included). A
    rule that reads a float0 tangent is refused."""
    in_float0 = [jx.is_float0(v.aval) for v in jaxpr.invars]
    out_float0 = [jx.is_float0(v.aval) for v in jaxpr.outvars]
    if not any(in_float0) and not any(out_float0):
        return jaxpr, consts, asked, out_zeros
    jaxpr, used = jx.partial_eval().dce_jaxpr(jaxpr, [not f for f in out_float0],
                                              instantiate=[not f for f in in_float0])
    read = {id(a) for e in jaxpr.eqns for a in e.invars} | {id(a) for a in jaxpr.outvars}
    kept = [(v, c) for v, c in zip(jaxpr.constvars, consts) if id(v) in read]
    jaxpr = jaxpr.replace(constvars=[v for v, _ in kept])
    consts = [c for _, c in kept]
    if any(f and u for f, u in zip(in_float0, used)):
        raise Unsupported(f"{rule} reads the float0 tangent of an integer argument, which the spec does "
                          f"not model (its tangent of an integer is a symbolic zero)")
    dropped = iter(in_float0[n_primals:])
    asked = [a and not next(dropped) for a in asked]
    dropped = iter(out_float0[len(out_zeros):])
    out_zeros = [z or next(dropped) for z in out_zeros]
    return jaxpr, consts, asked, out_zeros


def _jvp_rule(call: _CustomCall, fun) -> Rule:
    """A custom_jvp_call's JVP rule: `fun` (jvp_jaxpr_fun) traced per key."""
    rule_name = f"custom_jvp_call {call.fname}{call.where}: its JVP rule {jx.func_name(fun, 'jvp')}"
    nc = call.num_consts

    def trace_jvp(key):
        perturbed, nonzeros = key[:nc], key[nc:]
        asked = list(nonzeros)
        if not call.symbolic_zeros and capabilities().custom_jvp_int_tangents_typed:
            # JAX instantiates every zero tangent before calling such a rule
            # (ad.process_custom_jvp_call), so it only ever asks the thunk for
            # none; this release's thunk asked for a zero hands the rule a
            # SymbolicZero (found by the model suite on 0.4.25: logaddexp)
            asked = [True] * len(nonzeros)
        jaxpr, consts, out_zeros = jx.call(fun, *[not nz for nz in asked])
        jaxpr, consts, asked, out_zeros = _float0_tangents_dropped(jaxpr, consts, len(nonzeros), asked, out_zeros,
                                                                   rule_name)
        prog = call.rule_program(jaxpr, consts, perturbed, rule_name)
        return (_zero_tangents_inlined(prog, len(key), asked, nonzeros),     # consts and primals first
                [not z for z in out_zeros])
    return Rule(jx.func_name(fun, "jvp"), trace_jvp, len(call.body.inputs), consts=nc)


def _fwd_rule(call: _CustomCall, thunk, out_trees) -> Rule:
    """A custom_vjp_call's forward rule: `thunk` (fwd_jaxpr_thunk) traced
    per key, its residuals forwarded from its inputs as JAX's out_trees say."""
    fwd_name = f"custom_vjp_call {call.fname}{call.where}: its forward rule {jx.func_name(thunk, 'fwd')}"
    nc, n_out = call.num_consts, len(call.body.outputs)

    def trace_fwd(key):
        perturbed, nonzeros = key[:nc], key[nc:]
        if any(perturbed) and call.here != "direct":
            # lift_fwd: `if any(const_nonzeros): raise ad.CustomVJPException()`; where JAX
            # calls fwd itself (the function as written) there is no lift_fwd: the consts'
            # tangents are dropped, as a custom_jvp_call's are
            from jax._src.interpreters import ad
            raise ad.CustomVJPException()
        jaxpr, consts = jx.call(thunk, *nonzeros)
        prog = call.rule_program(jaxpr, consts, perturbed, fwd_name)
        _, res_tree, input_fwds = jx.out_trees(out_trees)
        n_pruned = len(prog.outputs) - n_out
        pruned = iter(prog.outputs[:n_pruned])
        # input_fwds count the consts (process_custom_vjp_call's out_trees_ adds num_consts)
        res = [next(pruned) if f is None else prog.inputs[f] for f in input_fwds]
        return Program(prog.inputs, prog.eqns, prog.outputs[n_pruned:] + res), [True] * n_out
    return Rule(jx.func_name(thunk, "fwd"), trace_fwd, len(call.body.inputs), consts=nc)


def _bwd_rule(call: _CustomCall, bwd, fwd_rule: Rule) -> Rule:
    """A custom_vjp_call's backward rule: `bwd` traced with jax.make_jaxpr
    at the residuals' (of the forward rule traced last) and the nonzero
    cotangents' avals."""
    bwd_name = f"custom_vjp_call {call.fname}{call.where}: its backward rule {jx.func_name(bwd, 'bwd')}"
    body, n_out = call.body, len(call.body.outputs)

    def trace_bwd(ct_nonzeros):
        import jax
        from jax.custom_derivatives import SymbolicZero
        ad_util = jx.ad_util()
        # the residuals of the forward rule traced last (JAX's bwd reads out_trees() alike)
        nc = call.num_consts
        key = next(reversed(fwd_rule._memo), (False,) * nc + (True,) * (len(body.inputs) - nc))
        fwd_prog = fwd_rule(key)[0]
        res_types = fwd_prog.out_types[n_out:]
        # a residual the forward rule returns as a Python or numpy constant
        # reaches JAX's bwd concrete (measured on 0.10.2: a bool as a bool, a
        # float as a TypedFloat, np.float32 as a TypedNdArray): equinox's
        # filter_custom_vjp passes its `perturbed` flags so, and its bwd
        # filters with them. The bwd is traced with the value (a bool scalar
        # as a Python bool), the program's input for it left unread
        known = [None if not isinstance(a, Literal) else a.value.item() if a.value.shape == ()
                 and a.value.dtype == np.bool_ else a.value for a in fwd_prog.outputs[n_out:]]
        avals = [jax.ShapeDtypeStruct(t.shape, t.dtype) for t in res_types] + [
            jax.ShapeDtypeStruct(t.shape, t.dtype) for t, k in zip(body.out_types, ct_nonzeros) if k]
        pattern = []

        def f(*args):
            res, given = args[:len(res_types)], iter(args[len(res_types):])
            res = [r if v is None else v for r, v in zip(res, known)]
            cts = [next(given) if k else (SymbolicZero(jax.core.ShapedArray(t.shape, t.dtype)) if call.symbolic_zeros
                                          else jax.numpy.zeros(t.shape, t.dtype))
                   for t, k in zip(body.out_types, ct_nonzeros)]
            outs = jx.call(bwd, *res, *cts)
            pattern[:] = [not isinstance(o, (ad_util.Zero, SymbolicZero)) for o in outs]
            return [o for o, k in zip(outs, pattern) if k]
        closed = jax.make_jaxpr(f)(*avals)
        # bwd is never given the consts: a tracer it closes over is read from none
        consts, _ = _rule_closure(list(closed.consts), [], call.here, (), bwd_name)
        token = _STAGING.set(call.here)
        try:
            prog = from_jaxpr(jx.core().ClosedJaxpr(closed.jaxpr, consts), _enclosing=call.inner)
        finally:
            _STAGING.reset(token)
        return prog, pattern
    return Rule(jx.func_name(bwd, "bwd"), trace_bwd, n_out)


def trace_jax(fn, *args) -> Program:
    """jax.make_jaxpr(fn)(*args), converted to a spec Program. Its inputs
    carry fn's argument names on every release: where the jaxpr keeps none
    (0.4.2x), the names saved_residuals gives them (fn's signature)."""
    import jax
    closed = jax.make_jaxpr(fn)(*args)
    names = None
    if jx.arg_names(closed.jaxpr) is None:
        names = jx.signature_names(fn, args, {})
    return from_jaxpr(closed, input_names=names)


def subjaxprs(eqn) -> list:
    """The jaxprs an equation holds (jit, scan, cond branches, while,
    custom rules' primal bodies, remat2 and remat3 checkpoint bodies)."""
    jcore = jx.core()
    out = []

    def add(v):
        if isinstance(v, jcore.ClosedJaxpr):
            out.append(v.jaxpr)
        elif isinstance(v, jcore.Jaxpr):
            out.append(v)
        elif isinstance(v, (tuple, list)):
            for x in v:
                add(x)
    for v in eqn.params.values():
        add(v)
    hi = eqn.params.get("_prim")
    if hi is not None and getattr(hi, "jaxpr", None) is not None:
        add(hi.jaxpr)
    return out
