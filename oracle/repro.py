"""Standalone reproducers: a jax + numpy script that fails with the discrepancy.

The script rebuilds the program from the spec IR as JAX source: jax.lax
calls (the emitter table of oracle/jax_names.py), `jax.checkpoint`,
`checkpoint_name`, `jax.jit`, `jax.lax.scan`, `jax.lax.cond`,
`jax.lax.while_loop`, `jax.custom_jvp` and `jax.custom_vjp` (their rules
written out as the programs the spec traced them to), so it needs neither
the user's code nor this project. Where no public API makes the same
equation (a cond on an index that is not a bool's conversion, a
closed_call, a differentiated checkpoint, custom_lin, offloading), a small
helper written into the script binds JAX's primitive directly."""
from __future__ import annotations

import ast
import hashlib
import itertools
import keyword
import os
import re
from dataclasses import dataclass

import numpy as np

import spec
from spec.ir import Literal, Program, Var, is_float, is_key, subprograms
from spec.prims_control import passthroughs
from spec import policies as sp

from oracle.conventions import AS_IS, literal_is_python_float
from oracle.jax_api import flag_settings_source
from oracle.jax_names import EMITTERS_SOURCE as _EMITTERS   # the same table, embedded in reproducers
from oracle.spellings import CANONICAL, Spelling, checkpoint_source, jnp_source
from oracle.jax_api import environment
from oracle.jax_api.source import emitter_table_source, helper_source
import inspect
import textwrap


@dataclass
class Repro:
    """A reproducer: its text, and the file it was saved to (if any)."""
    text: str
    path: str | None = None


def _policy_source(policy) -> str:
    """JAX source of a checkpoint policy (spec or JAX, by its meaning)."""
    if policy is None or policy is AS_IS:
        return "None"
    cp = "jax.checkpoint_policies"
    simple = {id(sp.everything_saveable): f"{cp}.everything_saveable",
              id(sp.nothing_saveable): f"{cp}.nothing_saveable",
              id(sp.dots_saveable): f"{cp}.dots_saveable",
              id(sp.dots_with_no_batch_dims_saveable): f"{cp}.dots_with_no_batch_dims_saveable"}
    if id(policy) in simple:
        return simple[id(policy)]
    for cls in ("save_only_these_names", "save_any_names_but_these", "save_anything_except_these_names"):
        if isinstance(policy, getattr(sp, cls)):
            return f"{cp}.{cls}(" + ", ".join(repr(n) for n in sorted(policy.names)) + ")"
    if isinstance(policy, sp.offload_dot_with_no_batch_dims):
        return f"{cp}.offload_dot_with_no_batch_dims({policy.offload_src!r}, {policy.offload_dst!r})"
    if isinstance(policy, sp.save_and_offload_only_these_names):
        return (f"{cp}.save_and_offload_only_these_names(names_which_can_be_saved="
                f"{sorted(policy.names_which_can_be_saved)!r}, names_which_can_be_offloaded="
                f"{sorted(policy.names_which_can_be_offloaded)!r}, offload_src={policy.offload_src!r}, "
                f"offload_dst={policy.offload_dst!r})")
    if isinstance(policy, sp._SaveFromBoth):
        return f"{cp}.save_from_both_policies({_policy_source(policy.policy_1)}, {_policy_source(policy.policy_2)})"
    fn = getattr(policy, "fn", policy)
    if callable(getattr(fn, "jax_source", None)):   # a policy that can write itself out
        return fn.jax_source()
    # any other user policy's source cannot be written out: the reproducer
    # defines a stand-in that says so when asked (paste the real policy there)
    return f"user_policy({getattr(fn, '__name__', None) or type(fn).__name__!r})"


# --------------------------------------------------------------------------
# helpers written into a reproducer (only those its program needs)

_HELPERS = {
    # this release's spelling of JAX internals the helpers below call (oracle/jax_api/source.py)
    "cond_params": None, "scan_params": None, "wrap_init": None,
    "user_policy": '''
def user_policy(name):
    """A stand-in for a checkpoint policy whose source could not be written out."""
    def policy(prim, *avals, **params):
        raise NotImplementedError(f'paste the checkpoint policy {name} here')
    return policy
''',
    "scan_step": '''
def scan_step(body, consts, num_carry):
    """lax.scan's f(carry, xs) for a scan body of (consts, carry, xs) -> (carry, ys);
    the consts are closed over, as lax.scan hoists closed-over values."""
    def step(carry, xs):
        outs = body(*consts, *carry, *xs)
        return tuple(outs[:num_carry]), tuple(outs[num_carry:])
    return step
''',
    "bind_scan": '''
def bind_scan(body, consts, carry, xs, length, reverse, unroll):
    """JAX's scan primitive on exactly these consts, carries and xs, body(*consts,
    *carry, *x) -> (*carry, *y); returns (carry, ys). lax.scan would close over only
    the values the body reads and move a carry passed through unchanged to the consts.
    A weakly typed operand is made strong, as lax.scan does."""
    from jax._src.lax.control_flow.loops import scan_p
    n_fixed = len(consts) + len(carry)
    operands = [*consts, *carry, *xs]
    avals = [jax.ShapeDtypeStruct(jnp.shape(v)[1 if i >= n_fixed else 0:], jnp.result_type(v))
             for i, v in enumerate(operands)]
    operands = [jax.lax.convert_element_type(v, a.dtype)
                if getattr(v, 'weak_type', False) and not isinstance(v, (bool, int, float, complex)) else v
                for v, a in zip(operands, avals)]
    closed = jax.make_jaxpr(lambda *a: tuple(body(*a)))(*avals)
    outs = scan_p.bind(*operands, jaxpr=closed, length=length, reverse=reverse, num_consts=len(consts),
                       num_carry=len(carry), unroll=unroll, **scan_params(len(operands)))
    return tuple(outs[:len(carry)]), tuple(outs[len(carry):])
''',
    "bind_while": '''
def bind_while(cond_fn, body_fn, cond_consts, body_consts, carry):
    """JAX's while primitive on exactly these consts (lax.while_loop would close over
    only those the functions read): cond_fn(*cond_consts, *carry) -> (pred,),
    body_fn(*body_consts, *carry) -> carry. A weakly typed operand is made strong."""
    from jax._src.lax.control_flow.loops import while_p
    avals = lambda xs: [jax.ShapeDtypeStruct(jnp.shape(v), jnp.result_type(v)) for v in xs]
    cond = jax.make_jaxpr(lambda *a: cond_fn(*a)[0])(*avals(cond_consts), *avals(carry))
    body = jax.make_jaxpr(lambda *a: tuple(body_fn(*a)))(*avals(body_consts), *avals(carry))
    operands = [jax.lax.convert_element_type(v, a.dtype)
                if getattr(v, 'weak_type', False) and not isinstance(v, (bool, int, float, complex)) else v
                for v, a in zip([*cond_consts, *body_consts, *carry], [*cond.in_avals[:len(cond_consts)], *body.in_avals])]
    return tuple(while_p.bind(*operands, cond_jaxpr=cond, body_jaxpr=body, cond_nconsts=len(cond_consts),
                              body_nconsts=len(body_consts)))
''',
    "bind_cond": '''
def bind_cond(index, branches, *operands):
    """JAX's cond primitive on exactly this index (lax.switch would clamp it, lax.cond
    takes a bool): branches[index](*operands)."""
    from jax._src.lax.control_flow.conditionals import cond_p
    closed = tuple(jax.make_jaxpr(b)(*operands) for b in branches)
    return cond_p.bind(index, *operands, branches=closed, **cond_params(len(operands)))
''',
    "closed_call": '''
def closed_call(fun):
    """fun as JAX's closed_call primitive (an inlined call that JAX's own transformations
    leave; jax.jit would make a jit equation instead)."""
    from jax._src import core as jcore
    def call(*args):
        params = jcore.closed_call_p.get_bind_params({'call_jaxpr': jax.make_jaxpr(fun)(*args)})
        return jcore.closed_call_p.bind(*args, **params)
    return call
''',
    "remat_opt": '''
def remat_opt(fwd, fun, num_consts, num_res):
    """JAX's remat_opt primitive, the forward rule of a custom_vjp with
    optimize_remat=True: fwd(*consts, *primals) -> (*residuals, *outs); fun(*primals)
    -> outs is the primal function its DCE rule runs where no residual is read."""
    from jax._src.custom_derivatives import remat_opt_p
    from jax._src.interpreters import partial_eval as pe
    def call(*args):
        closed = jax.make_jaxpr(fwd)(*args)
        primal = jax.make_jaxpr(fun)(*args[num_consts:])
        return remat_opt_p.bind(*closed.consts, *args, num_consts=len(closed.consts) + num_consts,
                                num_res=num_res, fwd_jaxpr=pe.close_jaxpr(pe.convert_constvars_jaxpr(closed.jaxpr)),
                                fun_jaxpr_thunk=lambda: (primal.jaxpr, primal.consts))
    return call
''',
    "custom_linear_solve": '''
def custom_linear_solve(functions, const_lengths):
    """JAX's custom_linear_solve primitive on exactly these operands (lax.custom_linear_solve
    traces the functions itself, making what they close over operands): functions =
    (matvec, vecmat, solve, transpose_solve), each f(*its consts, *b) -> a tuple, vecmat
    and transpose_solve possibly None; const_lengths their const counts, in that order,
    the operands their consts in that order, then b. A weakly typed operand is made strong."""
    from jax._src.lax.control_flow.solves import _LinearSolveTuple, linear_solve_p
    def call(*args):
        avals = [jax.ShapeDtypeStruct(jnp.shape(v), jnp.result_type(v)) for v in args]
        args = [jax.lax.convert_element_type(v, a.dtype)
                if getattr(v, 'weak_type', False) and not isinstance(v, (bool, int, float, complex)) else v
                for v, a in zip(args, avals)]
        b, jaxprs, start = avals[sum(const_lengths):], [], 0
        for f, n in zip(functions, const_lengths):
            jaxprs.append(None if f is None else jax.make_jaxpr(f)(*avals[start:start + n], *b))
            start += n
        return linear_solve_p.bind(*args, const_lengths=_LinearSolveTuple(*const_lengths),
                                   jaxprs=_LinearSolveTuple(*jaxprs))
    return call
''',
    "differentiated_checkpoint": '''
def differentiated_checkpoint(fun, policy, prevent_cse):
    """fun as a remat2 equation with differentiated=True, the staged half of a checkpoint
    that jax.grad leaves (jax.checkpoint binds differentiated=False)."""
    from jax._src.ad_checkpoint import remat_p
    from jax._src.interpreters import partial_eval as pe
    def call(*args):
        closed = jax.make_jaxpr(fun)(*args)
        return remat_p.bind(*closed.consts, *args, jaxpr=pe.convert_constvars_jaxpr(closed.jaxpr),
                            prevent_cse=prevent_cse, differentiated=True, policy=policy)
    return call
''',
    "rule_for": '''
def rule_for(rules, nonzeros, what):
    """The key of the traced rule for this nonzero pattern: its own, else the smallest
    traced pattern that covers it (the rule is then given instantiated zeros)."""
    nonzeros = tuple(nonzeros)
    if nonzeros in rules:
        return nonzeros
    for key in sorted(rules, key=sum):
        if all(k or not n for k, n in zip(key, nonzeros)):
            return key
    raise NotImplementedError(f'{what}: no traced rule for the nonzero pattern {nonzeros}')


def given(values, key, nonzeros):
    """The values a rule traced for `key` takes: the nonzero ones, zeros instantiated."""
    return [v if n else jnp.zeros(v.aval.shape, v.aval.dtype)
            for v, k, n in zip(values, key, nonzeros) if k]


def closed_over(values):
    """The values a custom function closes over, each one JAX value (a constant
    becomes one array): JAX makes each a const of the custom call."""
    return [v if isinstance(v, jax.core.Tracer) else jnp.asarray(v) for v in values]


def symbolic_zero(x):
    from jax.custom_derivatives import SymbolicZero
    return SymbolicZero(jax.core.ShapedArray(jnp.shape(x), jnp.result_type(x)))
''',
    "custom_jvp_function": '''
def custom_jvp_function(fun, name, jvp_name, rules, symbolic_zeros, num_consts=0):
    """jax.custom_jvp(fun), named `name`, whose JVP rule `jvp_name` runs the program the
    rule was traced to for the perturbed inputs: rules[perturbed] = (program, nonzero
    tangent outputs). Without symbolic zeros every tangent is given (one pattern).
    With num_consts, it is applied with the values it closes over first: fun and the
    rule's programs take them first (the rule their values only)."""
    from jax.custom_derivatives import SymbolicZero

    def make(consts):
        def body(*args):
            return fun(*consts, *args)
        body = body if consts else fun
        body.__name__ = body.__qualname__ = name
        f = jax.custom_jvp(body)

        def jvp(primals, tangents):
            if symbolic_zeros:
                nonzeros = [type(t) is not SymbolicZero for t in tangents]
            else:       # instantiated: float0 for integer inputs
                nonzeros = [jnp.result_type(t) != jax.dtypes.float0 for t in tangents]
            key = rule_for(rules, nonzeros, jvp_name)
            prog, out_nz = rules[key]
            outs = prog(*consts, *primals, *given(tangents, key, nonzeros))
            n = len(outs) - sum(out_nz)
            nz = iter(outs[n:])
            return tuple(outs[:n]), tuple(next(nz) if z else symbolic_zero(o) for o, z in zip(outs[:n], out_nz))
        jvp.__name__ = jvp.__qualname__ = jvp_name
        f.defjvp(jvp, symbolic_zeros=symbolic_zeros)
        return f
    if not num_consts:
        return make(())
    return lambda *xs: make(closed_over(xs[:num_consts]))(*xs[num_consts:])
''',
    "custom_vjp_function": '''
def custom_vjp_function(fun, name, num_outputs, fwd_name, fwd_rules, bwd_name, bwd_rules, symbolic_zeros,
                        num_consts=0):
    """jax.custom_vjp(fun), named `name`, whose rules run the programs they were traced
    to: fwd_rules[perturbed inputs] = primals -> outputs + residuals, and
    bwd_rules[nonzero output cotangents] = (residuals, nonzero cotangents -> nonzero
    input cotangents, which input cotangents are nonzero). With num_consts, it is
    applied with the values it closes over first: fun and fwd take them first."""
    from jax.custom_derivatives import SymbolicZero

    def make(consts):
        def body(*args):
            return fun(*consts, *args)
        body = body if consts else fun
        body.__name__ = body.__qualname__ = name
        f = jax.custom_vjp(body)

        def fwd(*args):
            if symbolic_zeros:
                nonzeros, args = [a.perturbed for a in args], [a.value for a in args]
            else:       # every float input counts as perturbed
                nonzeros = [jnp.issubdtype(jnp.result_type(a), jnp.inexact) for a in args]
            outs = fwd_rules[rule_for(fwd_rules, nonzeros, fwd_name)][0](*consts, *args)
            return tuple(outs[:num_outputs]), tuple(outs[num_outputs:])

        def bwd(res, cts):
            nonzeros = [type(c) is not SymbolicZero for c in cts] if symbolic_zeros else [True] * len(cts)
            key = rule_for(bwd_rules, nonzeros, bwd_name)
            prog, out_nz = bwd_rules[key]
            outs = iter(prog(*res, *given(cts, key, nonzeros)))
            return tuple(next(outs) if nz else None for nz in out_nz)
        fwd.__name__ = fwd.__qualname__ = fwd_name
        bwd.__name__ = bwd.__qualname__ = bwd_name
        f.defvjp(fwd, bwd, symbolic_zeros=symbolic_zeros)
        return f
    if not num_consts:
        return make(())
    return lambda *xs: make(closed_over(xs[:num_consts]))(*xs[num_consts:])
''',
    "custom_lin": '''
def custom_lin(bwd_name, bwd_rules, num_res, in_nonzeros, symbolic_zeros, out_types):
    """JAX's custom_lin: a custom_vjp function's tangent map, as JAX's JVP leaves it
    (only transposable: evaluating it raises JAX's TypeError). Its transpose runs the
    bwd program for the nonzero output cotangents (see custom_vjp_function)."""
    from jax._src.interpreters import ad
    from jax.custom_derivatives import SymbolicZero

    def call(*args):
        tangents = iter(args[num_res:])
        like = [next(tangents) if nz else None for nz in in_nonzeros]

        def bwd(*res_cts):
            res, cts = res_cts[:num_res], res_cts[num_res:]
            nonzeros = [type(c) is not SymbolicZero for c in cts]
            key = rule_for(bwd_rules, nonzeros, bwd_name)
            prog, out_nz = bwd_rules[key]
            outs = iter(prog(*res, *given(cts, key, nonzeros)))
            return [next(outs) if nz else (None if t is None else symbolic_zero(t))
                    for nz, t in zip(out_nz, like)]
        bwd.__name__ = bwd_name
        wrapped = wrap_init(bwd, args)
        avals = [jax.core.ShapedArray(shape, dtype) for shape, dtype in out_types]
        return ad.custom_lin_p.bind(*args, num_res=num_res, bwd=wrapped, out_avals=avals,
                                    symbolic_zeros=symbolic_zeros, in_zeros=[not nz for nz in in_nonzeros])
    return call
''',
}
# helpers that others call
_NEEDS = {"custom_jvp_function": ("rule_for",), "custom_vjp_function": ("rule_for",),
          "custom_lin": ("rule_for", "wrap_init"), "bind_cond": ("cond_params",),
          "bind_scan": ("scan_params",)}


def _helper_source(name: str) -> str:
    if _HELPERS[name] is None:
        return helper_source(name)
    return _HELPERS[name].strip("\n")


# --------------------------------------------------------------------------
# values and params as source

def _dtype_source(dt) -> str:
    """The numpy (or ml_dtypes) name of a dtype, as source."""
    dt = np.dtype(dt)
    if dt.name == "bfloat16":
        return "ml_dtypes.bfloat16"
    return "np.bool_" if dt == np.bool_ else f"np.{dt.name}"


def _number_source(x) -> str:
    """A number as source: the shortest decimal giving x back in its dtype
    (nan and the infinities by numpy's names)."""
    if isinstance(x, (bool, np.bool_)):
        return repr(bool(x))
    if isinstance(x, (int, np.integer)):
        return repr(int(x))
    if np.iscomplexobj(x):      # complex(re, im), each part exactly in the parts' dtype
        return f"complex({_number_source(np.real(x))}, {_number_source(np.imag(x))})"
    f = float(x)
    if np.isnan(f):
        return "np.nan"
    if np.isinf(f):
        return "np.inf" if f > 0 else "-np.inf"
    dtype = getattr(x, "dtype", np.dtype(np.float64))
    short = str(x)
    return short if np.asarray(float(short), dtype) == np.asarray(x, dtype) else repr(f)


def _nested_source(a: np.ndarray) -> str:
    """An array's values as nested list source."""
    if a.ndim == 0:
        return _number_source(a[()])
    return "[" + ", ".join(_nested_source(x) for x in a) + "]"


def _array_source(a) -> str:
    """np.array(...) source giving exactly `a` (any spec dtype, bfloat16 included)."""
    a = np.asarray(a)
    if is_key(a.dtype):         # a key<fry> array: JAX's typed key of its words
        return (f"jax.random.wrap_key_data({_array_source(a['fry'])}, impl='threefry2x32')")
    if a.size == 0:
        return f"np.zeros({a.shape!r}, dtype={_dtype_source(a.dtype)})"
    return f"np.array({_nested_source(a)}, dtype={_dtype_source(a.dtype)})"


def _scalar_source(v, x64: bool = False) -> str:
    """A scalar literal, written as `oracle.to_jax` binds it (`_literal`), so
    that the reproducer replays what the check ran: a float32 scalar as a
    Python float (weakly typed; JAX's residual lists depend on that, see the
    divergence literal-residuals-depend-on-the-constant-s-python-type), the
    exact float32 value so that a conversion rounds once, as in the check;
    any other scalar, and a float32 one under `x64` (where a Python float is
    float64), as a numpy scalar of its dtype."""
    v = np.asarray(v)
    if literal_is_python_float(v.dtype, x64):
        return _python_float_source(v[()])
    dt = "np.bool_" if v.dtype == np.bool_ else (
        "ml_dtypes.bfloat16" if v.dtype.name == "bfloat16" else f"np.{v.dtype.name}")
    return f"{dt}({_number_source(v[()])})"


def _python_float_source(x) -> str:
    """A float32 value as a Python float literal equal to it exactly."""
    f = float(x)
    if not np.isfinite(f):
        return f"float({_number_source(x)})"
    return repr(f)


def _param_source(v) -> str:
    """A primitive's param as source (dtypes by name, the rest by repr). A
    Python callable the spec holds opaquely (debug_callback's `callback`)
    has no source: it is written as its name, a string, and the emitter
    binds a stand-in for it (spec/prims_debug.py)."""
    if isinstance(v, np.dtype):
        return f"np.dtype({_dtype_source(v)})"
    if callable(v) and not isinstance(v, type):
        return repr(getattr(v, "__qualname__", type(v).__name__))
    return repr(v)


def _uses_f64(prog: Program) -> bool:
    """Some value of the program (sub-programs included) is float64: the
    reproducer must enable jax_enable_x64."""
    f64 = np.dtype(np.float64)
    for p in _all_programs(prog):
        if any(t.dtype == f64 for t in p.in_types + p.out_types):
            return True
        if any(v.type.dtype == f64 for e in p.eqns for v in e.outputs):
            return True
    return False


def _all_programs(prog: Program):
    """The program and its sub-programs, nested ones included."""
    yield prog
    for e in prog.eqns:
        for _, sub in subprograms(e.params):
            yield from _all_programs(sub)


def _fingerprint(prog: Program) -> str:
    """What tells two programs apart: the printed program and the bytes of
    its constants (printed by name only)."""
    h = hashlib.sha1(str(prog).encode())
    for p in _all_programs(prog):
        for e in p.eqns:
            for a in e.inputs:
                if isinstance(a, Literal) and not a.is_scalar:
                    h.update(np.ascontiguousarray(a.value).tobytes())
    return h.hexdigest()


# --------------------------------------------------------------------------
# the signature: JAX names arguments by it (`x`, `args[0]`, `params['w']`)

_KEY = re.compile(r"\[(-?\d+|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]")
# names the emitted code reads as globals: a parameter must not shadow them
_GLOBALS = {"jax", "jnp", "np", "ml_dtypes", "E", "checkpoint_name", "tuple", "functools"} | set(
    "cond_params scan_params wrap_init user_policy scan_step bind_scan bind_cond closed_call differentiated_checkpoint rule_for given "
    "symbolic_zero closed_over custom_jvp_function custom_vjp_function custom_lin".split())


def _leaf_path(name: str):
    """`params['w'][0]` -> ('params', ('w', 0)); None if not of that form."""
    m = re.match(r"[A-Za-z_][A-Za-z_0-9]*", name)
    if not m or keyword.iskeyword(m.group()) or m.group() in _GLOBALS:
        return None
    keys, pos = [], m.end()
    for k in _KEY.finditer(name, pos):
        if k.start() != pos:
            return None
        keys.append(ast.literal_eval(k.group(1)))
        pos = k.end()
    return (m.group(), tuple(keys)) if pos == len(name) else None


def _signature(prog: Program):
    """(parameters, each input's expression in them, the arguments' tree) from
    the names JAX gave the inputs; None where they do not name distinct
    leaves of parameters (generic names are used then)."""
    names = prog.input_names
    if not names or len(names) != len(prog.inputs) or len(set(names)) != len(names):
        return None
    paths = [_leaf_path(str(n)) for n in names]
    if any(p is None for p in paths):
        return None
    trees: dict = {}
    for i, (root, keys) in enumerate(paths):
        node, path = trees, (root,) + keys
        for k in path[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                return None
        if path[-1] in node:
            return None
        node[path[-1]] = i
    if not all(_tree_ok(t) for t in trees.values()):
        return None
    return list(trees), [str(n) for n in names], trees


def _tree_ok(t) -> bool:
    """Each node's keys are all strings (a dict) or all ints >= 0 (a tuple)."""
    if not isinstance(t, dict):
        return True
    kinds = {type(k) for k in t}
    return (kinds <= {str} or (kinds <= {int} and min(t) >= 0)) and all(_tree_ok(v) for v in t.values())


def _tree_source(t, leaves: str) -> str:
    """Source building the argument tree `t` from the list named `leaves`
    (a tuple's missing positions are None, which has no leaves)."""
    if not isinstance(t, dict):
        return f"{leaves}[{t}]"
    if all(isinstance(k, str) for k in t):
        return "{" + ", ".join(f"{k!r}: {_tree_source(v, leaves)}" for k, v in t.items()) + "}"
    return _tuple(_tree_source(t[i], leaves) if i in t else "None" for i in range(max(t) + 1))


def call_arguments(prog: Program, leaves: str = "args") -> str:
    """The arguments of `f` (program_source) as source, from the inputs in the
    list named `leaves`: `*args` unless some input is a leaf of a pytree."""
    sig = _signature(prog)
    if sig is None or all(not isinstance(t, dict) for t in sig[2].values()):
        return f"*{leaves}"
    return ", ".join(_tree_source(t, leaves) for t in sig[2].values())


# --------------------------------------------------------------------------
# programs as source

def _assign(outs: list[str], expr: str, multiple: bool) -> str:
    """`outs = expr` for an equation's outputs (none: the call alone)."""
    if not multiple:
        return f"{outs[0]} = {expr}"
    if not outs:
        return expr
    return f"{', '.join(outs)}{',' if len(outs) == 1 else ''} = {expr}"


def _lax_scan_makes(e) -> bool:
    """Whether lax.scan over a step closing over the consts makes exactly the
    scan equation `e`: it hoists the values the body reads, in the order it
    first reads them (so every const a distinct variable, read, in order),
    moves a carry the body passes through unchanged to the consts, and
    forwards an xs the body returns as a ys (jax/_src/lax/control_flow/
    loops.py, scan: `pe._jaxpr_forwarding`; found by a campaign on 0.4.25: a
    const no equation read, which the reproducer's lax.scan dropped, and with
    it JAX's barrier). A body that holds a constant array of its own is not
    what lax.scan makes either: it would hoist the array into a const (found
    by a pristine campaign: a JAX crash only the bound form shows)."""
    body, nc, nk = e.params["jaxpr"], e.params["num_consts"], e.params["num_carry"]
    if any(isinstance(a, Literal) and not a.is_scalar for a in [a for q in body.eqns for a in q.inputs] + list(body.outputs)):
        return False
    consts, carries, xs = body.inputs[:nc], body.inputs[nc:nc + nk], body.inputs[nc + nk:]
    if any(isinstance(a, Literal) for a in e.inputs[:nc]) or len(set(e.inputs[:nc])) < nc:
        return False
    first_reads = []
    for a in [a for q in body.eqns for a in q.inputs] + list(body.outputs):
        if any(a is c for c in consts) and not any(a is r for r in first_reads):
            first_reads.append(a)
    passed_through = any(o is c for o, c in zip(body.outputs[:nk], carries))
    xs_returned = any(o is x for o in body.outputs[nk:] for x in xs)
    return len(first_reads) == nc and all(a is c for a, c in zip(first_reads, consts)) \
        and not passed_through and not xs_returned


def _tuple(items) -> str:
    """A tuple display of source items: (), (a,), (a, b)."""
    items = list(items)
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _ident(s) -> str:
    """A string made an identifier fragment."""
    return re.sub(r"\W", "_", str(s or "")).strip("_")[:30] or "fn"


class _Writer:
    """Writes spec programs out as Python functions of JAX values. Each
    sub-program is a def nested where it is used; a custom function is
    written once, at module level (its rules may call it again), with its
    rules' traced programs; helpers are collected by name."""

    def __init__(self, taken=(), spelling: Spelling = CANONICAL, x64: bool = False):
        self.spelling = spelling
        self.x64 = x64                         # the reproducer enables jax_enable_x64
        self.taken = set(taken) | _GLOBALS
        self.counter = itertools.count()
        self.blocks: list[list[str]] = []      # module-level definitions
        self.helpers: set[str] = set()
        self.customs: dict = {}                # fingerprint -> the custom function's name
        self.policies: dict = {}               # id of a user policy written out -> its name
        self.constants: dict = {}              # id of a 0-d constant's array -> (the array, its name)

    def fresh(self, hint: str = "v") -> str:
        """A new name: hint and a number, distinct from every name taken."""
        while True:
            name = f"{hint}{next(self.counter)}"
            if name not in self.taken:
                self.taken.add(name)
                return name

    def use(self, helper: str) -> str:
        """Note that the script needs `helper` (and what it calls); its name."""
        self.helpers.add(helper)
        self.helpers.update(_NEEDS.get(helper, ()))
        return helper

    def function(self, p: Program, fname: str, indent: str, out: list, params=None, reads=None) -> str:
        """Write `def fname(...)` computing p into `out`; returns fname. `params`
        and `reads` (each input's expression) default to fresh names."""
        env = {}
        if params is None:
            params = [self.fresh() for _ in p.inputs]
            reads = params
        for v, r in zip(p.inputs, reads):
            env[v.id] = r
        out.append(f"{indent}def {fname}({', '.join(params)}):")
        body = indent + "    "
        skip = _fused_conversions(p)
        for i, e in enumerate(p.eqns):
            if i not in skip:
                self.eqn(e, env, body, out, fused=p.eqns[i - 1] if i - 1 in skip else None)
        out.append(f"{body}return {_tuple(self.atom(a, env) for a in p.outputs)}")
        return fname

    def atom(self, a, env) -> str:
        """A variable's name, or a literal's source (see _scalar_source)."""
        if isinstance(a, Var):
            return env[a.id]
        if a.is_scalar:
            return _scalar_source(a.value, self.x64)
        return self.constant_0d(a) if a.type.ndim == 0 and not is_key(a.type.dtype) else _array_source(a.value)

    def constant_0d(self, a) -> str:
        """The module-level name of a 0-d constant JAX keeps a constvar
        (spec.ir.as_constvar): a jax Array made before any trace (JAX
        inlines a 0-d numpy array, or an Array made while tracing)."""
        if id(a.value) not in self.constants:
            name = self.fresh("constant")
            self.blocks.append([f"{name} = jnp.asarray({_array_source(a.value)})"])
            self.constants[id(a.value)] = (a.value, name)
        return self.constants[id(a.value)][1]

    def eqn(self, e, env, indent, out, fused=None):
        """Write one equation (a convert_element_type `fused` into it before)."""
        if fused is not None:           # its output is read as its input (lax.cond converts)
            env[fused.outputs[0].id] = self.atom(fused.inputs[0], env)
        ins = [self.atom(a, env) for a in e.inputs]
        outs = [self.fresh() for _ in e.outputs]
        name = e.primitive.name
        write = getattr(self, f"emit_{name}", None)
        spelled = jnp_source(e, ins) if self.spelling.jnp and write is None else None
        if spelled is not None:
            line = _assign(outs, spelled, e.primitive.multiple_results)
        elif write is not None:
            line = write(e, ins, outs, indent, out, fused=fused, env=env)
        else:
            params = [f"{k}={_param_source(v)}" for k, v in e.params.items()]
            line = _assign(outs, f"E[{name!r}]({', '.join(ins + params)})", e.primitive.multiple_results)
        out.append(indent + line)
        for v, o in zip(e.outputs, outs):
            env[v.id] = o

    def sub(self, p: Program, kind: str, indent: str, out: list) -> str:
        """A nested def computing sub-program p; its name."""
        return self.function(p, self.fresh(kind), indent, out)

    # ---- one method per primitive with sub-programs or no lax emitter:
    # each returns the statement binding `outs`

    def emit_call(self, e, ins, outs, indent, out, **_):
        fn = self.sub(e.params["jaxpr"], "jitted", indent, out)
        if e.params["name"] is None:        # closed_call
            return _assign(outs, f"{self.use('closed_call')}({fn})({', '.join(ins)})", True)
        out.append(f"{indent}{fn}.__name__ = {e.params['name']!r}")
        return _assign(outs, f"jax.jit({fn})({', '.join(ins)})", True)

    def emit_remat(self, e, ins, outs, indent, out, **_):
        p = e.params
        fn = self.sub(p["jaxpr"], "checkpointed", indent, out)
        policy = self.policy(p["policy"])
        if p["differentiated"]:
            call = f"{self.use('differentiated_checkpoint')}({fn}, {policy}, {p['prevent_cse']!r})"
            return _assign(outs, f"{call}({', '.join(ins)})", True)
        return _assign(outs, self.spelled_checkpoint(e, fn, indent, out).replace("{ARGS}", ", ".join(ins)), True)

    def spelled_checkpoint(self, e, fn, indent, out) -> str:
        """The call of checkpointed `fn` in the writer's spelling; `{ARGS}`
        stands for the operands. The decorator form decorates a def that
        calls `fn`; with static_argnums that def takes the output count
        first (static) and returns that many outputs."""
        p, sp_ = e.params, self.spelling
        target = fn
        if sp_.static_argnums or sp_.checkpoint == "decorator":
            target = self.fresh(f"{fn}_")
        deco, call = checkpoint_source(sp_, target, len(e.outputs), self.policy, p["policy"], p["prevent_cse"])
        if target != fn:
            head, ret = ("n_out, *args", f"{fn}(*args)[:n_out]") if sp_.static_argnums else ("*args", f"{fn}(*args)")
            out += [indent + d for d in deco] + [f"{indent}def {target}({head}):", f"{indent}    return {ret}"]
        return call.replace("{}", "{ARGS}")

    def emit_remat_opt(self, e, ins, outs, indent, out, **_):
        p = e.params
        fwd = self.sub(p["fwd_jaxpr"], "remat_opt_fwd", indent, out)
        fun = self.sub(p["fun_jaxpr"], "remat_opt_fun", indent, out)
        call = f"{self.use('remat_opt')}({fwd}, {fun}, {p['num_consts']!r}, {p['num_res']!r})"
        return _assign(outs, f"{call}({', '.join(ins)})", True)

    def emit_custom_linear_solve(self, e, ins, outs, indent, out, **_):
        """JAX's custom_linear_solve bound on the four sub-programs (custom_linear_solve helper)."""
        p = e.params
        fns = ["None" if j is None else self.sub(j, f"linear_solve_{field}", indent, out)
               for field, j in zip(("matvec", "vecmat", "solve", "transpose_solve"), p["jaxprs"])]
        call = f"{self.use('custom_linear_solve')}({_tuple(fns)}, {tuple(int(n) for n in p['const_lengths'])!r})"
        return _assign(outs, f"{call}({', '.join(ins)})", True)

    def emit_name(self, e, ins, outs, indent, out, **_):
        return _assign(outs, f"checkpoint_name({ins[0]}, {e.params['name']!r})", False)

    def emit_device_put(self, e, ins, outs, indent, out, **_):
        """One device_put of every operand (a tuple: one equation, as JAX binds it)."""
        space = "Host" if "host" in str(e.params["memory_space"]) else "Device"
        operands = f"({', '.join(ins)},)"
        if space == "Device" and all(a.type.memory_space is None for a in e.inputs):    # a copy where it is
            return _assign(outs, f"jax.device_put({operands})", True)
        return _assign(outs, f"jax.device_put({operands}, jax.memory.Space.{space})", True)

    def emit_pure_callback(self, e, ins, outs, indent, out, **_):
        """E['pure_callback'] with the user's callback imported by module and
        qualified name (spec/prims_callback.py): JAX's _FlatCallback of it,
        its in_tree rebuilt from a skeleton of tuples, lists and dicts."""
        p = e.params
        cb = p["callback"]
        fn, tree = (cb.callback_func, cb.in_tree) if type(cb).__name__ == "_FlatCallback" else (cb, None)
        src = _import_source(fn, "pure_callback's callback")
        if tree is not None:
            skeleton = _tree_skeleton_source(tree.unflatten([0] * tree.num_leaves))
            if skeleton is None:
                from oracle.errors import Unsupported
                raise Unsupported(f"a reproducer cannot write pure_callback's argument structure {tree} "
                                  "(supported: tuples, lists, dicts with string keys and None around arrays)")
            src = f"jax._src.callback._FlatCallback({src}, jax.tree_util.tree_structure({skeleton}))"
        params = [f"callback={src}"] + [f"{k}={_param_source(v)}" for k, v in p.items() if k != "callback"]
        return _assign(outs, f"E['pure_callback']({', '.join(ins + params)})", True)

    def emit_scan(self, e, ins, outs, indent, out, **_):
        """lax.scan where it makes exactly this equation (`_lax_scan_makes`),
        else JAX's scan primitive bound on it (bind_scan), as oracle.to_jax
        runs every scan."""
        p = e.params
        nc, nk = p["num_consts"], p["num_carry"]
        fn = self.sub(p["jaxpr"], "scan_body", indent, out)
        loop = f"length={p['length']!r}, reverse={p['reverse']!r}, unroll={p['unroll']!r})"
        if not _lax_scan_makes(e):
            return (f"{_tuple(outs[:nk])}, {_tuple(outs[nk:])} = {self.use('bind_scan')}({fn}, {_tuple(ins[:nc])}, "
                    f"{_tuple(ins[nc:nc + nk])}, {_tuple(ins[nc + nk:])}, {loop}")
        step = f"{self.use('scan_step')}({fn}, {_tuple(ins[:nc])}, {nk})"
        return (f"{_tuple(outs[:nk])}, {_tuple(outs[nk:])} = jax.lax.scan({step}, {_tuple(ins[nc:nc + nk])}, "
                f"{_tuple(ins[nc + nk:])}, {loop}")

    def emit_cond(self, e, ins, outs, indent, out, fused=None, env=None):
        fns = [self.sub(b, "branch", indent, out) for b in e.params["branches"]]
        operands = "".join(f", {a}" for a in ins[1:])
        if fused is not None:               # index = convert_element_type(pred): lax.cond makes it
            return _assign(outs, f"jax.lax.cond({ins[0]}, {fns[1]}, {fns[0]}{operands})", True)
        return _assign(outs, f"{self.use('bind_cond')}({ins[0]}, {_tuple(fns)}{operands})", True)

    def emit_while(self, e, ins, outs, indent, out, **_):
        p = e.params
        nc, nb = p["cond_nconsts"], p["body_nconsts"]
        cond_fn = self.sub(p["cond_jaxpr"], "loop_cond", indent, out)
        body_fn = self.sub(p["body_jaxpr"], "loop_body", indent, out)
        if _drops_consts(e):
            return _assign(outs, f"{self.use('bind_while')}({cond_fn}, {body_fn}, {_tuple(ins[:nc])}, "
                                 f"{_tuple(ins[nc:nc + nb])}, {_tuple(ins[nc + nb:])})", True)
        cc = "".join(f"{a}, " for a in ins[:nc])
        bc = "".join(f"{a}, " for a in ins[nc:nc + nb])
        return _assign(outs, f"jax.lax.while_loop(lambda carry: {cond_fn}({cc}*carry)[0], lambda carry: "
                             f"tuple({body_fn}({bc}*carry)), {_tuple(ins[nc + nb:])})", True)

    def emit_reduce_window(self, e, ins, outs, indent, out, **_):
        fn = self.sub(e.params["jaxpr"], "window_computation", indent, out)
        n = len(ins) // 2
        window = "".join(f", {k}={v!r}" for k, v in e.params.items() if k != "jaxpr")
        return _assign(outs, f"jax.lax.reduce_window([{', '.join(ins[:n])}], [{', '.join(ins[n:])}], "
                             f"lambda acc, elem: list({fn}(*acc, *elem)){window})", True)

    def emit_custom_jvp_call(self, e, ins, outs, indent, out, **_):
        return _assign(outs, f"{self.custom(e)}({', '.join(ins)})", True)

    emit_custom_vjp_call = emit_custom_jvp_call

    def emit_custom_lin(self, e, ins, outs, indent, out, **_):
        p = e.params
        sz = p["symbolic_zeros"]
        floats = [is_float(t.dtype) for t in p["out_types"]]
        table = _traced(p["bwd"], _rule_keys(p["bwd"], [True] * len(floats) if not sz else floats, sz))
        rules = self.rule_dict(p["bwd"], table, "bwd", indent, out)
        types = tuple((t.shape, t.dtype) for t in p["out_types"])
        types_src = _tuple(f"({s!r}, {_dtype_source(d)})" for s, d in types)
        return _assign(outs, f"{self.use('custom_lin')}({p['bwd'].__name__!r}, {rules}, {p['num_res']!r}, "
                             f"{tuple(p['in_nonzeros'])!r}, {sz!r}, {types_src})({', '.join(ins)})", True)

    # ---- custom functions, written once at module level

    def custom(self, e) -> str:
        """The module-level name of the custom function an equation applies."""
        p = e.params
        vjp = e.primitive.name == "custom_vjp_call"
        tables = _rule_tables(e)
        key = (e.primitive.name, p["name"], p["symbolic_zeros"], p.get("num_consts"), _fingerprint(p["jaxpr"])) + tuple(
            (r.__name__, tuple((k, _fingerprint(prog), nz) for k, prog, nz in t)) for r, t in tables)
        if key in self.customs:
            return self.customs[key]
        name = self.customs[key] = self.fresh(f"custom_{_ident(p['name'])}")
        block = []
        primal = self.function(p["jaxpr"], self.fresh(f"{name}_primal"), "", block)
        kinds = ("fwd", "bwd") if vjp else ("jvp",)
        dicts = [self.rule_dict(r, t, f"{name}_{k}", "", block) for (r, t), k in zip(tables, kinds)]
        head = f"{name} = {self.use('custom_vjp_function' if vjp else 'custom_jvp_function')}({primal}, {p['name']!r}, "
        consts = f", num_consts={p['num_consts']!r}" if p.get("num_consts") else ""
        if vjp:
            head += f"{len(p['jaxpr'].outputs)}, {tables[0][0].__name__!r}, {dicts[0]}, {tables[1][0].__name__!r}, "
            head += f"{dicts[1]}, symbolic_zeros={p['symbolic_zeros']!r}{consts})"
        else:
            head += f"{tables[0][0].__name__!r}, {dicts[0]}, symbolic_zeros={p['symbolic_zeros']!r}{consts})"
        self.blocks.append(block + ["", head])
        return name

    def rule_dict(self, rule, table, hint, indent, out) -> str:
        """Write each traced program of a rule as a def; the dict (source) of
        nonzero pattern -> (def, nonzero outputs)."""
        entries = []
        for key, prog, nz in table:
            out += ["", f"{indent}# {rule.__name__}, traced for nonzero {key}"]
            fn = self.function(prog, self.fresh(hint), indent, out)
            entries.append(f"{key!r}: ({fn}, {nz!r})")
        return "{" + ", ".join(entries) + "}"

    def policy(self, policy) -> str:
        """A policy's source; a user function's own, written out once, when
        it is self-contained (see _function_source)."""
        src = _policy_source(policy)
        if not src.startswith("user_policy("):
            return src
        fn = getattr(policy, "fn", policy)
        if id(fn) in self.policies:
            return self.policies[id(fn)]
        own = _function_source(fn)
        if own is None or fn.__name__ in self.taken:
            self.use("user_policy")
            return src
        self.taken.add(fn.__name__)
        self.policies[id(fn)] = fn.__name__
        self.blocks.append(own.rstrip("\n").splitlines())
        return fn.__name__


def _import_source(fn, what: str) -> str:
    """Source importing `fn` by its module and qualified name, where that
    gives `fn` itself back; else Unsupported (for the reproducer only)."""
    import importlib
    from oracle.errors import Unsupported
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    why = None
    if not module or not qualname:
        why = "it has no module and qualified name"
    elif module == "__main__" or "<" in qualname:
        why = f"it is defined {'in a script (__main__)' if module == '__main__' else 'inside a function'}"
    else:
        try:
            found = importlib.import_module(module)
            for part in qualname.split("."):
                found = getattr(found, part)
        except Exception:      # noqa: BLE001 -- any failure means: not importable as named
            found = None
        if found is not fn:
            why = f"{module}.{qualname} does not import it"
    if why is not None:
        raise Unsupported(f"a reproducer cannot write {what} {fn!r}: {why}; supported: a function or "
                          "class a reproducer can import by module and qualified name (defined at "
                          "the top level of an importable module)")
    return f"__import__('importlib').import_module({module!r}).{qualname}"


def _tree_skeleton_source(node) -> str | None:
    """Source of a pytree of tuples, lists, dicts (string keys) and None
    whose leaves are 0; None for any other node."""
    if node is None or (type(node) is int and node == 0):
        return repr(node)
    if type(node) in (tuple, list):
        items = [_tree_skeleton_source(x) for x in node]
        if any(i is None for i in items):
            return None
        return _tuple(items) if type(node) is tuple else "[" + ", ".join(items) + "]"
    if type(node) is dict and all(type(k) is str for k in node):
        items = {k: _tree_skeleton_source(v) for k, v in node.items()}
        if any(v is None for v in items.values()):
            return None
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in items.items()) + "}"
    return None


_MODULES = {"jax": "jax", "jnp": "jax.numpy", "lax": "jax.lax", "np": "numpy"}


def _function_source(fn) -> str | None:
    """The source of a user policy that is a plain function reading no
    globals but the modules a reproducer imports (jax, jnp, lax, np, under
    those names) and builtins: it can be pasted into the reproducer. None
    for anything else (closures, lambdas, decorated functions, ...)."""
    import builtins
    import types
    if not isinstance(fn, types.FunctionType) or fn.__closure__ or not fn.__name__.isidentifier():
        return None
    try:
        src = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(src)
    except (OSError, TypeError, SyntaxError):
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef) or tree.body[0].decorator_list \
            or tree.body[0].name != fn.__name__:
        return None
    names = [n for n in ast.walk(tree) if isinstance(n, ast.Name)]
    bound = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)} | {
        n.id for n in names if not isinstance(n.ctx, ast.Load)}
    free = {n.id for n in names if isinstance(n.ctx, ast.Load)} - bound - set(dir(builtins))
    for name in free:
        module = fn.__globals__.get(name)
        if name not in _MODULES or getattr(module, "__name__", None) != _MODULES[name]:
            return None
    return src


def _rule_keys(rule, nonzeros, symbolic_zeros) -> list[tuple]:
    """The nonzero patterns to write a rule out for: without symbolic zeros
    the one JAX uses (`nonzeros`); with them every pattern of the
    perturbable positions (up to 4 of them), else all, plus those traced."""
    full = tuple(bool(n) for n in nonzeros)
    if not symbolic_zeros:
        return [full]
    where = [i for i, n in enumerate(full) if n]
    keys = [full]
    if len(where) <= 4:
        for r in range(len(where) - 1, -1, -1):
            for chosen in itertools.combinations(where, r):
                keys.append(tuple(i in chosen for i in range(len(full))))
    keys += [k for k in getattr(rule, "_memo", {}) if len(k) == len(full)]
    return list(dict.fromkeys(keys))


def _traced(rule, keys, num_consts=0) -> list[tuple]:
    """(key, program, nonzero outputs) for each key the rule can be traced
    for. With num_consts, `keys` are the arguments' and the rule is traced
    with no const perturbed (the written function closes over the consts:
    their values only)."""
    out = []
    for key in keys:
        try:
            prog, nz = rule((False,) * num_consts + tuple(key))
        except Exception:       # a pattern the rule does not handle: JAX would fail there too
            continue
        out.append((key, prog, tuple(nz)))
    return out


def _arg_keys(rule, nonzeros, symbolic_zeros, num_consts) -> list[tuple]:
    """_rule_keys of a custom call's rule over its arguments (not its consts)."""
    if not num_consts:
        return _rule_keys(rule, nonzeros, symbolic_zeros)
    traced = [k[num_consts:] for k in getattr(rule, "_memo", {}) if not any(k[:num_consts])]
    keys = _rule_keys(None, nonzeros[num_consts:], symbolic_zeros)
    if symbolic_zeros:
        keys += [k for k in traced if len(k) == len(keys[0])]
    return list(dict.fromkeys(keys))


def _rule_tables(e) -> list[tuple]:
    """[(rule, traced table)] of a custom_jvp_call (jvp) or custom_vjp_call (fwd, bwd)."""
    p = e.params
    sz = p["symbolic_zeros"]
    nc = p.get("num_consts") or 0
    floats = [is_float(t.dtype) for t in p["jaxpr"].in_types]
    if e.primitive.name == "custom_jvp_call":
        return [(p["jvp"], _traced(p["jvp"], _arg_keys(p["jvp"], floats, sz, nc), nc))]
    fwd = _traced(p["fwd"], _arg_keys(p["fwd"], floats, sz, nc), nc)
    outs = [is_float(t.dtype) for t in p["jaxpr"].out_types] if sz else [True] * len(p["jaxpr"].outputs)
    return [(p["fwd"], fwd), (p["bwd"], _traced(p["bwd"], _rule_keys(p["bwd"], outs, sz)))]


def _fused_conversions(p: Program) -> set[int]:
    """Positions of `convert_element_type(pred: bool) -> i32` equations whose
    output is only the index of the two-branch cond right after them: the
    pair is written as lax.cond(pred, ...), which makes that conversion."""
    uses: dict = {}
    for e in p.eqns:
        for a in e.inputs:
            uses[id(a)] = uses.get(id(a), 0) + 1
    for a in p.outputs:
        uses[id(a)] = uses.get(id(a), 0) + 2
    fused = set()
    for i, (e, nxt) in enumerate(zip(p.eqns, p.eqns[1:])):
        if (e.primitive.name == "convert_element_type" and isinstance(e.inputs[0], Var)
                and e.inputs[0].type.dtype == np.bool_ and e.params["new_dtype"] == np.int32
                and not e.params["weak_type"] and nxt.primitive.name == "cond"
                and len(nxt.params["branches"]) == 2 and nxt.inputs[0] is e.outputs[0]
                and uses[id(e.outputs[0])] == 1 and not _has_passthroughs(nxt)):
            fused.add(i)
    return fused


def _drops_consts(loop) -> bool:
    """Whether a while loop's cond or body leaves one of its consts unread:
    lax.while_loop closes over only what they read, so the program it
    stages would not be the checked one, which binds the while primitive
    (oracle.to_jax): a reproducer on 0.4.36 of a while whose body ignores
    its const saved nothing where the check's JAX saved the const's
    derivative factor (release campaign finding 927ac9c8b9)."""
    p = loop.params
    return any(_unread_inputs(prog, n) for prog, n in ((p["cond_jaxpr"], p["cond_nconsts"]),
                                                        (p["body_jaxpr"], p["body_nconsts"])))


def _unread_inputs(prog: Program, n: int) -> bool:
    """Whether one of the first `n` inputs of `prog` is read nowhere in it."""
    read = {a.id for e in prog.eqns for a in e.inputs if isinstance(a, Var)}
    read |= {a.id for a in prog.outputs if isinstance(a, Var)}
    return any(v.id not in read for v in prog.inputs[:n])


def _has_passthroughs(cond) -> bool:
    """Whether every branch of `cond` returns one same operand as an output:
    lax.cond prunes that output ("prune passthrough outputs",
    jax/_src/lax/control_flow/conditionals.py, from jax 0.6.0), so the
    program it stages would not be the one checked, which binds the cond
    primitive (oracle.to_jax): a reproducer on 0.6.2 of a nested cond
    reduced to passthroughs saved nothing where the check's JAX saved a
    value (release campaign finding c86d6c6549)."""
    return any(f is not None for f in passthroughs(cond.params["branches"]))


def program_source(prog: Program, name: str = "f", spelling: Spelling = CANONICAL) -> str:
    """Python source of a function `name` computing `prog` with JAX, and of
    what it uses (helpers, custom functions) but the imports and the
    emitter table E. It takes the program's inputs under the names JAX gave
    them, so that JAX names them alike (see call_arguments); where one is a
    leaf of a pytree, `{name}_leaves` takes the leaves."""
    sig = _signature(prog)
    tree = sig is not None and any(isinstance(t, dict) for t in sig[2].values())
    w = _Writer(taken=(sig[0] if sig else []) + [name, f"{name}_leaves"], spelling=spelling,
                x64=_uses_f64(prog))
    main: list[str] = []
    # (an outer jit of the spelling is in the program: the call JAX traced it to)
    w.function(prog, name, "", main, *(sig[:2] if sig else (None, None)))
    if tree:
        main += ["", "", f"def {name}_leaves(*leaves):",
                 f"    \"\"\"{name} of its arguments' leaves, in JAX's order.\"\"\"",
                 f"    return {name}({call_arguments(prog, 'leaves')})"]
    parts = [_helper_source(h) for h in _HELPERS if h in w.helpers]
    parts += ["\n".join(b) for b in w.blocks] + ["\n".join(main)]
    return "\n\n\n".join(parts)


def _flat_name(prog: Program, name: str = "f") -> str:
    """The function of program_source that takes the inputs as a flat list."""
    return f"{name}_leaves" if call_arguments(prog) != "*args" else name


# the float outputs, in the JAX code of reproducers and of stacks
# (oracle/stacks.py): a pullback takes the float outputs' cotangents, as
# the checker's does (oracle/properties.py `_floats`)
FLOAT_OUTPUTS_SOURCE = '''
def is_float(v):
    return jnp.issubdtype(jnp.result_type(v), jnp.inexact)


def floats(outs):
    """The float (real or complex) outputs (an integer output has no
    tangent or cotangent)."""
    return tuple(o for o in outs if is_float(o))
'''
_FLOATS_SOURCE = FLOAT_OUTPUTS_SOURCE.lstrip("\n") + "\n\n"


# each property as the checker computes it (oracle/properties.py): inputs,
# tangents and cotangents are arguments of the jitted function, not constants
_PROPERTY_CODE = {
    "values": "got = list(jax.jit({f})(*args))",
    "jvp": ("primals, tans = jax.jit(lambda a, t: jax.jvp(lambda *d: {f}(*with_diff(a, d)), [a[i] for i in diff], "
            "[t[i] for i in diff]))(args, tangents)\n"
            "got = [t for p, t in zip(primals, tans) if jnp.issubdtype(p.dtype, jnp.inexact)]"),
    "vjp": "got = list(jax.jit(lambda a, c: pullback(a, c)(*[a[i] for i in diff]))(args, cts))",
    "second_order": ("got = list(jax.jit(lambda a, c, t: jax.jvp(pullback(a, c), [a[i] for i in diff], "
                     "[t[i] for i in diff])[1])(args, cts, tangents))"),
    "vmap": "got = list(jax.jit(jax.vmap({f}))(*batched))",
}


def _header(prog: Program, prop: str, impl: str, message: str) -> str:
    """The reproducer's docstring, imports, emitter table and JAX settings."""
    found = ", ".join(f"{k}={v}" for k, v in environment().items())
    text = f'''"""oracle.check reproducer: {prop} differs under {impl}.

{message}

found on: {found}
"""
import re

import functools

import jax, jaxlib
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax.ad_checkpoint import checkpoint_name
'''
    text += _release_source(impl)
    if _uses_f64(prog):
        text += "jax.config.update('jax_enable_x64', True)\n"
    return text + "print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, jax.default_backend())\n\n"


def _release_source(impl: str) -> str:
    """The emitter table as this release runs it (oracle/jax_api/source.py),
    and the flag lines selecting `impl` (none where there is no jax_remat3
    flag)."""
    return emitter_table_source(_EMITTERS) + "\n" + flag_settings_source(impl)


def _one_side_raised_ending(message: str) -> str:
    """The last line of a reproducer where one side raised, JAX's side having
    run above: where JAX raised (and the spec computes), reaching it means
    JAX computes too, so the script passes (a release that fixed it: found
    on 0.4.25, a reproducer that failed on 0.10.2 as well); where the spec
    raised, it exits with the message."""
    first = message.splitlines()[0]
    if first.startswith("JAX raised "):
        return "print('JAX computes, as the spec does')\n"
    return f"raise SystemExit({first!r})\n"


def _residuals_check(prog: Program, prop: str, message: str) -> str:
    """The code comparing JAX's saved residuals of f with the spec's."""
    try:
        expected = [f"{r.type} {r.source}" for r in spec.saved_residuals(prog)]
    except Exception as e:      # the spec refuses (as JAX should): the repro shows JAX's answer
        expected = f"the spec raises {type(e).__name__}: {e}"
    text = f"expected = {expected!r}  # the spec's answer\n"
    text += ("from jax._src.ad_checkpoint import saved_residuals\n"
             "got = [f\"{a.str_short(short_dtypes=True).replace(' ', '')} {re.sub(r' from .*$', '', s)}\" "
             f"for a, s in saved_residuals(f, {call_arguments(prog)})]\n"
             "print('JAX residuals: ', got)\nprint('spec residuals:', expected)\n")
    if prop == "residuals":
        return text + _residuals_assertion(prog)
    return text + _one_side_raised_ending(message)


def _barriers_check(prog: Program, message: str) -> str:
    """The code counting the optimization barriers in JAX's lowered
    backward pass of f (oracle.properties.jax_barriers: jit of the pullback
    of ones) and comparing whether there are any with the spec's count;
    where one side raised, the ending that says so."""
    from spec.barriers import optimization_barriers
    try:
        expected = optimization_barriers(prog)
    except Exception as e:      # the spec refuses (as JAX should): the repro shows JAX's answer
        expected = f"the spec raises {type(e).__name__}: {e}"
    text = f"expected = {expected!r}  # the spec's count\n\n\n"
    text += ("def backward(*a):\n"
             f"    outs, pullback = jax.vjp({_flat_name(prog)}, *a)\n"
             "    return pullback(tuple(jnp.ones_like(o) for o in outs))\n\n\n"
             "got = jax.jit(backward).lower(*args).as_text().count('optimization_barrier')\n"
             "print('JAX barriers:', got, ' spec barriers:', expected)\n")
    if not isinstance(expected, int) or message.startswith("JAX raised "):
        return text + _one_side_raised_ending(message)
    return text + "assert (got > 0) == (expected > 0), 'optimization barriers differ from the spec'\n"


def _transformed_residuals_check(prog: Program, numeric: dict, code: str) -> str:
    """The code comparing JAX's saved residuals of a transformed function
    (`code` computes `got` from `operands`) with the spec's."""
    text = "operands = [" + ", ".join(_array_source(a) for a in numeric.get("operands", [])) + "]\n"
    text += f"expected = {[f'{t} {s}' for t, s in numeric['residuals']]!r}  # the spec's answer\n"
    text += code + "\n"
    return (text + "print('JAX residuals: ', got)\nprint('spec residuals:', expected)\n"
            + _residuals_assertion(prog))


_ABSENT_LITERALS_SOURCE = '''

def without_absent_literals(expected, got):
    """expected without the `from a literal` entries got lacks: JAX saves no
    residual for a scalar written as a Python float or a numpy scalar, which
    the spec saves (known divergence
    literal-residuals-depend-on-the-constant-s-python-type)."""
    spare = [r for r in got if r.endswith(' from a literal')]
    kept = []
    for r in expected:
        if r.endswith(' from a literal'):
            if r not in spare:
                continue
            spare.remove(r)
        kept.append(r)
    return kept


'''


def _residuals_assertion(prog: Program) -> str:
    """The assertion ending a residuals reproducer: the lists are equal, or,
    where the program has a scalar literal (written as the check binds it:
    a Python float or a numpy scalar), differ as that known divergence allows."""
    if not any(isinstance(a, Literal) and a.is_scalar
               for p in _all_programs(prog) for e in p.eqns for a in e.inputs):
        return "assert got == expected, 'saved residuals differ from the spec'\n"
    return (_ABSENT_LITERALS_SOURCE + "assert got in (expected, without_absent_literals(expected, got)), "
            "'saved residuals differ from the spec'\n")


def _transformed_barriers_check(numeric: dict, code: str) -> str:
    """The code counting the optimization barriers in a transformed
    function's StableHLO (`code` computes `got` from `operands`), and
    comparing whether there are any with the spec's count."""
    text = "operands = [" + ", ".join(_array_source(a) for a in numeric.get("operands", [])) + "]\n"
    text += f"expected = {numeric['barriers']!r}  # the spec's count\n"
    text += code + "\n"
    return text + ("print('JAX barriers:', got, ' spec barriers:', expected)\n"
                   "assert (got > 0) == (expected > 0), 'optimization barriers differ from the spec'\n")


def _numeric_check(prog: Program, args, prop: str, numeric: dict | None, code: str | None = None,
                   message: str = "") -> str:
    """The code computing a numeric property with JAX and comparing it with
    the spec's answer (`numeric`: expected, atol, tangents, cts, batched;
    with `raised`, one side raised: the code ends with `message`)."""
    n = numeric or {}
    text = "diff = " + repr([i for i, a in enumerate(args) if is_float(np.asarray(a).dtype)]) + "\n\n\n"
    text += ("def with_diff(full, d):\n    full = list(full)\n    for i, x in zip(diff, d):\n"
             "        full[i] = x\n    return full\n\n\n"
             + _FLOATS_SOURCE +
             "def pullback(a, c):\n"
             f"    return lambda *d: jax.vjp(lambda *dd: floats({_flat_name(prog)}(*with_diff(a, dd))), *d)[1](tuple(c))\n\n\n")
    for key in ("tangents", "cts", "batched", "operands"):
        text += f"{key} = [" + ", ".join(_array_source(a) for a in n.get(key, [])) + "]\n"
    text += "expected = [" + ", ".join(_array_source(a) for a in n.get("expected", [])) + "]  # the spec's answer\n"
    text += f"atol = {n.get('atol', 0.0)!r}  # oracle.tolerances for this program\n"
    text += (code.replace("{f}", _flat_name(prog)) if code else _PROPERTY_CODE[prop].format(f=_flat_name(prog))) + "\n"
    if n.get("raised"):     # one side raised: JAX's side has run (or raised above)
        return text + _one_side_raised_ending(message)
    # a nan or infinity where the spec has the same agrees (as oracle.tolerances
    # compares: found by a campaign on 0.6.2, a reproducer failing on a correct JAX)
    text += ("for i, (g, w) in enumerate(zip(got, expected)):\n"
             "    g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)\n"
             "    same = (g == w) | (np.isnan(g) & np.isnan(w))\n"
             "    err = float(np.max(np.where(same, 0.0, np.abs(g - w)), initial=0.0))\n"
             "    print(f'output {i}: max abs error {err:.4g} (tolerance {atol:.3g})')\n"
             f"    assert err <= atol, f'output {{i}}: {prop} differs from the spec'\n")
    return text


def _named(prog: Program) -> Program:
    """prog, its inputs named args[i] where its own names are not ones JAX
    can give the reproducer's parameters (none, duplicates, ...): then the
    spec's residuals name arguments as JAX names the reproducer's."""
    if _signature(prog) is not None:
        return prog
    names = tuple(f"args[{i}]" for i in range(len(prog.inputs)))
    return Program(prog.inputs, prog.eqns, prog.outputs, input_names=names)


def write_repro(prog: Program, policy, args, prop: str, impl: str, message: str, directory=None,
                numeric: dict | None = None, code: str | None = None,
                spelling: Spelling = CANONICAL) -> Repro:
    """A standalone jax + numpy script that fails with the discrepancy:
    the program is rebuilt from the spec IR (checkpoints included), the
    inputs and the spec's expected answer are embedded. `code`: the
    numeric property's own code computing `got` (`{f}`: the program's
    flat function; it may read `operands`), e.g. an oracle.stacks stack."""
    prog = _named(prog)
    text = _header(prog, prop, impl, message)
    text += program_source(prog, spelling=spelling) + "\n\n\n"
    text += "args = [\n" + "".join(f"    {_array_source(a)},\n" for a in args) + "]\n"
    if code and numeric and "residuals" in numeric:     # a transformed function's residuals
        text += _transformed_residuals_check(prog, numeric, code.replace("{f}", _flat_name(prog)))
    elif code and numeric and "barriers" in numeric:    # a transformed function's barriers
        text += _transformed_barriers_check(numeric, code.replace("{f}", _flat_name(prog)))
    elif prop in ("residuals", "vjp_leaves"):
        text += _residuals_check(prog, prop, message)
    elif prop == "prevent_cse":
        text += _barriers_check(prog, message)
    else:
        text += _numeric_check(prog, args, prop, numeric, code, message)
    path = None
    if directory:
        os.makedirs(directory, exist_ok=True)
        digest = hashlib.sha1(text.encode()).hexdigest()[:10]
        path = os.path.join(directory, f"repro_{prop}_{impl}_{digest}.py")
        with open(path, "w") as fh:
            fh.write(text)
    return Repro(text, path)


# every transformation oracle.check runs JAX through, as a stage of a hang
# reproducer: a stage that does not finish within the limit is the hang
_HANG_STAGES = (
    ("values", _PROPERTY_CODE["values"]),
    ("jvp", _PROPERTY_CODE["jvp"]),
    ("vjp", _PROPERTY_CODE["vjp"]),
    ("second_order", _PROPERTY_CODE["second_order"]),
    ("vmap", _PROPERTY_CODE["vmap"]),
    ("saved_residuals", "from jax._src.ad_checkpoint import saved_residuals\n"
                        "got = saved_residuals({f}, *args)"),
)


def write_hang_repro(prog: Program, args, implementations, seconds: float, message: str) -> Repro:
    """A standalone jax + numpy script that runs the program through every
    transformation oracle.check uses, under each of `implementations`, and
    exits with status 1 (printing every thread's stack) if one stage takes
    longer than `seconds`: faulthandler's watchdog, which fires even inside
    XLA's C++."""
    prog = _named(prog)
    text = _header(prog, "a hang", "/".join(implementations), message)
    text += program_source(prog) + "\n\n\n"
    text += "args = [\n" + "".join(f"    {_array_source(a)},\n" for a in args) + "]\n"
    f = _flat_name(prog)
    text += ("diff = " + repr([i for i, a in enumerate(args) if is_float(np.asarray(a).dtype)]) + "\n\n\n"
             "def with_diff(full, d):\n    full = list(full)\n    for i, x in zip(diff, d):\n"
             "        full[i] = x\n    return full\n\n\n"
             + _FLOATS_SOURCE +
             "def pullback(a, c):\n"
             f"    return lambda *d: jax.vjp(lambda *dd: floats({f}(*with_diff(a, dd))), *d)[1](tuple(c))\n\n\n"
             "tangents = [np.ones_like(a) for a in args]\n"
             f"cts = [np.ones(o.shape, o.dtype) for o in floats(jax.eval_shape({f}, *args))]\n"
             "batched = [np.stack([a, a]) for a in args]\n\n"
             "import faulthandler\n\n"
             f"for impl in {tuple(implementations)!r}:\n"
             "    if hasattr(jax.config, 'jax_remat3'):   # remat2 only before jax 0.10.2\n"
             "        jax.config.update('jax_remat3', impl == 'remat3')\n")
    for name, code in _HANG_STAGES:     # a stage that raises did not hang: the next one runs
        text += (f"    print(impl, '{name} ...', flush=True)\n"
                 f"    faulthandler.dump_traceback_later({seconds!r}, exit=True)  # still running then: a hang\n"
                 "    try:\n"
                 + "".join(f"        {line}\n" for line in code.format(f=f).splitlines())
                 + "    except Exception as e:\n"
                 f"        print(impl, '{name} raised', type(e).__name__, str(e).splitlines()[0][:200], flush=True)\n"
                 "    faulthandler.cancel_dump_traceback_later()\n")
    return Repro(text + "print('no hang: every stage finished')\n", None)
