"""tile (jax/_src/lax/lax.py): `lax.tile(x, reps)`, which `jnp.tile` binds
in jax 0.10.2, repeats an array along every dimension:

    out[i_0, ..., i_k] = x[i_0 mod n_0, ..., i_k mod n_k],   out.shape = reps * x.shape

It is linear. Its transpose sums the repeats: the cotangent reshaped to
interleaved (reps_d, n_d) pairs, summed over each pair's first axis.

    >>> import spec
    >>> prog = spec.trace(lambda x: tile(x, (2, 3)), spec.f32[2, 1])
    >>> print(spec.transpose(prog, [True]))
    { lambda ; a:f32[4,3]. let
        b:f32[2,2,3,1] = reshape[new_sizes=(2, 2, 3, 1)] a
        c:f32[2,1] = reduce_sum[axes=(0, 2)] b
      in (c,) }
"""
from __future__ import annotations

import numpy as np

from spec.core import (Example, JaxFacts, PrimitiveError, Zero, batch_rules, bind, eval_rules, examples,
                       is_undefined, jax_facts, jvp_rules, linear_jvp, primitive, shape_rules,
                       transpose_rules)
from spec.ir import ArrayType
from spec.prims_structural import reduce_sum, reshape

tile_p = primitive("tile", ["reps"])


def tile(x, reps):
    """lax.tile: x repeated reps[d] times along each dimension d."""
    return bind(tile_p, x, reps=tuple(int(r) for r in reps))


def _tile_shape(x, *, reps):
    """_tile_abstract_eval: one rep per dimension; shape x.shape * reps."""
    if len(reps) != x.ndim or any(r < 0 for r in reps):
        raise PrimitiveError(tile_p, f"reps {reps} must be {x.ndim} non-negative counts, one per dim of {x}")
    return [ArrayType(tuple(n * r for n, r in zip(x.shape, reps)), x.dtype)]


shape_rules[tile_p] = _tile_shape


def _tile_eval(x, *, reps):
    return np.tile(x, reps)


eval_rules[tile_p] = _tile_eval
jvp_rules[tile_p] = linear_jvp(tile)     # ad.deflinear2(tile_p, _tile_transpose_rule)


def _tile_transpose(ct, x, *, reps):
    """_tile_transpose_rule: ct reshaped to (reps_0, n_0, reps_1, n_1, ...),
    then reduce_sum over the reps axes (0, 2, 4, ...)."""
    if isinstance(ct, Zero):
        return [Zero(x.type)]
    if not is_undefined(x):
        return [None]
    pairs = tuple(k for pair in zip(reps, x.type.shape) for k in pair)
    return [reduce_sum(reshape(ct, pairs), tuple(2 * i for i in range(x.type.ndim)))]


transpose_rules[tile_p] = _tile_transpose


def _tile_batch(args, dims, *, reps):
    """_tile_batch_rule: a rep of 1 for the batch dimension, which stays."""
    (x,), (bdim,) = args, dims
    new_reps = list(reps)
    new_reps.insert(bdim, 1)
    return tile(x, new_reps), bdim


batch_rules[tile_p] = _tile_batch
jax_facts[tile_p] = JaxFacts("tile", "lambda x, reps: lax.tile(x, reps)",
                             from_jax=lambda p: {"reps": tuple(int(r) for r in p["reps"])})
examples[tile_p] = [
    Example("rows-and-columns", (((2, 3), "f32", "normal"),), lambda x: tile(x, (2, 3)),
            lambda x: np.tile(x, (2, 3)), linear=((True,),)),
    Example("vector", (((3,), "f32", "normal"),), lambda x: tile(x, (2,)), lambda x: np.tile(x, 2),
            linear=((True,),)),
    Example("size-one-dims", (((1, 2, 1), "f32", "normal"),), lambda x: tile(x, (3, 1, 2)),
            lambda x: np.tile(x, (3, 1, 2)), linear=((True,),)),
    Example("ints", (((2,), "i32", "ints"),), lambda x: tile(x, (3,)), lambda x: np.tile(x, 3)),
]
