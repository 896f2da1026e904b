"""platform_index and lax.platform_dependent
(jax/_src/lax/control_flow/conditionals.py): code that differs per
platform, as `jnp.diag` / `jnp.diagonal` of a matrix write it in jax 0.10.2
(`platform_dependent(..., default=..., mosaic=...)`).

`platform_index[platforms]` takes no operands and is the index of the entry
of `platforms` (a tuple of platform-name tuples, the last one `None` where
there is a default) that holds the platform the program is lowered for,
else of the default; JAX resolves it when lowering. `platform_dependent`
binds it and a cond on it, so every branch is traced and differentiated as
a cond's, and the index is an ordinary known i32[] value: a residual where
a staged cond reads it.

The spec lowers for `lowering_platform` ("cpu" unless set: the oracle sets
the platform of the backend JAX runs on).

    >>> import spec
    >>> from spec import ops
    >>> prog = spec.trace(lambda x: platform_dependent(x, mosaic=ops.cos, default=ops.sin), spec.f32[2])
    >>> print(prog)
    { lambda ; a:f32[2]. let
        b:i32[] = platform_index[platforms=(('mosaic',), None)]
        c:f32[2] = cond[branches=({ lambda ; d:f32[2]. let
                e:f32[2] = cos d
              in (e,) }, { lambda ; f:f32[2]. let
                g:f32[2] = sin f
              in (g,) })] b a
      in (c,) }
    >>> spec.evaluate(prog, np.float32([0., 1.]))[0].round(3)
    array([0.   , 0.841], dtype=float32)
    >>> with lowering_platform("mosaic"):
    ...     spec.evaluate(prog, np.float32([0., 1.]))[0].round(3)
    array([1.  , 0.54], dtype=float32)
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Callable

import numpy as np

from spec.core import (Example, JaxFacts, PrimitiveError, batch_rules, bind, eval_rules, examples, jax_facts,
                       jvp_rules, primitive, shape_rules)
from spec.ir import ArrayType
from spec.prims_control import switch
from spec.prims_elementwise import cos, sin

_platform = contextvars.ContextVar("lowering_platform", default="cpu")


@contextlib.contextmanager
def lowering_platform(name: str):
    """The platform programs are lowered for (JAX's lowering platform: 'cpu',
    'cuda', 'rocm', 'tpu', ...), for the duration."""
    token = _platform.set(name)
    try:
        yield
    finally:
        _platform.reset(token)


platform_index_p = primitive("platform_index", ["platforms"])


def platform_index(platforms):
    """platform_index_p.bind(platforms=...): an i32[] index into `platforms`."""
    return bind(platform_index_p, platforms=tuple(None if ps is None else tuple(ps) for ps in platforms))


def _platform_index_shape(*, platforms):
    """_platform_index_aval: an i32[] scalar."""
    if not platforms or any(ps is None for ps in platforms[:-1]):
        raise PrimitiveError(platform_index_p, f"platforms {platforms} must be tuples of platform names, "
                                               "only the last may be None (the default)")
    return [ArrayType((), np.dtype(np.int32))]


shape_rules[platform_index_p] = _platform_index_shape


def _platform_index_eval(*, platforms):
    """_platform_index_lowering: the index of the tuple that names the
    lowering platform, else of the default (None); no such entry is JAX's
    lowering error."""
    name = _platform.get()
    for i, ps in enumerate(platforms):
        if ps is None or name in ps:
            return np.int32(i)
    raise PrimitiveError(platform_index_p, f"no branch for platform {name!r} among {platforms} "
                                           "and no default")


eval_rules[platform_index_p] = _platform_index_eval


def _platform_index_jvp(primals, tangents, *, platforms):
    """An integer output: no tangent (JAX registers no JVP for a nullary op)."""
    return platform_index(platforms), None


jvp_rules[platform_index_p] = _platform_index_jvp


def _platform_index_batch(args, dims, *, platforms):
    """Nullary, so never batched: the index is the same for every member
    (as cond's batching rule rebinds it, conditionals.py, #29329)."""
    return platform_index(platforms), None


batch_rules[platform_index_p] = _platform_index_batch
jax_facts[platform_index_p] = JaxFacts(
    "platform_index", "lambda platforms: jax._src.lax.control_flow.platform_index_p.bind(platforms=platforms)",
    from_jax=lambda p: {"platforms": tuple(None if ps is None else tuple(ps) for ps in p["platforms"])})


def platform_dependent(*operands, default: Callable | None = None, **per_platform: Callable):
    """lax.platform_dependent: per_platform[platform](*operands), else
    default(*operands): platform_index and a cond on it. Identical branches
    are joined, their platforms listed together, as JAX does."""
    fns, platforms = [], []
    for name, fn in per_platform.items():
        if name == "gpu":
            raise PrimitiveError(platform_index_p, "use 'cuda' or 'rocm' for platform_dependent, not 'gpu'")
        if fn in fns:
            platforms[fns.index(fn)].append(name)
        else:
            fns.append(fn)
            platforms.append([name])
    if default is not None:
        fns.append(default)
        platforms.append(None)
    return switch(platform_index(platforms), fns, *operands)


examples[platform_index_p] = [
    Example("default-branch", (((3,), "f32", "normal"),),
            lambda x: platform_dependent(x, mosaic=cos, default=sin), np.sin),
    Example("named-branch", (((2, 2), "f32", "normal"),),
            lambda x: platform_dependent(x, cpu=sin, tpu=cos, default=cos), np.sin),
]
