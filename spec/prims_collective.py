"""Collectives over vmapped axes: psum, pmax, pmin (jax/_src/lax/parallel.py).

`psum(x, axes)` sums `x` over `axes`, which mixes *positional* axes (ints:
the operand's own dims, a plain reduction) and axis *names* (bound by
`spec.vmap(..., axis_name=...)`, as `jax.vmap(f, axis_name=...)` binds
them). Over a named axis every member of the batch gets the sum over all
members: `lax.psum(x, 'i')` is what BatchNorm's cross-replica mean
(`lax.pmean(x, 'i')` = psum, then div by the axis size) is made of.

A name means nothing to one member alone, so a program with a named
collective is evaluated only once batched: JAX's collective batcher
(`_batched_reduction_collective`) rewrites the name into the positional
batch axis. That is why a jaxpr of `jax.vmap(loss, axis_name='i')` holds
only positional psums (`psum[axes=(0,)]`), and, after differentiation, the
identity `psum[axes=()]` that psum's transpose leaves (it treats psum as
psum + pbroadcast and reduces over the named axes again: none remain).

    >>> import spec
    >>> prog = spec.trace(lambda x: pmean(x, "i", axis_size=3) * x, spec.f32[2])
    >>> print(spec.vmap(prog, axis_size=3, axis_name="i"))
    { lambda ; a:f32[3,2]. let
        b:f32[2] = psum[axes=(0,)] a
        c:f32[2] = div b 3.0:f32[]
        d:f32[1,2] = broadcast_in_dim[shape=(1, 2) broadcast_dimensions=(1,)] c
        e:f32[3,2] = mul d a
      in (e,) }
"""
from __future__ import annotations

from typing import Hashable

import numpy as np

from spec.batching import moveaxis
from spec.core import (Example, JaxFacts, PrimitiveError, Zero, axis_batch_rules, bind,
                       eval_rules, examples, jax_facts, jvp_rules, primitive, shape_rules,
                       transpose_rules)
from spec.ir import ArrayType
from spec.prims_elementwise import _lit_like, div, mul, stop_gradient
from spec.prims_reductions import reduce_min_p
from spec.prims_structural import _linear_jvp, _transpose_reduce_sum, reduce_max_p, reduce_sum_p


def is_positional(axis) -> bool:
    """An int axis is one of the operand's own dims; anything else is a name."""
    return isinstance(axis, (int, np.integer)) and not isinstance(axis, bool)


def partition_axes(axes) -> tuple[tuple, tuple]:
    """(named axes, positional axes), each in order (JAX's axes_partition)."""
    return (tuple(a for a in axes if not is_positional(a)),
            tuple(int(a) for a in axes if is_positional(a)))


def _canonical_axes(axis_name) -> tuple:
    """lax.psum's `axis_name`: one axis or a tuple/list of them."""
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


# --------------------------------------------------------------------------
# the all-reduce family: one shape, eval and batching rule each

def _allreduce_shape(prim):
    """_allreduce_effectful_abstract_eval: the positional axes are reduced away."""
    def rule(x, *, axes):
        if not isinstance(axes, tuple):
            raise PrimitiveError(prim, f"param axes must be a tuple of ints and axis names, got {axes!r}")
        named, pos = partition_axes(axes)
        if len(set(pos)) != len(pos) or any(not 0 <= a < x.ndim for a in pos):
            raise PrimitiveError(prim, f"positional axes {pos} must be distinct dims of {x}")
        if any(a is None or not isinstance(a, Hashable) for a in named) or len(set(named)) != len(named):
            raise PrimitiveError(prim, f"axis names {named} must be distinct hashable names")
        if x.dtype == np.bool_:
            raise PrimitiveError(prim, f"operand must be numeric (lax.{prim.name} casts bools to int32 "
                                       f"first), got {x}")
        return [ArrayType(tuple(d for i, d in enumerate(x.shape) if i not in pos), x.dtype)]
    return rule


def _allreduce_eval(prim, reducer):
    """_allreduce_impl: over positional axes, the reduction itself
    (`pos_reducer(arg, axes)`). A named axis is bound only by a vmap, whose
    batching rule removes it."""
    def rule(x, *, axes):
        named, pos = partition_axes(axes)
        if named:
            raise PrimitiveError(prim, f"axis name(s) {list(named)} are not bound: a collective over a "
                                       f"named axis runs under spec.vmap(..., axis_name=...) (JAX: "
                                       f"NameError, unbound axis name)")
        return eval_rules[reducer](x, axes=pos)
    return rule


def _collective_batcher(prim, if_unmapped):
    """JAX's `_batched_reduction_collective(prim, if_unmapped, axis_data, ...)`.

    * operand unbatched, axis named: `_constant_reduction` -- reduce over the
      other axes, then `if_unmapped(v, size)` (psum: size * v; pmax/pmin: v);
    * operand batched, axis not named: `_reduction_batcher` -- named-only
      axes keep the batch dim where it is; with positional axes the batch dim
      moves to 0 and the positional axes shift by one;
    * operand batched, axis named: the batch dim moves to 0 and the name
      becomes positional axis 0 (`_reduction_with_positional_batcher`); the
      result is the same for every member: unbatched.
    """
    def rule(axis, args, dims, *, axes):
        (v,), (d,) = args, dims
        if d is None:
            if axis.name not in axes:
                return bind(prim, v, axes=axes), None
            others = tuple(a for a in axes if a != axis.name)
            if others:
                v = bind(prim, v, axes=others)
            return if_unmapped(v, axis.size), None
        named, _ = partition_axes(axes)
        if axis.name not in axes and len(named) == len(axes):
            return bind(prim, v, axes=axes), d
        v = moveaxis(v, d, 0)
        shifted = tuple(a + 1 if is_positional(a) else 0 if a == axis.name else a for a in axes)
        return bind(prim, v, axes=shifted), (None if axis.name in axes else 0)
    return rule


# --------------------------------------------------------------------------
# psum

psum_p = primitive("psum", ["axes"])


def psum(x, axis_name):
    """The sum of x over `axis_name`: axis names bound by a vmap and/or
    positional axes (ints) of x."""
    return bind(psum_p, x, axes=_canonical_axes(axis_name))


def pmean(x, axis_name, axis_size=None):
    """lax.pmean over named axes: psum, then div by their size. JAX reads
    the size from the axis environment while tracing; a spec program is
    traced before it is vmapped, so pass `axis_size`. (lax.pmean over a
    positional axis fails in JAX: its size is psum(1, axis) of a scalar.)"""
    named, pos = partition_axes(_canonical_axes(axis_name))
    if pos or not named:
        raise PrimitiveError(psum_p, f"pmean takes axis names, got {axis_name!r} (lax.pmean over "
                                     f"positional axes raises in JAX)")
    total = psum(x, axis_name)
    return div(total, _lit_like(total, _named_size(named, axis_size)))


def _named_size(named, axis_size) -> int:
    """The size of the named axes: `axis_size`, or the innermost vmap's
    (when pmean is traced inside a batching rule)."""
    from spec.batching import current_axis
    if axis_size is not None:
        return int(axis_size)
    axis = current_axis()
    if axis is None or len(named) != 1 or axis.name != named[0]:
        raise PrimitiveError(psum_p, f"pmean over {list(named)} needs axis_size= (the size of the named "
                                     f"axes) when traced outside a vmap binding exactly that name")
    return axis.size


def _psum_transpose(ct, x, *, axes):
    """JAX's `_psum_transpose_rule`: positional axes transpose as reduce_sum
    (a broadcast_in_dim back); then psum over the named axes again, since
    psum is treated as psum + pbroadcast (an identity psum[axes=()] when
    there are none):
        if pos_axes: cts = lax._reduce_sum_transpose_rule(ct, arg, axes=pos_axes)[0]
        return (psum_p.bind(cts, axes=tuple(named_axes), axis_index_groups=...),)"""
    if isinstance(ct, Zero):
        return [Zero(x.type)]
    named, pos = partition_axes(axes)
    if pos:
        ct = _transpose_reduce_sum(ct, x, axes=pos)[0]
    return [bind(psum_p, ct, axes=named)]


def _psum_if_unmapped(v, size):
    """lax._const(arg, axis_data.size) * arg"""
    return mul(_lit_like(v, size), v)


shape_rules[psum_p] = _allreduce_shape(psum_p)
eval_rules[psum_p] = _allreduce_eval(psum_p, reduce_sum_p)
jvp_rules[psum_p] = _linear_jvp(lambda x, *, axes: bind(psum_p, x, axes=axes))    # ad.deflinear2
transpose_rules[psum_p] = _psum_transpose
axis_batch_rules[psum_p] = _collective_batcher(psum_p, _psum_if_unmapped)
jax_facts[psum_p] = JaxFacts(
    "psum", "lambda x, axes: jax._src.lax.parallel.psum_p.bind(x, axes=axes, axis_index_groups=None)",
    ignored=(("axis_index_groups", None),))
examples[psum_p] = [
    Example("psum-batch-axis", (((3, 2), "f32", "normal"),), lambda x: psum(x, 0),
            lambda x: x.sum(axis=0), linear=((True,),)),
    Example("psum-two-axes", (((2, 1, 3), "f32", "normal"),), lambda x: psum(x, (2, 0)),
            lambda x: x.sum(axis=(0, 2)), linear=((True,),), cond=4.0),
    Example("psum-no-axes", (((3,), "f32", "normal"),), lambda x: psum(x, ()) * x,
            lambda x: x * x),
    Example("psum-int", (((2, 3), "i32", "ints"),), lambda x: psum(x, 1), lambda x: x.sum(axis=1)),
]


# --------------------------------------------------------------------------
# pmax, pmin: JAX registers no JVP (jvp/grad raise NotImplementedError),
# so a differentiated operand must pass stop_gradient first

pmax_p = primitive("pmax", ["axes"])
pmin_p = primitive("pmin", ["axes"])


def pmax(x, axis_name):
    """The maximum of x over `axis_name` (names and/or positional axes)."""
    return bind(pmax_p, x, axes=_canonical_axes(axis_name))


def pmin(x, axis_name):
    """The minimum of x over `axis_name` (names and/or positional axes)."""
    return bind(pmin_p, x, axes=_canonical_axes(axis_name))


def _no_jvp(name):
    message = f"Differentiation rule for '{name}' not implemented"

    def rule(primals, tangents, **params):
        """JAX defines no JVP for pmax_p/pmin_p (jax 0.10.2 parallel.py)."""
        raise NotImplementedError(message)
    return rule


def _keep(v, size):
    """lambda v, axis_size: v"""
    return v


for _p, _reducer in ((pmax_p, reduce_max_p), (pmin_p, reduce_min_p)):
    shape_rules[_p] = _allreduce_shape(_p)
    eval_rules[_p] = _allreduce_eval(_p, _reducer)
    jvp_rules[_p] = _no_jvp(_p.name)
    axis_batch_rules[_p] = _collective_batcher(_p, _keep)
    jax_facts[_p] = JaxFacts(
        _p.name, f"lambda x, axes: jax._src.lax.parallel.{_p.name}_p.bind(x, axes=axes, axis_index_groups=None)",
        ignored=(("axis_index_groups", None),))

examples[pmax_p] = [
    Example("pmax-stopped", (((3, 4), "f32", "distinct"),), lambda x: pmax(stop_gradient(x), 0),
            lambda x: x.max(axis=0), tangent="zero"),
    Example("pmax-int", (((2, 3), "i32", "ints"),), lambda x: pmax(x, (0, 1)), lambda x: x.max()),
]
examples[pmin_p] = [
    Example("pmin-stopped", (((3, 4), "f32", "distinct"),), lambda x: pmin(stop_gradient(x), 1),
            lambda x: x.min(axis=1), tangent="zero"),
    Example("pmin-int", (((2, 3), "i32", "ints"),), lambda x: pmin(x, 0), lambda x: x.min(axis=0)),
]
