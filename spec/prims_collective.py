"""Collectives over vmapped axes (jax/_src/lax/parallel.py): psum, pmax,
pmin; all_gather, reduce_scatter (lax.psum_scatter), axis_index.

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
                       eval_rules, examples, jax_facts, jvp_rules, primitive, primitives, shape_rules,
                       transpose_rules)
from spec.ir import ArrayType
from spec.prims_elementwise import _lit_like, div, mul, stop_gradient
from spec.prims_reductions import reduce_min_p
from spec.prims_indexing import iota
from spec.prims_structural import (linear_jvp, _transpose_reduce_sum, broadcast_in_dim, reduce_max_p,
                                   reduce_sum, reduce_sum_p, reshape)
from spec.batching import current_axis


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


def _named_size(named, axis_size, what="pmean") -> int:
    """The size of the named axes: `axis_size`, or the innermost vmap's
    (when traced inside a batching rule)."""
    if axis_size is not None:
        return int(axis_size)
    axis = current_axis()
    if axis is None or len(named) != 1 or axis.name != named[0]:
        raise PrimitiveError(what, f"{what} over {list(named)} needs axis_size= (the size of the named "
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
jvp_rules[psum_p] = linear_jvp(lambda x, *, axes: bind(psum_p, x, axes=axes))    # ad.deflinear2
transpose_rules[psum_p] = _psum_transpose
axis_batch_rules[psum_p] = _collective_batcher(psum_p, _psum_if_unmapped)
jax_facts[psum_p] = JaxFacts(
    "psum", "lambda x, axes: _one(jax._src.lax.parallel.psum_p.bind(x, axes=axes, axis_index_groups=None))",
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
        _p.name, f"lambda x, axes: _one(jax._src.lax.parallel.{_p.name}_p.bind(x, axes=axes, axis_index_groups=None))",
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


# --------------------------------------------------------------------------
# all_gather, reduce_scatter, axis_index: over named axes only (a vmap of
# them leaves none in a jaxpr); one name per vmap, as JAX's batchers require

def _names(prim, axis_name) -> tuple:
    names = _canonical_axes(axis_name)
    if not names or any(is_positional(a) or a is None or not isinstance(a, Hashable) for a in names):
        raise PrimitiveError(prim, f"axis_name must be one or more axis names, got {axis_name!r}")
    return names


def _frame_only(prim, axis, axis_name, axis_size):
    """JAX's batchers over the vmapped name: one name, of the vmap's size
    (NotImplementedError "Please open a feature request!" / an assert)."""
    if len(axis_name) > 1:
        raise PrimitiveError(prim, f"a vmap of {prim.name} over several names {axis_name} is not "
                                   f"implemented in JAX (NotImplementedError)")
    if axis_size != axis.size:
        raise PrimitiveError(prim, f"axis_size={axis_size} but the vmapped axis {axis.name!r} has size {axis.size}")


def _unbound(prim):
    def rule(*args, axis_name, **params):
        raise PrimitiveError(prim, f"axis name(s) {axis_name!r} are not bound: {prim.name} runs under "
                                   f"spec.vmap(..., axis_name=...) (JAX: NameError, unbound axis name)")
    return rule


def _gathered_shape(prim, shape, dim, axis_size, tiled, gather: bool):
    """all_gather inserts (or, tiled, multiplies) dim `dim` by the axis size;
    reduce_scatter removes it (or divides it)."""
    shape = list(shape)
    if not 0 <= dim < len(shape) + (gather and not tiled):
        raise PrimitiveError(prim, f"dimension {dim} out of range for shape {tuple(shape)}")
    if gather:
        if tiled:
            shape[dim] *= axis_size
        else:
            shape.insert(dim, axis_size)
    elif tiled:
        if shape[dim] % axis_size:
            raise PrimitiveError(prim, f"tiled: dim {dim} of {tuple(shape)} must be divisible by {axis_size}")
        shape[dim] //= axis_size
    else:
        if shape[dim] != axis_size:
            raise PrimitiveError(prim, f"dim {dim} of {tuple(shape)} must equal the axis size {axis_size}")
        del shape[dim]
    return tuple(shape)


def _gather_scatter_shape(prim, gather: bool):
    """_all_gather_effectful_abstract_eval / _reduce_scatter_effectful_abstract_eval
    (`dim` is all_gather_dimension or scatter_dimension)."""
    def rule(x, *, axis_name, axis_size, tiled, **dim):
        _names(prim, axis_name)
        (d,) = dim.values()
        return [ArrayType(_gathered_shape(prim, x.shape, d, axis_size, tiled, gather), x.dtype)]
    return rule


def _dual_transpose(dual_name: str, dual_dim: str):
    """all_gather and reduce_scatter transpose into each other. JAX:
    _all_gather_transpose_rule: psum_scatter(cts, axis_name, scatter_dimension=all_gather_dimension, tiled=tiled)
    _reduce_scatter_transpose_rule: all_gather(cts, axis_name, axis=scatter_dimension, tiled=tiled)"""
    def rule(ct, x, *, axis_name, axis_size, tiled, **dim):
        if isinstance(ct, Zero):
            return [Zero(x.type)]
        (d,) = dim.values()
        return [bind(primitives[dual_name], ct, axis_name=axis_name, axis_size=axis_size, tiled=tiled,
                     **{dual_dim: d})]
    return rule


# all_gather

all_gather_p = primitive("all_gather", ["all_gather_dimension", "axis_name", "axis_size", "tiled"])


def all_gather(x, axis_name, *, axis=0, tiled=False, axis_size=None):
    """lax.all_gather: every member gets the stack (tiled: the
    concatenation) of all members' x along `axis`."""
    names = _names(all_gather_p, axis_name)
    dim = int(axis) % (x.ndim if tiled else x.ndim + 1)
    return bind(all_gather_p, x, all_gather_dimension=dim, axis_name=names,
                axis_size=_named_size(names, axis_size, "all_gather"), tiled=bool(tiled))


def _all_gather_batch(axis, args, dims, *, all_gather_dimension, axis_name, axis_size, tiled):
    """JAX's _all_gather_batched_collective: another name gathers the batched
    operand (`_all_gather_batcher`: the gather dim shifts past the batch
    dim, or the batch dim past a new gather dim); the vmapped name is the
    batch itself: the batch axis moved to the gather dim (an unbatched x
    broadcast there), folded into it when tiled. The result is unbatched."""
    (x,), (d,) = args, dims
    params = dict(axis_name=axis_name, axis_size=axis_size, tiled=tiled)
    if axis.name not in axis_name:
        if d is None:
            return bind(all_gather_p, x, all_gather_dimension=all_gather_dimension, **params), None
        dim = all_gather_dimension + (d <= all_gather_dimension)
        d = d + (d > all_gather_dimension and not tiled)
        return bind(all_gather_p, x, all_gather_dimension=dim, **params), d
    _frame_only(all_gather_p, axis, axis_name, axis_size)
    dim = all_gather_dimension
    if d is None:
        shape = list(x.shape)
        shape.insert(dim, axis_size)
        y = broadcast_in_dim(x, shape, [i for i in range(len(shape)) if i != dim])
    else:
        y = moveaxis(x, d, dim)
    if tiled:       # _foldaxis
        y = reshape(y, y.shape[:dim] + (y.shape[dim] * y.shape[dim + 1],) + y.shape[dim + 2:])
    return y, None


_GATHER_SCATTER_EMITTER = ("lambda x, axis_name, axis_size, tiled, **p: jax._src.lax.parallel.{0}_p.bind("
                           "x, axis_name=axis_name, axis_size=axis_size, tiled=tiled, axis_index_groups=None, "
                           "**p)")
shape_rules[all_gather_p] = _gather_scatter_shape(all_gather_p, gather=True)
eval_rules[all_gather_p] = _unbound(all_gather_p)
jvp_rules[all_gather_p] = linear_jvp(lambda x, **params: bind(all_gather_p, x, **params))   # ad.deflinear2
transpose_rules[all_gather_p] = _dual_transpose("reduce_scatter", "scatter_dimension")
axis_batch_rules[all_gather_p] = _all_gather_batch
jax_facts[all_gather_p] = JaxFacts("all_gather", _GATHER_SCATTER_EMITTER.format("all_gather"),
                                   ignored=(("axis_index_groups", None),))


# reduce_scatter (lax.psum_scatter)

reduce_scatter_p = primitive("reduce_scatter", ["scatter_dimension", "axis_name", "axis_size", "tiled"])


def psum_scatter(x, axis_name, *, scatter_dimension=0, tiled=False, axis_size=None):
    """lax.psum_scatter: the psum over `axis_name`, of which member i keeps
    block i along `scatter_dimension` (tiled: a block of size n / axis size;
    else that dim has the axis size and is removed)."""
    names = _names(reduce_scatter_p, axis_name)
    return bind(reduce_scatter_p, x, scatter_dimension=int(scatter_dimension), axis_name=names,
                axis_size=_named_size(names, axis_size, "psum_scatter"), tiled=bool(tiled))


def _reduce_scatter_batch(axis, args, dims, *, scatter_dimension, axis_name, axis_size, tiled):
    """JAX's _reduce_scatter_collective: another name scatters the batched
    operand (`_reduce_scatter_batcher`); the vmapped name sums over the
    batch (an unbatched x: axis_size * x) and the scatter dim becomes the
    batch dim (split into (axis size, block) when tiled).

    One step differs from JAX on purpose: `_reduce_scatter_batcher` moves
    the batch dim *up* past a non-tiled scatter dim (`elif not tiled: d +=
    1`, all_gather's step), but reduce_scatter removes that dim: the batch
    dim moves *down*. JAX 0.10.2 then fails (IndexError) on a vmap over
    another name with the batch dim after the scatter dim;
    tests/test_prims_collective.py records it."""
    (x,), (d,) = args, dims
    params = dict(axis_name=axis_name, axis_size=axis_size, tiled=tiled)
    if axis.name not in axis_name:
        if d is None:
            return bind(reduce_scatter_p, x, scatter_dimension=scatter_dimension, **params), None
        dim = scatter_dimension + (d <= scatter_dimension)
        d = d - (d > scatter_dimension and not tiled)
        return bind(reduce_scatter_p, x, scatter_dimension=dim, **params), d
    _frame_only(reduce_scatter_p, axis, axis_name, axis_size)
    dim = scatter_dimension
    y = mul(x, _lit_like(x, axis_size)) if d is None else reduce_sum(x, (d,))   # x * axis_size; lax.reduce
    if tiled:       # _splitaxis
        y = reshape(y, y.shape[:dim] + (axis_size, y.shape[dim] // axis_size) + y.shape[dim + 1:])
    return y, dim


shape_rules[reduce_scatter_p] = _gather_scatter_shape(reduce_scatter_p, gather=False)
eval_rules[reduce_scatter_p] = _unbound(reduce_scatter_p)
jvp_rules[reduce_scatter_p] = linear_jvp(lambda x, **params: bind(reduce_scatter_p, x, **params))
transpose_rules[reduce_scatter_p] = _dual_transpose("all_gather", "all_gather_dimension")
axis_batch_rules[reduce_scatter_p] = _reduce_scatter_batch
jax_facts[reduce_scatter_p] = JaxFacts("reduce_scatter", _GATHER_SCATTER_EMITTER.format("reduce_scatter"),
                                       ignored=(("axis_index_groups", None),))


# axis_index

axis_index_p = primitive("axis_index", ["axis_name"])


def axis_index(axis_name):
    """lax.axis_index: this member's index along the named axis (int32)."""
    return bind(axis_index_p, axis_name=axis_name)


def _axis_index_shape(*, axis_name):
    """One name (axis_index over several names, their linear index, is not modelled)."""
    if isinstance(axis_name, (tuple, list)) or is_positional(axis_name) or axis_name is None \
            or not isinstance(axis_name, Hashable):
        raise PrimitiveError(axis_index_p, f"axis_name must be one axis name, got {axis_name!r}")
    return [ArrayType((), np.int32)]


def _axis_index_batch(axis, args, dims, *, axis_name):
    """JAX's _axis_index_batcher: over the vmapped name, iota(int32, size)
    batched along 0; over another name, unchanged."""
    if axis.name != axis_name:
        return bind(axis_index_p, axis_name=axis_name), None
    return iota(np.int32, (axis.size,), 0), 0


shape_rules[axis_index_p] = _axis_index_shape
eval_rules[axis_index_p] = _unbound(axis_index_p)
# no operands: nothing to differentiate (the equation is copied as it is)
jvp_rules[axis_index_p] = lambda primals, tangents, **params: (bind(axis_index_p, **params), None)
axis_batch_rules[axis_index_p] = _axis_index_batch
jax_facts[axis_index_p] = JaxFacts("axis_index",
                                   "lambda axis_name: jax._src.lax.parallel.axis_index_p.bind(axis_name=axis_name)")
