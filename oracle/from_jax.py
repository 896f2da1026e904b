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

import numpy as np

import spec
from spec.core import primitives as SPEC_PRIMS
from spec.ir import ArrayType, Eqn, Literal, Program, Var, is_key

from oracle.conventions import spec_value_of
from oracle.jax_api import internals as jx
from oracle.jax_api.capabilities import capabilities
from oracle.errors import Unsupported
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


def from_jaxpr(closed_jaxpr, input_names=None, _enclosing: str = "") -> Program:
    """Convert a ClosedJaxpr (or Jaxpr without consts) to a spec Program."""
    if _CONSTANTS.get() is not None:
        return _from_jaxpr(closed_jaxpr, input_names, _enclosing)
    token = _CONSTANTS.set({})
    try:
        return _from_jaxpr(closed_jaxpr, input_names, _enclosing)
    finally:
        _CONSTANTS.reset(token)


def _constant(c, aval) -> Literal:
    """The spec constant for JAX's const array `c` (one per array object)."""
    t = spec_type(aval)
    seen = _CONSTANTS.get()
    key = (id(c), t)
    if key not in seen:
        value = spec_value_of(c) if is_key(t.dtype) else np.asarray(c, dtype=t.dtype)   # a closed-over key
        seen[key] = (c, Literal(value, ArrayType(np.shape(c), t.dtype)))   # c kept alive: ids stay unique
    return seen[key][1]


def _from_jaxpr(closed_jaxpr, input_names, _enclosing) -> Program:
    jcore = jx.core()
    jaxpr = closed_jaxpr.jaxpr if hasattr(closed_jaxpr, "consts") else closed_jaxpr
    consts = list(closed_jaxpr.consts) if hasattr(closed_jaxpr, "consts") else []
    env: dict = {}

    def read(x):
        if isinstance(x, jcore.Literal):
            t = spec_type(x.aval)
            return Literal(np.asarray(x.val, dtype=t.dtype), ArrayType(t.shape, t.dtype))
        return env[x]

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = _constant(c, v.aval)
    inputs = []
    for v in jaxpr.invars:
        nv = Var(spec_type(v.aval))
        env[v] = nv
        inputs.append(nv)
    eqns = []
    for e in jaxpr.eqns:
        ins = [read(x) for x in e.invars]
        prim, params = _convert_eqn(e, _enclosing)
        outs = [Var(spec_type(v.aval)) for v in e.outvars]
        for v, nv in zip(e.outvars, outs):
            env[v] = nv
        eqns.append(Eqn(prim, ins, outs, params))
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
        return _convert_custom(name, params, inner, where)
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


def _convert_custom(name: str, p: dict, inner: str, where: str):
    """custom_jvp_call / custom_vjp_call: the primal body, and the rules as
    spec Rules that trace JAX's lazily (`jvp_jaxpr_fun(*in_zeros)`,
    `fwd_jaxpr_thunk(*nonzeros)`, and `bwd` traced with jax.make_jaxpr at
    the residuals' and cotangents' avals), converted on first use."""
    if p.get("num_consts", 0):
        raise Unsupported(f"{name}{where}: param num_consts={p['num_consts']} is not supported "
                          f"(the spec models custom functions that close over no traced values: num_consts=0)")
    known = {"call_jaxpr", "num_consts", "symbolic_zeros", "jvp_jaxpr_fun", "fwd_jaxpr_thunk", "bwd", "out_trees"}
    extra = sorted(set(p) - known)
    if extra:
        raise Unsupported(f"{name}{where}: param(s) {extra} not supported (the spec models {sorted(known)})")
    body = from_jaxpr(p["call_jaxpr"], _enclosing=inner)
    fname = jx.func_name(p["call_jaxpr"], "fun")
    sz = bool(p["symbolic_zeros"])
    if name == "custom_jvp_call":
        fun = p["jvp_jaxpr_fun"]

        def trace_jvp(nonzeros):
            asked = list(nonzeros)
            if not sz and capabilities().custom_jvp_int_tangents_typed:
                # JAX instantiates every zero tangent before calling such a rule
                # (ad.process_custom_jvp_call), so it only ever asks the thunk for
                # none; this release's thunk asked for a zero hands the rule a
                # SymbolicZero (found by the model suite on 0.4.25: logaddexp)
                asked = [True] * len(nonzeros)
            jaxpr, consts, out_zeros = jx.call(fun, *[not nz for nz in asked])
            prog = from_jaxpr(jx.core().ClosedJaxpr(jaxpr, consts), _enclosing=inner)
            return _zero_tangents_inlined(prog, len(nonzeros), asked, nonzeros), [not z for z in out_zeros]
        rule = Rule(jx.func_name(fun, "jvp"), trace_jvp, len(body.inputs))
        return SPEC_PRIMS["custom_jvp_call"], dict(jaxpr=body, jvp=rule, symbolic_zeros=sz, name=fname)
    thunk, bwd, out_trees = p["fwd_jaxpr_thunk"], p["bwd"], p["out_trees"]
    n_out = len(body.outputs)

    def trace_fwd(nonzeros):
        jaxpr, consts = jx.call(thunk, *nonzeros)
        prog = from_jaxpr(jx.core().ClosedJaxpr(jaxpr, consts), _enclosing=inner)
        _, res_tree, input_fwds = jx.out_trees(out_trees)
        n_pruned = len(prog.outputs) - n_out
        pruned = iter(prog.outputs[:n_pruned])
        res = [next(pruned) if f is None else prog.inputs[f] for f in input_fwds]
        return Program(prog.inputs, prog.eqns, prog.outputs[n_pruned:] + res), [True] * n_out

    fwd_rule = Rule(jx.func_name(thunk, "fwd"), trace_fwd, len(body.inputs))

    def trace_bwd(ct_nonzeros):
        import jax
        from jax.custom_derivatives import SymbolicZero
        ad_util = jx.ad_util()
        # the residuals of the forward rule traced last (JAX's bwd reads out_trees() alike)
        key = next(reversed(fwd_rule._memo), (True,) * len(body.inputs))
        fwd_prog = fwd_rule(key)[0]
        res_types = fwd_prog.out_types[n_out:]
        avals = [jax.ShapeDtypeStruct(t.shape, t.dtype) for t in res_types] + [
            jax.ShapeDtypeStruct(t.shape, t.dtype) for t, k in zip(body.out_types, ct_nonzeros) if k]
        pattern = []

        def f(*args):
            res, given = args[:len(res_types)], iter(args[len(res_types):])
            cts = [next(given) if k else (SymbolicZero(jax.core.ShapedArray(t.shape, t.dtype)) if sz
                                          else jax.numpy.zeros(t.shape, t.dtype))
                   for t, k in zip(body.out_types, ct_nonzeros)]
            outs = jx.call(bwd, *res, *cts)
            pattern[:] = [not isinstance(o, (ad_util.Zero, SymbolicZero)) for o in outs]
            return [o for o, k in zip(outs, pattern) if k]
        closed = jax.make_jaxpr(f)(*avals)
        return from_jaxpr(closed, _enclosing=inner), pattern

    bwd_rule = Rule(jx.func_name(bwd, "bwd"), trace_bwd, n_out)
    return SPEC_PRIMS["custom_vjp_call"], dict(jaxpr=body, fwd=fwd_rule, bwd=bwd_rule,
                                               symbolic_zeros=sz, name=fname)


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
