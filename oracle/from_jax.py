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

import numpy as np

import spec
from spec.core import primitives as SPEC_PRIMS
from spec.ir import ArrayType, Eqn, Literal, Program, Var, canonical_dtype

from oracle.errors import Unsupported
from oracle.jax_names import IGNORED_PARAMS, SPEC_NAME


def spec_type(aval) -> ArrayType:
    try:
        dtype = canonical_dtype(aval.dtype)
    except TypeError as e:
        raise Unsupported(f"dtype {aval.dtype} is not supported by the spec: {e}") from None
    space = getattr(aval, "memory_space", None)
    space = None if space is None or "device" in str(space).lower() or str(space).endswith("Any") else "pinned_host"
    return ArrayType(tuple(int(d) for d in aval.shape), dtype, space)


def spec_params(jax_name: str, params: dict, where: str = "") -> tuple:
    """(spec primitive, spec params) for a JAX primitive and its params."""
    name = SPEC_NAME.get(jax_name, jax_name)
    prim = SPEC_PRIMS.get(name)
    if prim is None or name in ("call", "remat", "scan", "cond", "while"):
        raise Unsupported(f"primitive {jax_name!r}{where} is not supported by the spec; "
                          f"supported: {', '.join(sorted(supported_primitives()))}")
    wanted = spec.core.param_specs[prim]
    out = {}
    for k, v in params.items():
        if k in wanted:
            out[k] = v
        elif k in IGNORED_PARAMS and v == IGNORED_PARAMS[k]:
            continue
        else:
            raise Unsupported(f"{jax_name}{where}: param {k}={v!r} is not supported "
                              f"(the spec models {list(wanted)})")
    for k in ("new_dtype", "preferred_element_type"):
        if out.get(k) is not None:
            out[k] = canonical_dtype(out[k])
    if "dimension_numbers" in out:
        (lc, rc), (lb, rb) = out["dimension_numbers"]
        out["dimension_numbers"] = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    for k in ("axes", "new_sizes", "permutation", "dimensions", "start_indices", "limit_indices",
              "strides", "shape", "broadcast_dimensions"):
        if out.get(k) is not None:
            out[k] = tuple(int(i) for i in out[k])
    if "padding_config" in out:
        out["padding_config"] = tuple(tuple(int(i) for i in c) for c in out["padding_config"])
    missing = [k for k in wanted if k not in out]
    for k in missing:       # params JAX leaves out when they have their default
        if k in ("accuracy", "precision", "dimensions", "strides"):
            out[k] = None
        elif k == "weak_type":
            out[k] = False
        else:
            raise Unsupported(f"{jax_name}{where}: missing param {k}")
    return prim, out


def supported_primitives() -> list[str]:
    from oracle.jax_names import JAX_NAME
    names = [JAX_NAME.get(n, n) for n in SPEC_PRIMS if n not in ("device_put",)]
    return names + ["call_hi_primitive(RematTraced, CheckpointName)", "pjit", "closed_call"]


def _location(eqn) -> str:
    try:
        from jax._src import source_info_util
        here = source_info_util.summarize(eqn.source_info)
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


def from_jaxpr(closed_jaxpr, input_names=None, _enclosing: str = "") -> Program:
    """Convert a ClosedJaxpr (or Jaxpr without consts) to a spec Program."""
    from jax._src import core as jcore
    jaxpr = closed_jaxpr.jaxpr if hasattr(closed_jaxpr, "consts") else closed_jaxpr
    consts = list(closed_jaxpr.consts) if hasattr(closed_jaxpr, "consts") else []
    env: dict = {}

    def read(x):
        if isinstance(x, jcore.Literal):
            t = spec_type(x.aval)
            return Literal(np.asarray(x.val, dtype=t.dtype), ArrayType(t.shape, t.dtype))
        return env[x]

    for v, c in zip(jaxpr.constvars, consts):
        t = spec_type(v.aval)
        env[v] = Literal(np.asarray(c, dtype=t.dtype), ArrayType(np.shape(c), t.dtype))
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
        di = getattr(jaxpr, "debug_info", None)
        arg_names = getattr(di, "arg_names", None) if di is not None else None
        if arg_names and len(arg_names) == len(inputs) and all(arg_names):
            names = tuple(arg_names)
    prog = Program(inputs, eqns, outputs, input_names=names)
    spec.check_program(prog)
    return prog


def _convert_eqn(e, enclosing=""):
    from oracle.policies import from_jax_policy
    where = _where(e, enclosing)
    name = e.primitive.name
    here = _location(e)
    label = f"jitted function '{e.params['name']}'" if name in ("jit", "pjit") else f"a {name}"
    inner = f"{label} at {here}" if here else (f"{label} inside {enclosing}" if enclosing else label)
    if name in ("jit", "pjit"):
        body = from_jaxpr(e.params["jaxpr"], _enclosing=inner)
        return SPEC_PRIMS["call"], dict(jaxpr=body, name=str(e.params["name"]))
    if name == "remat2":
        body = from_jaxpr(e.params["jaxpr"], _enclosing=inner)
        return SPEC_PRIMS["remat"], dict(jaxpr=body, policy=from_jax_policy(e.params["policy"]),
                                         prevent_cse=e.params["prevent_cse"],
                                         differentiated=e.params["differentiated"])
    if name == "scan":
        p = e.params
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
        body = from_jaxpr(e.params["call_jaxpr"], _enclosing=inner)
        return SPEC_PRIMS["call"], dict(jaxpr=body, name=None)
    if name == "cond":
        extra = {k: v for k, v in e.params.items() if k != "branches" and v is not None}
        if extra:
            raise Unsupported(f"cond{where}: param(s) {sorted(extra)} not supported "
                              f"(the spec models ['branches'])")
        branches = tuple(from_jaxpr(b, _enclosing=f"{inner} branch {i}")
                         for i, b in enumerate(e.params["branches"]))
        return SPEC_PRIMS["cond"], dict(branches=branches)
    if name == "while":
        return SPEC_PRIMS["while"], dict(
            cond_jaxpr=from_jaxpr(e.params["cond_jaxpr"], _enclosing=inner),
            body_jaxpr=from_jaxpr(e.params["body_jaxpr"], _enclosing=inner),
            cond_nconsts=int(e.params["cond_nconsts"]), body_nconsts=int(e.params["body_nconsts"]))
    if name == "call_hi_primitive":
        hi = e.params["_prim"]
        kind = type(hi).__name__
        if kind == "RematTraced":
            body = from_jaxpr(hi.jaxpr, _enclosing=inner)
            return SPEC_PRIMS["remat"], dict(jaxpr=body, policy=from_jax_policy(hi.policy),
                                             prevent_cse=getattr(hi, "prevent_cse", True),
                                             differentiated=False)
        if kind in ("CheckpointName", "CheckpointNameFwd"):
            return SPEC_PRIMS["name"], dict(name=hi.name)
        raise Unsupported(f"call_hi_primitive {kind}{where} is not supported; supported: RematTraced, CheckpointName")
    return spec_params(name, dict(e.params), where)


def trace_jax(fn, *args) -> Program:
    """jax.make_jaxpr(fn)(*args), converted to a spec Program."""
    import jax
    return from_jaxpr(jax.make_jaxpr(fn)(*args))
