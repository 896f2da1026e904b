"""Spellings: the equivalent user-level ways a spec program reaches JAX.

`oracle.to_jax(prog, spelling=...)` and the reproducers (oracle.repro)
write a program the way a user may: a checkpoint as `jax.checkpoint(f,
...)(x)`, as a decorator or as `jax.remat`; a policy that saves nothing
omitted, as `policy=None` or as `jax.checkpoint_policies.nothing_saveable`;
the default `prevent_cse=True` omitted or given; a checkpointed function
taking a static Python int (`static_argnums`); jax.numpy functions and
operators where they bind exactly the equation the lax call binds
(`jnp.tanh(x)`, `x @ w`, `jnp.sum(x, axis=...)`, ...:
tests/test_spellings.py compares the jaxprs); the whole function under
`jax.jit`. So JAX's own wrappers (api_util, jax.checkpoint's argument
handling, its policy=None paths) are under test, not only `bind`.

Each spelling is one Spelling (plain data, drawn per program by
fuzz.strategies.spellings); CANONICAL is the lax-call spelling with every
argument given, as to_jax always wrote it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from spec import policies as sp
from spec.ir import Var

from oracle.errors import InvalidArgument
from oracle.policies import to_jax_policy
import functools

CHECKPOINT_FORMS = ("call", "decorator", "remat")
SAVE_NOTHING = ("given", "omitted", "none", "nothing_saveable")


@dataclass(frozen=True)
class Spelling:
    checkpoint: str = "call"          # jax.checkpoint(f, ...)(x) | @decorator | jax.remat(f, ...)(x)
    save_nothing: str = "given"       # a policy of None / nothing_saveable: as the program has it,
    #                                   omitted, policy=None or policy=nothing_saveable
    default_prevent_cse: bool = True  # prevent_cse=True written out (else omitted: JAX's default)
    static_argnums: bool = False      # checkpointed functions take their output count, static
    jnp: bool = False                 # jax.numpy / operator spellings where they bind the same equation
    jit: bool = False                 # the whole function under jax.jit

    def __post_init__(self):
        if self.checkpoint not in CHECKPOINT_FORMS or self.save_nothing not in SAVE_NOTHING:
            raise InvalidArgument(f"unknown spelling {self}: checkpoint in {CHECKPOINT_FORMS}, "
                                  f"save_nothing in {SAVE_NOTHING}")


CANONICAL = Spelling()


# --------------------------------------------------------------------------
# checkpoints: their keyword arguments, at run time and as source

def _saves_nothing(policy) -> bool:
    return policy is None or policy is sp.nothing_saveable


def checkpoint_kwargs(spelling: Spelling, policy, prevent_cse: bool | tuple) -> dict:
    """jax.checkpoint's keyword arguments as (name -> ("policy", spec policy)
    | value): the policy is given as the program has it, or, for one that
    saves nothing, as the spelling says."""
    kw = {}
    if _saves_nothing(policy) and spelling.save_nothing != "given":
        if spelling.save_nothing == "none":
            kw["policy"] = ("policy", None)
        elif spelling.save_nothing == "nothing_saveable":
            kw["policy"] = ("policy", sp.nothing_saveable)
    else:
        kw["policy"] = ("policy", policy)
    if isinstance(prevent_cse, tuple):      # one flag per argument: always written out
        kw["prevent_cse"] = prevent_cse
    elif not prevent_cse or spelling.default_prevent_cse:
        kw["prevent_cse"] = bool(prevent_cse)
    if spelling.static_argnums:
        kw["static_argnums"] = (0,)
    return kw


def checkpointed(spelling: Spelling, body: Callable, n_out: int, policy, prevent_cse: bool | tuple) -> Callable:
    """The checkpointed `body` (a function of the operands returning a list)
    as this spelling makes it; call it with the operands."""
    import jax
    kw = {k: (to_jax_policy(v[1]) if isinstance(v, tuple) and v[:1] == ("policy",) else v)
          for k, v in checkpoint_kwargs(spelling, policy, prevent_cse).items()}
    fn = (lambda n, *a: body(*a)[:n]) if spelling.static_argnums else body
    if spelling.checkpoint == "remat":
        wrapped = jax.remat(fn, **kw)
    elif spelling.checkpoint == "decorator":
        wrapped = functools.partial(jax.checkpoint, **kw)(fn) if kw else jax.checkpoint(fn)
    else:
        wrapped = jax.checkpoint(fn, **kw)
    return functools.partial(wrapped, n_out) if spelling.static_argnums else wrapped


def checkpoint_source(spelling: Spelling, fn: str, n_out: int, policy_source: Callable, policy,
                      prevent_cse: bool | tuple) -> tuple[list[str], str]:
    """(lines decorating the def of `fn`, the expression to call with the
    operands) for a checkpoint of `fn` in this spelling; `policy_source`
    writes a spec policy as source."""
    parts = []
    for k, v in checkpoint_kwargs(spelling, policy, prevent_cse).items():
        parts.append(f"{k}={policy_source(v[1]) if isinstance(v, tuple) and v[:1] == ('policy',) else repr(v)}")
    kw = ", ".join(parts)
    lead = f"{n_out}, " if spelling.static_argnums else ""
    if spelling.checkpoint == "decorator":
        deco = f"@functools.partial(jax.checkpoint, {kw})" if kw else "@jax.checkpoint"
        return [deco], f"{fn}({lead}" + "{}" + ")"
    head = "jax.remat" if spelling.checkpoint == "remat" else "jax.checkpoint"
    return [], f"{head}({fn}{', ' + kw if kw else ''})({lead}" + "{}" + ")"


# --------------------------------------------------------------------------
# jax.numpy spellings: spec primitive -> (source template, guard(eqn))
#
# A template reads the operands as {0}, {1}, ... and the params by name. A
# guard says where the spelling binds exactly the lax call's equation (not,
# e.g., jnp.where: a jit of select_n): no
# literal operands (jnp would promote a Python scalar and broadcast it),
# operands of one type (no promotion or broadcasting), and the params the
# jnp function fixes.

def _vars_of_one_type(args) -> bool:
    return all(isinstance(a, Var) for a in args) and len({(a.type.shape, np.dtype(a.type.dtype))
                                                          for a in args}) == 1


def _float_vars(e, args=None) -> bool:
    args = e.inputs if args is None else args
    return _vars_of_one_type(args) and all(np.issubdtype(a.type.dtype, np.floating) for a in args)


def _exact(e) -> bool:
    return _float_vars(e) and e.params.get("accuracy") is None


def _matmul(e) -> bool:
    x, y = e.inputs
    return (isinstance(x, Var) and isinstance(y, Var) and x.type.ndim == 2 and y.type.ndim == 2
            and x.type.dtype == y.type.dtype and np.issubdtype(x.type.dtype, np.floating)
            and tuple(map(tuple, e.params["dimension_numbers"][0])) == ((1,), (0,))
            and tuple(map(tuple, e.params["dimension_numbers"][1])) == ((), ())
            and e.params.get("precision") is None
            and np.dtype(e.params.get("preferred_element_type") or x.type.dtype) == x.type.dtype)


def _reduce(e) -> bool:
    return _float_vars(e) and len(e.params["axes"]) > 0


JNP = {
    "sin": ("jnp.sin({0})", _exact),
    "cos": ("jnp.cos({0})", _exact),
    "tanh": ("jnp.tanh({0})", _exact),
    "exp": ("jnp.exp({0})", _exact),
    "log": ("jnp.log({0})", _exact),
    "log1p": ("jnp.log1p({0})", _exact),
    "sqrt": ("jnp.sqrt({0})", _exact),
    "logistic": ("jax.nn.sigmoid({0})", _exact),
    "neg": ("-{0}", _float_vars),
    "square": ("jnp.square({0})", _float_vars),
    "abs": ("jnp.abs({0})", _float_vars),
    "add": ("{0} + {1}", _float_vars),
    "sub": ("{0} - {1}", _float_vars),
    "mul": ("{0} * {1}", _float_vars),
    "max": ("jnp.maximum({0}, {1})", _float_vars),
    "min": ("jnp.minimum({0}, {1})", _float_vars),
    "integer_pow": ("{0} ** {y!r}", lambda e: _float_vars(e) and e.params["y"] not in (0, 1)),
    "dot_general": ("{0} @ {1}", _matmul),
    "reduce_sum": ("jnp.sum({0}, axis={axes!r})", _reduce),
    "reduce_max": ("jnp.max({0}, axis={axes!r})", _reduce),
    "transpose": ("jnp.transpose({0}, {permutation!r})", _float_vars),
}


def jnp_source(e, ins: list[str]) -> str | None:
    """The jax.numpy spelling of equation `e` on operand sources `ins`, or
    None where it has none that binds the same equation."""
    entry = JNP.get(e.primitive.name)
    if entry is None or not entry[1](e):
        return None
    params = {k: (tuple(v) if isinstance(v, list) else v) for k, v in e.params.items()}
    return entry[0].format(*ins, **params)


_COMPILED: dict = {}


def jnp_call(e) -> Callable | None:
    """jnp_source of `e` as a function of the operands (None: no spelling)."""
    names = [f"x{i}" for i in range(len(e.inputs))]
    src = jnp_source(e, names)
    if src is None:
        return None
    fn = _COMPILED.get(src)
    if fn is None:
        import jax
        import jax.numpy as jnp
        fn = _COMPILED[src] = eval(f"lambda {', '.join(names)}: {src}", {"jax": jax, "jnp": jnp})
    return fn
