"""JAX's internal objects and call protocols, in one spelling across
releases (0.4.25 .. 0.10.2). Each function says what differs."""
from __future__ import annotations

import numpy as np

from oracle.jax_api.capabilities import capabilities


def core():
    """jax._src.core: Literal, Jaxpr, ClosedJaxpr, closed_call_p, ..."""
    from jax._src import core as jcore
    return jcore


def new_primitive(name: str):
    """A user-defined primitive: jax.extend.core.Primitive (not in 0.4.25,
    where it is jax.core.Primitive)."""
    import jax
    import jax.extend
    cls = getattr(getattr(jax.extend, "core", None), "Primitive", None) or jax.core.Primitive
    return cls(name)


def weak_typed(shape, dtype):
    """An abstract weak-typed argument for make_jaxpr: a ShapeDtypeStruct
    with weak_type=True, or (0.4.25: no such parameter) a ShapedArray."""
    import inspect
    import jax
    if "weak_type" in inspect.signature(jax.ShapeDtypeStruct).parameters:
        return jax.ShapeDtypeStruct(shape, dtype, weak_type=True)
    return core().ShapedArray(shape, dtype, weak_type=True)


def x64_enabled() -> bool:
    """jax_enable_x64 is on: a Python float is float64 (public dtypes API,
    the same on every release)."""
    import jax
    return jax.dtypes.canonicalize_dtype(np.float64) == np.float64


def is_float0(aval) -> bool:
    """The aval is of JAX's tangent dtype for integers and booleans
    (jax.dtypes.float0, the same on every release)."""
    import jax
    return getattr(aval, "dtype", None) == jax.dtypes.float0


def aval_of(x):
    """The abstract value of a JAX value, Python scalars included:
    `jax.typeof` where the release has it (it replaced core.get_aval, which
    0.10.2 no longer has), else core.get_aval."""
    import jax
    if hasattr(jax, "typeof"):
        return jax.typeof(x)
    return core().get_aval(x)


def partial_eval():
    """jax._src.interpreters.partial_eval: a policy's answers (Saveable,
    Recompute, Offloadable) and convert_constvars_jaxpr."""
    from jax._src.interpreters import partial_eval as pe
    return pe


def ad_util():
    from jax._src import ad_util as au
    return au


def saved_residuals(f, *args, **kwargs):
    from jax._src.ad_checkpoint import saved_residuals as sr
    return sr(f, *args, **kwargs)


def source_summary(source_info) -> str:
    from jax._src import source_info_util
    return source_info_util.summarize(source_info)


def primitives() -> dict:
    """JAX's name -> primitive object for the primitives with sub-programs
    (shown to a JAX policy without params)."""
    from jax._src import ad_checkpoint, custom_derivatives, pjit
    from jax._src.lax.control_flow import conditionals, loops
    prims = (custom_derivatives.custom_jvp_call_p, custom_derivatives.custom_vjp_call_p,
             getattr(pjit, "jit_p", None) or pjit.pjit_p, loops.scan_p, loops.while_p, conditionals.cond_p,
             ad_checkpoint.remat_p, core().closed_call_p, linear_solve_p())
    return {p.name: p for p in prims}


def scan_p():
    from jax._src.lax.control_flow.loops import scan_p as p
    return p


def cond_p():
    from jax._src.lax.control_flow.conditionals import cond_p as p
    return p


def while_p():
    from jax._src.lax.control_flow.loops import while_p as p
    return p


def remat_opt_p():
    """custom_vjp(optimize_remat=True)'s forward-rule primitive (jax 0.4.3x and later)."""
    from jax._src.custom_derivatives import remat_opt_p as p
    return p


def linear_solve_p():
    """lax.custom_linear_solve's primitive (`custom_linear_solve`, public as
    jax.lax.linear_solve_p on every release)."""
    from jax._src.lax.control_flow.solves import linear_solve_p as p
    return p


def linear_solve_tuple(*entries):
    """JAX's _LinearSolveTuple(matvec, vecmat, solve, transpose_solve): the
    named tuple custom_linear_solve's params are (its rules call .transpose())."""
    from jax._src.lax.control_flow.solves import _LinearSolveTuple
    return _LinearSolveTuple(*entries)


def closed_without_consts(closed):
    """A ClosedJaxpr's consts made its leading inputs (pe.convert_constvars_jaxpr,
    pe.close_jaxpr): (the new ClosedJaxpr, the consts)."""
    from jax._src.interpreters import partial_eval as pe
    return pe.close_jaxpr(pe.convert_constvars_jaxpr(closed.jaxpr)), list(closed.consts)


# --------------------------------------------------------------------------
# equations read in 0.10.2's spelling

# params some releases add that carry no meaning the spec models:
# `linear` (scan, cond; before 0.7/0.10) annotates which operands are
# linear, read by no evaluation rule; `out_type` (dot_general, 0.4.3x) is
# the later `out_sharding`, None when unset; `_split_transpose` (scan, until
# 0.10) is False unless set by a JAX developer flag.
_ANNOTATIONS = {"scan": ("linear",), "cond": ("linear",)}
_RENAMED_PARAMS = {"fun_jaxpr": "call_jaxpr", "jvp_jaxpr_thunk": "jvp_jaxpr_fun", "out_type": "out_sharding"}
_RENAMED_PRIMITIVES = {"custom_vjp_call_jaxpr": "custom_vjp_call", "pjit": "jit"}


def canonical_eqn(name: str, params: dict, in_avals=()) -> tuple[str, dict]:
    """An equation's primitive name and params as jax 0.10.2 spells them."""
    name = _RENAMED_PRIMITIVES.get(name, name)
    dropped = _ANNOTATIONS.get(name, ())
    params = {_RENAMED_PARAMS.get(k, k): v for k, v in params.items() if k not in dropped}
    if name == "top_k" and "axis" not in params:     # before 0.7 top_k works on the last axis
        params["axis"] = len(in_avals[0].shape) - 1
    if name == "debug_callback" and "partitioned" not in params:     # added in jax 0.6.0
        params["partitioned"] = False
    return name, params


def call(fun, *args):
    """Call a traced rule of a custom function: a lu.WrappedFun (0.5+), or
    a plain function / bound method (the thunks of 0.4)."""
    return fun.call_wrapped(*args) if hasattr(fun, "call_wrapped") else fun(*args)


def out_trees(thunk) -> tuple:
    """custom_vjp's out_trees() as (out tree, residual tree, input forwards):
    before 0.5 it is (out tree, residual tree) and no residual is an input
    forwarded (all residuals are outputs of the forward rule)."""
    trees = thunk()
    if len(trees) == 3:
        return tuple(trees)
    out_tree, res_tree = trees
    return out_tree, res_tree, [None] * res_tree.num_leaves


def func_name(obj, default: str) -> str:
    """The function name JAX's debug info gives a traced function (a
    ClosedJaxpr, a lu.WrappedFun), or `default` where the release keeps
    none (0.4: a jaxpr's debug_info has func_src_info, or is None; thunks
    are plain functions)."""
    di = getattr(getattr(obj, "jaxpr", obj), "debug_info", None)
    name = getattr(di, "func_name", None)
    if not name:
        src = getattr(di, "func_src_info", None)
        name = src.split(" ")[0] if src else None
    return str(name) if name else default


def arg_names(jaxpr):
    """The argument names of a jaxpr's debug info, or None."""
    di = getattr(jaxpr, "debug_info", None)
    return getattr(di, "arg_names", None) if di is not None else None


# --------------------------------------------------------------------------
# binding control flow as the release's equation wants it

def scan_params(n_operands: int) -> dict:
    """The params a scan equation needs beyond the spec's (jaxpr, length,
    reverse, num_consts, num_carry, unroll) on this release."""
    have = capabilities().scan_params
    extra = {}
    if "linear" in have:
        extra["linear"] = (False,) * n_operands
    if "_split_transpose" in have:
        extra["_split_transpose"] = False
    return extra


def cond_params(n_operands: int) -> dict:
    """The params a cond equation needs beyond `branches` on this release."""
    return {"linear": (False,) * n_operands} if "linear" in capabilities().cond_params else {}


# --------------------------------------------------------------------------
# policies: JAX's built-in policy objects read by what they hold

def _closure(fn) -> dict:
    return {n: c.cell_contents for n, c in zip(fn.__code__.co_freevars, fn.__closure__ or ())}


def builtin_policy(policy):
    """(kind, arguments) of a JAX built-in policy made by a constructor
    (save_only_these_names(...), ...), or None. 0.8+ makes some of them
    dataclasses (SaveOnlyTheseNames, DotsSaveable); before, every one is a
    closure `<constructor>.<locals>.policy` over its arguments.
    save_anything_except_these_names(...) keeps no names in 0.10.2 (it is
    `lambda *_, **__: True`): then its names are None."""
    from jax._src import ad_checkpoint as ac
    if isinstance(policy, getattr(ac, "DotsSaveable", ())):
        return ("dots_with_no_batch_dims_saveable" if policy.only_if_no_batch_dims else "dots_saveable"), {}
    if isinstance(policy, getattr(ac, "SaveOnlyTheseNames", ())):
        return "save_only_these_names", {"names": policy.saveable_names}
    if isinstance(policy, getattr(ac, "SaveAnyNamesButThese", ())):
        return "save_any_names_but_these", {"names": policy.names}
    qual = getattr(policy, "__qualname__", "")
    kind = qual.split(".")[0]
    if ".<locals>." not in qual or not hasattr(policy, "__code__"):
        return None
    c = _closure(policy)
    if kind == "save_only_these_names":
        return kind, {"names": c["names_which_can_be_saved"]}
    if kind in ("save_any_names_but_these", "save_anything_except_these_names"):
        return kind, {"names": c.get("names_not_to_save")}
    if kind in ("offload_dot_with_no_batch_dims", "save_and_offload_only_these_names", "save_from_both_policies"):
        return kind, c
    return None


def signature_names(fn, args, kwargs):
    """The argument names saved_residuals gives the leaves of fn(*args,
    **kwargs) on a release whose jaxprs carry no argument names (0.4.2x:
    saved_residuals binds fn's signature itself, pe.arg_info_all), or None
    where jaxprs carry them (the importer reads them there)."""
    pe = partial_eval()
    if not hasattr(pe, "arg_info_all"):
        return None
    import jax
    from jax.tree_util import keystr
    _, in_tree = jax.tree_util.tree_flatten((tuple(args), dict(kwargs)))
    info = pe.arg_info_all(pe.debug_info(fn, in_tree, None, True, "saved_residuals"))
    return None if info is None else tuple(f"{name}{keystr(path)}" for name, path in info)


def backends() -> dict:
    """The platform name -> client of every backend JAX initialised (those
    that failed to are left out): jax.extend.backend.backends where the
    release has it, else jax._src.xla_bridge.backends."""
    try:
        from jax.extend.backend import backends as bs
    except ImportError:
        from jax._src.xla_bridge import backends as bs
    return bs()
