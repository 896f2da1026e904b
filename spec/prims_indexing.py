"""Indexing primitives: iota, gather, scatter-add, scatter, dynamic_slice,
dynamic_update_slice, clamp, rev, argmax, argmin
(jax/_src/lax/slicing.py and lax.py, jax 0.10.2).

These are what `jnp` emits for real models' indexing: `x[idx]`,
`x[:, idx]`, `jnp.take`, `jnp.take_along_axis` (integer-label
cross-entropy), embedding lookups `table[ids]`, `.at[idx].add/set`,
`lax.dynamic_slice`, causal masks and one-hot vectors from `iota`,
`lax.switch`'s index `clamp`, `x[::-1]`, `jnp.argmax` (`jnp.split` is
spec/prims_structural.py's `split`, concatenate's transpose).
Each primitive is one block, as in spec/prims_special.py: declaration and
op, shape, evaluation, JVP and transpose in the shape of JAX's rules
(cited), batching as JAX batches it, JAX facts and examples.

Gather and scatter keep JAX's dimension numbers field by field as params
(`offset_dims=...`, ..., `mode`, `fill_value`): the oracle's param import
reads any `dimension_numbers` param as dot_general's pair of pairs. `mode`
is "clip", "fill" (JAX's FILL_OR_DROP) or "promise_in_bounds"; a gather's
`fill_value` None in "fill" mode stands for NaN, lax.gather's default for
floats (its defaults for int and bool operands are resolved, as JAX does).

    >>> import spec
    >>> prog = spec.trace(lambda t, i: gather(t, i, GatherDimensionNumbers((1,), (0,), (0,)), (1, 3)),
    ...                   spec.f32[5, 3], spec.i32[4, 1])
    >>> [str(r) for r in spec.saved_residuals(prog)]    # the tangent is gathered at the same indices
    ['i32[4,1] from the argument i']
"""
from __future__ import annotations

import math
from typing import NamedTuple

import ml_dtypes
import numpy as np

from spec.arrays import SymbolicError, namespace
from spec.batching import bdim_at_front, broadcast_batcher, moveaxis, ndim
from spec.core import (complex_rules, Example, JaxFacts, PrimitiveError, Zero, batch_rules, bind, eval_rules,
                       examples, instantiate, is_undefined, jax_facts, jvp_rules, primitive,
                       primitives, shape_rules, transpose_rules, zeros_like_type)
from spec.ir import SHORT_NAMES, ArrayType, canonical_dtype, is_float
from spec.prims_elementwise import (_coerce, _full_like, add, add_tangents, broadcast_shapes, eq, ge, gt,
                                    lt, select_n)
from spec.prims_structural import broadcast_in_dim, concatenate, reshape

INDEX_DTYPE = np.dtype(np.int32)
# scatter's JVP numbers the updates in uint32 (lax_utils.int_dtype_for_dim(n,
# signed=False)); int32 where the spec has no unsigned dtype
_ID_DTYPE = np.dtype(np.uint32) if np.dtype(np.uint32) in SHORT_NAMES else INDEX_DTYPE
MODES = ("clip", "fill", "promise_in_bounds")
_JAX_MODES = {"CLIP": "clip", "FILL_OR_DROP": "fill", "PROMISE_IN_BOUNDS": "promise_in_bounds"}


# --------------------------------------------------------------------------
# helpers shared by the blocks

def _ints(x) -> tuple:
    return tuple(int(i) for i in x)


def _shape_of(x) -> tuple:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _mode_from_jax(mode):
    """JAX's GatherScatterMode (read by name) -> the spec's mode string; an
    unknown mode (ONE_HOT) is kept as it is, for the shape rule to refuse."""
    name = getattr(mode, "name", mode)
    return _JAX_MODES.get(name, name)


def _parse_mode(mode, default: str) -> str:
    """GatherScatterMode.from_any, with the wrapper's default for None."""
    if mode is None:
        return default
    mode = _mode_from_jax(mode)
    return {"drop": "fill"}.get(mode, mode)


def _check_mode(prim, mode):
    if mode not in MODES:
        raise PrimitiveError(prim, f"mode={mode!r} is not supported; the spec models {MODES}")


def _is_int(dtype) -> bool:
    return np.issubdtype(np.dtype(dtype), np.integer)


def _check_index_type(prim, t: ArrayType, what="indices"):
    if not _is_int(t.dtype):
        raise PrimitiveError(prim, f"{what} must have an integer dtype, got {t}")


def _sorted_unique_in_range(prim, dims, rank, name, need_sorted=True):
    if (need_sorted and list(dims) != sorted(dims)) or len(set(dims)) != len(dims):
        raise PrimitiveError(prim, f"{name} {dims} must be {'sorted and ' if need_sorted else ''}unique")
    if any(not 0 <= d < rank for d in dims):
        raise PrimitiveError(prim, f"{name} {dims} out of range [0, {rank})")


def _default_fill(dtype):
    """lax.gather's fill for FILL_OR_DROP when none is given."""
    dtype = np.dtype(dtype)
    if is_float(dtype):
        return np.nan
    if dtype == np.bool_:
        return True
    info = ml_dtypes.iinfo(dtype)
    return int(info.max if info.min == 0 else info.min)


def _concrete(idx, prim) -> np.ndarray:
    """Indices as numbers: exact (sympy) integers are read back; a symbol
    has no position (SymbolicError)."""
    idx = np.asarray(idx)
    if idx.dtype != object:
        return idx
    try:
        return np.vectorize(int, otypes=[np.int64])(idx) if idx.size else idx.astype(np.int64)
    except TypeError:
        raise SymbolicError(f"{prim.name}: symbolic indices have no position; evaluate with "
                            "concrete integer indices") from None


def _window_indices(operand_shape, idx, sizes, window_dims, start_index_map,
                    operand_batching_dims, indices_batching_dims):
    """Where each element of each window lies in the operand.

    idx has shape B + (K,): one start vector per batch position b. The
    window at b is the box start(b) + [0, sizes) in the operand, where
    start(b)[start_index_map[k]] = idx[b, k], start(b)[operand_batching_dims[i]]
    = b[indices_batching_dims[i]], 0 elsewhere. Returns (one int array of
    shape B + W per operand dim, W = the sizes of window_dims, with each
    start clamped into [0, dim - size]; a bool mask over B: the unclamped
    window lies in bounds)."""
    batch = tuple(idx.shape[:-1])
    wshape = tuple(sizes[d] for d in window_dims)
    full = batch + wshape
    nb, nw = len(batch), len(wshape)
    ok = np.ones(batch, dtype=bool)
    out = []
    for d in range(len(operand_shape)):
        a = np.zeros(full, dtype=np.int64)
        if d in start_index_map:
            s = idx[..., start_index_map.index(d)].astype(np.int64)
            hi = operand_shape[d] - sizes[d]
            ok &= (s >= 0) & (s <= hi)
            a = a + np.clip(s, 0, max(hi, 0)).reshape(batch + (1,) * nw)
        if d in operand_batching_dims:
            axis = indices_batching_dims[operand_batching_dims.index(d)]
            shape = [1] * len(full)
            shape[axis] = batch[axis]
            a = a + np.arange(batch[axis]).reshape(shape)
        if d in window_dims:
            j = window_dims.index(d)
            shape = [1] * len(full)
            shape[nb + j] = wshape[j]
            a = a + np.arange(wshape[j]).reshape(shape)
        out.append(a)
    return tuple(out), ok


# ==========================================================================
# iota

iota_p = primitive("iota", ["dtype", "shape", "dimension", "sharding"])


def iota(dtype, shape, dimension=0):
    """lax.broadcasted_iota: out[i_0, ..., i_n] = i_dimension."""
    return bind(iota_p, dtype=canonical_dtype(dtype), shape=_ints(shape), dimension=int(dimension),
                sharding=None)


def _iota_shape(*, dtype, shape, dimension, sharding):
    dtype = canonical_dtype(dtype)
    if not (is_float(dtype) or _is_int(dtype)):
        raise PrimitiveError(iota_p, f"dtype must be numeric, got {dtype}")
    if not 0 <= dimension < len(shape):
        raise PrimitiveError(iota_p, f"dimension {dimension} out of range for shape {tuple(shape)}")
    if sharding is not None:
        raise PrimitiveError(iota_p, f"sharding={sharding!r} is not supported (only None)")
    return [ArrayType(shape, dtype)]


def _iota_eval(*, dtype, shape, dimension, sharding):
    along = [1] * len(shape)
    along[dimension] = shape[dimension]
    return np.broadcast_to(np.arange(shape[dimension]).reshape(along), shape).astype(dtype)


shape_rules[iota_p] = _iota_shape
eval_rules[iota_p] = _iota_eval
# no operands: JAX has no JVP or batching rule for iota (an equation without
# differentiated or batched inputs is copied as it is); these say so
jvp_rules[iota_p] = lambda primals, tangents, **params: (bind(iota_p, **params), None)
batch_rules[iota_p] = lambda args, dims, **params: (bind(iota_p, **params), None)
jax_facts[iota_p] = JaxFacts(
    "iota", "lambda dtype, shape, dimension, sharding: lax.broadcasted_iota(dtype, shape, dimension)",
    from_jax=lambda p: {**p, "dtype": canonical_dtype(np.dtype(p["dtype"]))})


def _causal_mask(x):
    """jnp.tril's mask: keep x[i, j] where i >= j (iota along both dims)."""
    rows, cols = iota(np.int32, x.shape, 0), iota(np.int32, x.shape, 1)
    return select_n(ge(rows, cols), _full_like(x, 0), x)


examples[iota_p] = [
    Example("causal-mask", (((4, 4), "f32", "normal"),), _causal_mask, lambda x: np.tril(x), linear=((True,),)),
    Example("int-rows", (((3, 2), "i32", "ints"),), lambda x: x + iota(np.int32, (3, 2), 0),
            lambda x: x + np.arange(3)[:, None]),
    Example("one-hot", (((4,), "i32", "indices:3"),),
            lambda i: eq(broadcast_in_dim(i, (4, 3), (0,)), iota(np.int32, (4, 3), 1)),
            lambda i: i[:, None] == np.arange(3)[None, :]),
]


# ==========================================================================
# gather

class GatherDimensionNumbers(NamedTuple):
    """lax.GatherDimensionNumbers (the index vector is the last dim of the indices)."""
    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()


_GATHER_DIMS = GatherDimensionNumbers._fields
gather_p = primitive("gather", _GATHER_DIMS + ("slice_sizes", "indices_are_sorted", "unique_indices",
                                               "mode", "fill_value"))


def gather(operand, indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """lax.gather: out[b, w] = operand[start(b) + w] over the windows of
    `_window_indices`, offset dims placed at `offset_dims` of the output and
    batch dims in order at the others. Mode None is PROMISE_IN_BOUNDS; only
    "fill" keeps a fill_value, None giving JAX's default (resolved for int
    and bool operands as lax.gather does; None stands for NaN)."""
    mode = _parse_mode(mode, "promise_in_bounds")
    if mode != "fill":
        fill_value = None
    elif fill_value is None or (isinstance(fill_value, (float, np.floating)) and math.isnan(fill_value)):
        fill_value = None if is_float(operand.dtype) else _default_fill(operand.dtype)
    dn = GatherDimensionNumbers(*[_ints(d) for d in dimension_numbers])
    return bind(gather_p, operand, indices, **dn._asdict(), slice_sizes=_ints(slice_sizes),
                indices_are_sorted=bool(indices_are_sorted), unique_indices=bool(unique_indices),
                mode=mode, fill_value=fill_value)


def _gather_dims(params) -> GatherDimensionNumbers:
    return GatherDimensionNumbers(*[tuple(params[k]) for k in _GATHER_DIMS])


def _gather_shape(operand, indices, **params):
    """lax._gather_shape_rule's checks (ValidateGatherDimensions), then
    _gather_shape_computation: the offset dims take the slice sizes of the
    operand's window dims, the other output dims the indices' batch dims."""
    p, dn, sizes = gather_p, _gather_dims(params), tuple(params["slice_sizes"])
    _check_index_type(p, indices)
    _check_mode(p, params["mode"])
    if indices.ndim < 1:
        raise PrimitiveError(p, f"indices {indices} need an index vector dim (the last)")
    out_rank = len(dn.offset_dims) + indices.ndim - 1
    _sorted_unique_in_range(p, dn.offset_dims, out_rank, "offset_dims")
    if len(dn.start_index_map) != indices.shape[-1]:
        raise PrimitiveError(p, f"start_index_map {dn.start_index_map} must have one entry per index "
                                f"vector element ({indices.shape[-1]})")
    _sorted_unique_in_range(p, dn.start_index_map, operand.ndim, "start_index_map", need_sorted=False)
    _sorted_unique_in_range(p, dn.collapsed_slice_dims, operand.ndim, "collapsed_slice_dims")
    _sorted_unique_in_range(p, dn.operand_batching_dims, operand.ndim, "operand_batching_dims")
    if set(dn.operand_batching_dims) & (set(dn.collapsed_slice_dims) | set(dn.start_index_map)):
        raise PrimitiveError(p, "operand_batching_dims must be disjoint from collapsed_slice_dims "
                                "and start_index_map")
    _sorted_unique_in_range(p, dn.start_indices_batching_dims, indices.ndim - 1,
                            "start_indices_batching_dims", need_sorted=False)
    if [operand.shape[d] for d in dn.operand_batching_dims] != \
            [indices.shape[d] for d in dn.start_indices_batching_dims]:
        raise PrimitiveError(p, "operand and indices batching dims must have equal sizes")
    if len(sizes) != operand.ndim or len(sizes) != (len(dn.offset_dims) + len(dn.collapsed_slice_dims)
                                                    + len(dn.operand_batching_dims)):
        raise PrimitiveError(p, f"slice_sizes {sizes} must have one entry per dim of {operand}, each an "
                                "offset, collapsed or batching dim")
    if any(not 0 <= s <= n for s, n in zip(sizes, operand.shape)):
        raise PrimitiveError(p, f"slice_sizes {sizes} out of range for {operand}")
    if any(sizes[d] != 1 for d in dn.collapsed_slice_dims) or any(sizes[d] > 1 for d in dn.operand_batching_dims):
        raise PrimitiveError(p, "collapsed dims need slice size 1, batching dims 0 or 1")
    if params["fill_value"] is not None and params["mode"] != "fill":
        raise PrimitiveError(p, f"fill_value={params['fill_value']!r} needs mode 'fill'")
    window = iter(s for d, s in enumerate(sizes) if d not in dn.collapsed_slice_dims + dn.operand_batching_dims)
    batch = iter(indices.shape[:-1])
    shape = [next(window) if o in dn.offset_dims else next(batch) for o in range(out_rank)]
    return [ArrayType(shape, operand.dtype)]


def _gather_eval(operand, indices, **params):
    """Clamped windows (XLA's gather; PROMISE_IN_BOUNDS and CLIP alike), then
    in "fill" mode the windows not wholly in bounds are filled (_gather_fill)."""
    dn, sizes = _gather_dims(params), tuple(params["slice_sizes"])
    window_dims = [d for d in range(operand.ndim)
                   if d not in dn.collapsed_slice_dims + dn.operand_batching_dims]
    where, ok = _window_indices(operand.shape, _concrete(indices, gather_p), sizes, window_dims,
                                list(dn.start_index_map), list(dn.operand_batching_dims),
                                list(dn.start_indices_batching_dims))
    out = operand[where]
    nb = indices.ndim - 1
    if params["mode"] == "fill":
        out = np.where(ok.reshape(ok.shape + (1,) * (out.ndim - nb)), out, _fill_of(operand, params["fill_value"]))
    batch_axes = iter(range(nb))
    perm = [nb + dn.offset_dims.index(o) if o in dn.offset_dims else next(batch_axes)
            for o in range(out.ndim)]
    return np.transpose(out, perm).copy()


def _fill_of(operand, fill):
    """The fill value in the operand's dtype (NaN for None; exact for sympy operands)."""
    if namespace(operand).name == "sympy":
        import sympy  # only for symbolic values (slow to import)
        return sympy.nan if fill is None else namespace(operand).compute(np.asarray(fill, np.float64))[()]
    return np.asarray(_default_fill(operand.dtype) if fill is None else fill, operand.dtype)


shape_rules[gather_p] = _gather_shape
eval_rules[gather_p] = _gather_eval


def _gather_jvp(primals, tangents, **params):
    """ad.defjvp(gather_p, _gather_jvp_rule, None): the tangent is gathered at
    the same indices, with fill 0 in "fill" mode. JAX (slicing.py):
    def _gather_jvp_rule(g, operand, indices, *, dimension_numbers, slice_sizes, unique_indices,
                         indices_are_sorted, mode, fill_value):
      return gather(g, indices, dimension_numbers, slice_sizes, unique_indices=unique_indices,
                    indices_are_sorted=indices_are_sorted, mode=mode, fill_value=0)"""
    (operand, indices), (g, _) = primals, tangents
    out = bind(gather_p, operand, indices, **params)
    if isinstance(g, Zero):
        return out, None
    return out, gather(g, indices, _gather_dims(params), params["slice_sizes"],
                       unique_indices=params["unique_indices"],
                       indices_are_sorted=params["indices_are_sorted"], mode=params["mode"], fill_value=0)


jvp_rules[gather_p] = _gather_jvp


def _gather_transpose(t, operand, indices, **params):
    """The cotangent is scatter-added into zeros at the same windows. JAX:
    def _gather_transpose_rule(t, operand, indices, *, dimension_numbers, ...):
      zeros = lax.full(operand.aval.shape, 0, typeof(t).dtype, ...)
      scatter_dnums = ScatterDimensionNumbers(update_window_dims=dimension_numbers.offset_dims,
          inserted_window_dims=dimension_numbers.collapsed_slice_dims,
          scatter_dims_to_operand_dims=dimension_numbers.start_index_map,
          operand_batching_dims=dimension_numbers.operand_batching_dims,
          scatter_indices_batching_dims=dimension_numbers.start_indices_batching_dims)
      out = scatter_add(zeros, indices, t, scatter_dnums, unique_indices=unique_indices,
                        indices_are_sorted=indices_are_sorted, mode=mode)
      return [out, None]"""
    if not is_undefined(operand) or is_undefined(indices):
        raise PrimitiveError(gather_p, "transpose only with respect to the operand")
    if isinstance(t, Zero):
        return [Zero(operand.type), None]
    zeros = zeros_like_type(ArrayType(operand.type.shape, t.dtype))
    return [scatter_add(zeros, indices, t, _scatter_dims_of_gather(_gather_dims(params)),
                        unique_indices=params["unique_indices"],
                        indices_are_sorted=params["indices_are_sorted"], mode=params["mode"]), None]


transpose_rules[gather_p] = _gather_transpose


def _scatter_dims_of_gather(dn: GatherDimensionNumbers):
    return ScatterDimensionNumbers(dn.offset_dims, dn.collapsed_slice_dims, dn.start_index_map,
                                   dn.operand_batching_dims, dn.start_indices_batching_dims)


def _gather_dims_of_scatter(dn):
    return GatherDimensionNumbers(dn.update_window_dims, dn.inserted_window_dims,
                                  dn.scatter_dims_to_operand_dims, dn.operand_batching_dims,
                                  dn.scatter_indices_batching_dims)


def _plus1(dims):
    return tuple(int(d) + 1 for d in dims)


def _gather_batch(args, dims, **params):
    """lax._gather_batching_rule: a batched operand alone gets a leading
    offset dim (a full slice of the batch); batched indices alone a leading
    batch dim (indices no longer sorted or unique); both: a new leading
    operand/indices batching dim pair."""
    (operand, indices), (op_bd, idx_bd) = args, dims
    dn, sizes = _gather_dims(params), tuple(params["slice_sizes"])
    kw = dict(mode=params["mode"], fill_value=params["fill_value"])
    if idx_bd is None:
        operand = moveaxis(operand, op_bd, 0)
        new = GatherDimensionNumbers((0,) + _plus1(dn.offset_dims), _plus1(dn.collapsed_slice_dims),
                                     _plus1(dn.start_index_map), _plus1(dn.operand_batching_dims),
                                     dn.start_indices_batching_dims)
        return gather(operand, indices, new, (operand.shape[0],) + sizes,
                      unique_indices=params["unique_indices"],
                      indices_are_sorted=params["indices_are_sorted"], **kw), 0
    if op_bd is None:
        indices = moveaxis(indices, idx_bd, 0)
        new = GatherDimensionNumbers(_plus1(dn.offset_dims), dn.collapsed_slice_dims, dn.start_index_map,
                                     dn.operand_batching_dims, _plus1(dn.start_indices_batching_dims))
        return gather(operand, indices, new, sizes, unique_indices=False, indices_are_sorted=False, **kw), 0
    operand, indices = moveaxis(operand, op_bd, 0), moveaxis(indices, idx_bd, 0)
    new = GatherDimensionNumbers(_plus1(dn.offset_dims), _plus1(dn.collapsed_slice_dims),
                                 _plus1(dn.start_index_map), (0,) + _plus1(dn.operand_batching_dims),
                                 (0,) + _plus1(dn.start_indices_batching_dims))
    return gather(operand, indices, new, ((0,) if operand.shape[0] == 0 else (1,)) + sizes,
                  unique_indices=params["unique_indices"],
                  indices_are_sorted=params["indices_are_sorted"], **kw), 0


batch_rules[gather_p] = _gather_batch


def _gather_from_jax(p: dict) -> dict:
    """JAX's params: GatherDimensionNumbers (by attribute) spelt out, the
    mode by name, a NaN fill (lax.gather's default) as None."""
    p = dict(p)
    dn = p.pop("dimension_numbers")
    p.update({k: _ints(getattr(dn, k, ())) for k in _GATHER_DIMS})   # (no batching dims before jax 0.4.31)
    p["slice_sizes"] = _ints(p["slice_sizes"])
    p["mode"] = _mode_from_jax(p["mode"])
    fill = p.get("fill_value")
    if isinstance(fill, (float, np.floating)) and math.isnan(fill):
        p["fill_value"] = None
    return p


_GATHER_EMITTER = (
    "lambda x, i, offset_dims, collapsed_slice_dims, start_index_map, operand_batching_dims, "
    "start_indices_batching_dims, slice_sizes, indices_are_sorted, unique_indices, mode, fill_value: "
    "lax.gather(x, i, lax.GatherDimensionNumbers(offset_dims, collapsed_slice_dims, start_index_map, "
    "operand_batching_dims, start_indices_batching_dims), slice_sizes, unique_indices=unique_indices, "
    "indices_are_sorted=indices_are_sorted, mode=mode, fill_value=fill_value)")
jax_facts[gather_p] = JaxFacts("gather", _GATHER_EMITTER, from_jax=_gather_from_jax)


def _g(offset, collapsed, start_map, sizes, obatch=(), ibatch=(), **kw):
    """An example's gather: fn(operand, indices)."""
    return lambda x, i: gather(x, i, GatherDimensionNumbers(offset, collapsed, start_map, obatch, ibatch),
                               sizes, **kw)


def _ref_windows(x, starts, size):
    """Windows x[s : s + size] along dim 0, stacked (numpy)."""
    return np.stack([x[s:s + size] for s in starts])


examples[gather_p] = [
    Example("embedding-rows", (((5, 3), "f32", "normal"), ((4, 1), "i32", "indices:5")),
            _g((1,), (0,), (0,), (1, 3)), lambda x, i: x[i[:, 0]], linear=((True, False),)),
    Example("columns", (((3, 5), "f32", "normal"), ((2, 1), "i32", "indices:5")),
            _g((0,), (1,), (1,), (3, 1)), lambda x, i: x[:, i[:, 0]], linear=((True, False),)),
    Example("middle-dim-2d-indices", (((2, 5, 3), "f32", "normal"), ((2, 4, 1), "i32", "indices:5")),
            _g((0, 3), (1,), (1,), (2, 1, 3)), lambda x, i: x[:, i[..., 0]], linear=((True, False),)),
    Example("point-pairs", (((4, 5), "f32", "normal"), ((3, 2), "i32", "indices:4")),
            _g((), (0, 1), (0, 1), (1, 1)), lambda x, i: x[i[:, 0], i[:, 1]], linear=((True, False),)),
    Example("take-along-axis-batching", (((4, 5), "f32", "normal"), ((4, 1, 1), "i32", "indices:5")),
            _g((), (1,), (1,), (1, 1), (0,), (0,), mode="fill"),
            lambda x, i: np.take_along_axis(x, i[:, :, 0], axis=1), linear=((True, False),)),
    Example("clip-windows", (((5, 3), "f32", "normal"), ((4, 1), "i32", "indices:8")),
            _g((1, 2), (), (0,), (2, 3), mode="clip"),
            lambda x, i: _ref_windows(x, np.clip(i[:, 0], 0, 3), 2), linear=((True, False),)),
    # out of bounds, XLA clamps the gather but its transpose drops the
    # scatter: "gradients will not be correct" (GatherScatterMode's doc), no transpose check
    Example("promise-in-bounds-negative", (((5, 3), "f32", "normal"), ((4, 1), "i32", "ints")),
            _g((1,), (0,), (0,), (1, 3)), lambda x, i: x[np.clip(i[:, 0], 0, 4)]),
    Example("fill-out-of-bounds", (((5, 3), "f32", "normal"), ((6, 1), "i32", "indices:8")),
            _g((1,), (0,), (0,), (1, 3), mode="fill", fill_value=0.5),
            lambda x, i: np.where((i < 5), x[np.minimum(i[:, 0], 4)], 0.5), linear=()),
    Example("fill-default-in-bounds", (((5, 3), "f32", "normal"), ((4, 1), "i32", "indices:5")),
            _g((1,), (0,), (0,), (1, 3), mode="fill", unique_indices=True, indices_are_sorted=True),
            lambda x, i: x[i[:, 0]], linear=((True, False),)),
    Example("int-operand-fill", (((5,), "i32", "ints"), ((3, 1), "i32", "indices:7")),
            _g((), (0,), (0,), (1,), mode="fill"),
            lambda x, i: np.where(i[:, 0] < 5, x[np.minimum(i[:, 0], 4)], np.iinfo(np.int32).min)),
]


# ==========================================================================
# scatter-add and scatter

class ScatterDimensionNumbers(NamedTuple):
    """lax.ScatterDimensionNumbers (the index vector is the last dim of the indices)."""
    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple
    operand_batching_dims: tuple = ()
    scatter_indices_batching_dims: tuple = ()


_SCATTER_DIMS = ScatterDimensionNumbers._fields
_SCATTER_PARAMS = _SCATTER_DIMS + ("indices_are_sorted", "unique_indices", "mode")
scatter_add_p = primitive("scatter-add", _SCATTER_PARAMS)
scatter_p = primitive("scatter", _SCATTER_PARAMS)


def _scatter_bind(prim, operand, indices, updates, dimension_numbers, indices_are_sorted,
                  unique_indices, mode):
    dn = ScatterDimensionNumbers(*[_ints(d) for d in dimension_numbers])
    return bind(prim, operand, indices, updates, **dn._asdict(), indices_are_sorted=bool(indices_are_sorted),
                unique_indices=bool(unique_indices), mode=_parse_mode(mode, "fill"))


def scatter_add(operand, indices, updates, dimension_numbers, *, indices_are_sorted=False,
                unique_indices=False, mode=None):
    """lax.scatter_add: out = operand, then out[start(b) + w] += updates[b, w]
    for every update window (duplicates add up). Mode None is FILL_OR_DROP:
    a window not wholly in bounds is dropped; "clip" clamps its start."""
    return _scatter_bind(scatter_add_p, operand, indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def scatter(operand, indices, updates, dimension_numbers, *, indices_are_sorted=False,
            unique_indices=False, mode=None):
    """lax.scatter: out = operand, then out[start(b) + w] = updates[b, w]
    (of duplicates, one wins: the last here, as XLA:CPU's loop)."""
    return _scatter_bind(scatter_p, operand, indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def _scatter_dims(params) -> ScatterDimensionNumbers:
    return ScatterDimensionNumbers(*[tuple(params[k]) for k in _SCATTER_DIMS])


def _scatter_window_sizes(operand_shape, updates_shape, dn) -> list:
    """The update window's extent along each operand dim (1 for inserted and
    batching dims), as JAX's transpose rules and _clamp_scatter_indices compute it."""
    sizes, pos = [], 0
    for d in range(len(operand_shape)):
        if d in dn.inserted_window_dims or d in dn.operand_batching_dims:
            sizes.append(1)
        else:
            sizes.append(updates_shape[dn.update_window_dims[pos]])
            pos += 1
    return sizes


def _scatter_shape(prim):
    def rule(operand, indices, updates, **params):
        """lax._scatter_shape_rule's checks; the output has the operand's type."""
        dn = _scatter_dims(params)
        _check_index_type(prim, indices)
        _check_mode(prim, params["mode"])
        if updates.dtype != operand.dtype:
            raise PrimitiveError(prim, f"updates {updates} must have the operand's dtype ({operand})")
        if indices.ndim < 1 or updates.ndim != indices.ndim - 1 + len(dn.update_window_dims):
            raise PrimitiveError(prim, f"updates {updates} must have rank {indices.ndim - 1} + "
                                       f"{len(dn.update_window_dims)} for indices {indices}")
        _sorted_unique_in_range(prim, dn.update_window_dims, updates.ndim, "update_window_dims")
        _sorted_unique_in_range(prim, dn.inserted_window_dims, operand.ndim, "inserted_window_dims")
        _sorted_unique_in_range(prim, dn.operand_batching_dims, operand.ndim, "operand_batching_dims")
        _sorted_unique_in_range(prim, dn.scatter_dims_to_operand_dims, operand.ndim,
                                "scatter_dims_to_operand_dims", need_sorted=False)
        _sorted_unique_in_range(prim, dn.scatter_indices_batching_dims, indices.ndim - 1,
                                "scatter_indices_batching_dims", need_sorted=False)
        if set(dn.operand_batching_dims) & (set(dn.inserted_window_dims) | set(dn.scatter_dims_to_operand_dims)):
            raise PrimitiveError(prim, "operand_batching_dims must be disjoint from inserted_window_dims "
                                       "and scatter_dims_to_operand_dims")
        if len(dn.update_window_dims) + len(dn.inserted_window_dims) + len(dn.operand_batching_dims) \
                != operand.ndim or len(dn.scatter_dims_to_operand_dims) != indices.shape[-1]:
            raise PrimitiveError(prim, f"dimension numbers {tuple(dn)} do not fit {operand} and {indices}")
        scatter_dims = [d for d in range(updates.ndim) if d not in dn.update_window_dims]
        if [updates.shape[d] for d in scatter_dims] != list(indices.shape[:-1]):
            raise PrimitiveError(prim, f"scatter dims of updates {updates} must match indices {indices}")
        if [operand.shape[d] for d in dn.operand_batching_dims] != \
                [indices.shape[d] for d in dn.scatter_indices_batching_dims]:
            raise PrimitiveError(prim, "operand and indices batching dims must have equal sizes")
        if any(s > n for s, n in zip(_scatter_window_sizes(operand.shape, updates.shape, dn), operand.shape)):
            raise PrimitiveError(prim, f"update windows of {updates} exceed the operand {operand}")
        return [operand]
    return rule


def _scatter_where(operand, indices, updates, params):
    """(operand positions, update values) of the windows that are applied:
    all of them with clamped starts in "clip" mode, the wholly in-bounds
    ones otherwise (FILL_OR_DROP drops; XLA drops under PROMISE_IN_BOUNDS too)."""
    dn = _scatter_dims(params)
    sizes = _scatter_window_sizes(operand.shape, updates.shape, dn)
    window_dims = [d for d in range(operand.ndim) if d not in dn.inserted_window_dims + dn.operand_batching_dims]
    scatter_dims = [d for d in range(updates.ndim) if d not in dn.update_window_dims]
    upd = np.transpose(updates, scatter_dims + list(dn.update_window_dims))
    where, ok = _window_indices(operand.shape, _concrete(indices, scatter_p), sizes, window_dims,
                                list(dn.scatter_dims_to_operand_dims), list(dn.operand_batching_dims),
                                list(dn.scatter_indices_batching_dims))
    if params["mode"] == "clip":
        ok = np.ones_like(ok)
    keep = np.broadcast_to(ok.reshape(ok.shape + (1,) * (upd.ndim - ok.ndim)), upd.shape)
    return tuple(a[keep] for a in where), upd[keep]


def _scatter_target(out: np.ndarray, where: tuple, values):
    """(the array to write into, positions): `out` itself, or for a scalar
    operand (an empty index vector: `x.at[()].set(v)`, found in flax 0.10's
    BatchNorm on jax 0.6.2) a one-element view of it, every value at 0."""
    if out.ndim:
        return out, where
    return out.reshape(1), (np.zeros(np.shape(values), dtype=np.intp),)


def _scatter_add_eval(operand, indices, updates, **params):
    xp = namespace(operand, updates)
    out = np.array(xp.compute(operand), copy=True)
    where, values = _scatter_where(operand, indices, updates, params)
    target, where = _scatter_target(out, where, values)
    np.add.at(target, where, xp.compute(values))
    return xp.result(out, operand.dtype)


def _scatter_eval(operand, indices, updates, **params):
    xp = namespace(operand, updates)
    out = np.array(xp.compute(operand) if xp.name == "sympy" else operand, copy=True)
    where, values = _scatter_where(operand, indices, updates, params)
    target, where = _scatter_target(out, where, values)
    target[where] = xp.compute(values) if xp.name == "sympy" else values
    return out


shape_rules[scatter_add_p] = _scatter_shape(scatter_add_p)
shape_rules[scatter_p] = _scatter_shape(scatter_p)
eval_rules[scatter_add_p] = _scatter_add_eval
eval_rules[scatter_p] = _scatter_eval


def scatter_addsub_jvp(prim):
    """The JVP rule of scatter-add or scatter-sub `prim`: linear in (operand,
    updates), the tangents are scattered alike. JAX:
    def _scatter_addsub_jvp(prim, primals, tangents, *, ...):
      val_out = prim.bind(operand, indices, updates, ...)
      if type(g_operand) is ad_util.Zero and type(g_updates) is ad_util.Zero:
        tangent_out = ad_util.p2tz(val_out)
      else:
        g_operand = ad.instantiate_zeros(g_operand)
        g_updates = ad.instantiate_zeros(g_updates)
        tangent_out = prim.bind(g_operand, indices, g_updates, ...)"""
    def rule(primals, tangents, **params):
        (operand, indices, updates), (g_operand, _, g_updates) = primals, tangents
        out = bind(prim, operand, indices, updates, **params)
        if isinstance(g_operand, Zero) and isinstance(g_updates, Zero):
            return out, None
        return out, bind(prim, instantiate(g_operand), indices, instantiate(g_updates), **params)
    return rule


jvp_rules[scatter_add_p] = scatter_addsub_jvp(scatter_add_p)


def _gather_back(t, indices, updates_shape, params, **kw):
    """The update windows read back out of `t` (the inverse gather of JAX's
    scatter transpose and JVP rules): lax.gather with the mirrored dimension
    numbers and the window sizes as slice sizes."""
    dn = _scatter_dims(params)
    return gather(t, indices, _gather_dims_of_scatter(dn),
                  _scatter_window_sizes(t.shape, updates_shape, dn), **kw)


def _scatter_add_transpose(t, operand, indices, updates, **params):
    """operand_t = t; updates_t = the windows gathered out of t. JAX:
    def _scatter_addsub_transpose_rule(prim, t, operand, indices, updates, *, ...):
      if ad.is_undefined_primal(operand): operand_t = t
      if ad.is_undefined_primal(updates):
        gather_dnums = GatherDimensionNumbers(offset_dims=dimension_numbers.update_window_dims, ...)
        update_t = gather(t, indices, dimension_numbers=gather_dnums, slice_sizes=slice_sizes,
                          mode=mode, fill_value=0)
      return [operand_t, None, update_t]"""
    if is_undefined(indices):
        raise PrimitiveError(scatter_add_p, "transpose with respect to the indices (not linear)")
    u_type = updates.type if is_undefined(updates) else ArrayType(_shape_of(updates), operand.type.dtype)
    if isinstance(t, Zero):
        return [Zero(operand.type) if is_undefined(operand) else None, None,
                Zero(updates.type) if is_undefined(updates) else None]
    operand_t = t if is_undefined(operand) else None
    update_t = _gather_back(t, indices, u_type.shape, params, mode=params["mode"],
                            fill_value=0) if is_undefined(updates) else None
    return [operand_t, None, update_t]


transpose_rules[scatter_add_p] = _scatter_add_transpose


def _full(shape, value, dtype):
    """lax.full: a literal for a scalar, else `broadcast_in_dim value`."""
    v = np.asarray(value, dtype=dtype)
    return v if len(shape) == 0 else broadcast_in_dim(v, tuple(shape), ())


def _reshape(x, shape):
    """lax.reshape: nothing to do for a non-scalar already of that shape."""
    return x if tuple(x.shape) == tuple(shape) and x.ndim else reshape(x, shape)


def _select(pred, on_true, on_false):
    """lax.select(pred, on_true, on_false) = select_n(pred, on_false, on_true)."""
    return select_n(pred, on_false, on_true)


def _scatter_jvp(primals, tangents, **params):
    """Of overlapping updates one wins, unspecified which: JAX scatters ids,
    gathers them back, masks the losers out and scatter-ADDS the rest (for
    primal and tangent alike); with unique_indices the tangents are
    scattered as the primals. JAX (slicing.py, _scatter_jvp), its ids in
    uint32 (int32 where the spec has no unsigned dtype: the ids only ever
    reach `eq`, whose bool masks are what is saved):
      update_ids = lax.add(lax.reshape(lax.iota(id_dtype, num_ids), ids_shape),
                           lax._ones(updates, dtype=id_dtype))
      scattered_ids = scatter(lax.full(operand.shape, 0, id_dtype), indices, update_ids, dnums, ...)
      gathered_update_ids = gather(scattered_ids, indices, dimension_numbers=gather_dnums,
                                   slice_sizes=slice_sizes)
      masked_operand = lax.select(lax.eq(scattered_ids, lax._zeros(scattered_ids)),
                                  operand, lax._zeros(operand))
      masked_updates = lax.select(lax.eq(update_ids,  gathered_update_ids),
                                  updates, lax._zeros(updates))
      (masked_g_operand, masked_g_updates likewise)
      val_out = scatter_add(masked_operand, indices, masked_updates, ...)
      tangent_out = scatter_add(masked_g_operand, indices, masked_g_updates, ...)"""
    (operand, indices, updates), (g_operand, _, g_updates) = primals, tangents
    if isinstance(g_operand, Zero) and isinstance(g_updates, Zero):
        return bind(scatter_p, operand, indices, updates, **params), None
    g_operand, g_updates = instantiate(g_operand), instantiate(g_updates)
    dn = _scatter_dims(params)
    kw = dict(indices_are_sorted=params["indices_are_sorted"], unique_indices=params["unique_indices"],
              mode=params["mode"])
    if params["unique_indices"]:
        return (bind(scatter_p, operand, indices, updates, **params),
                bind(scatter_p, g_operand, indices, g_updates, **params))
    ids_shape = [1 if d in dn.update_window_dims else s for d, s in enumerate(updates.shape)]
    update_ids = add(_reshape(iota(_ID_DTYPE, (math.prod(ids_shape),)), ids_shape),
                     _full(updates.shape, 1, _ID_DTYPE))
    scattered_ids = scatter(_full(operand.shape, 0, _ID_DTYPE), indices, update_ids, dn, **kw)
    gathered_update_ids = _gather_back(scattered_ids, indices, updates.shape, params)

    def keep(pred_of, x):
        pred = eq(scattered_ids, _full_like(scattered_ids, 0)) if pred_of == "operand" \
            else eq(update_ids, gathered_update_ids)
        return _select(pred, x, _full_like(x, 0))
    masked_operand, masked_updates = keep("operand", operand), keep("updates", updates)
    masked_g_operand, masked_g_updates = keep("operand", g_operand), keep("updates", g_updates)
    return (scatter_add(masked_operand, indices, masked_updates, dn, **kw),
            scatter_add(masked_g_operand, indices, masked_g_updates, dn, **kw))


jvp_rules[scatter_p] = _scatter_jvp


def _scatter_transpose(t, operand, indices, updates, **params):
    """Only with unique_indices (as in JAX): the operand's cotangent is t with
    the updated windows zeroed (a scatter of zeros), the updates' is the
    windows gathered out of t. JAX (_scatter_transpose_rule):
      operand_t = scatter(t, indices, lax.full(updates_shape, 0, dtype=t.dtype), ...,
                          unique_indices=True, mode=mode)
      update_t = gather(t, indices, dimension_numbers=gather_dnums, slice_sizes=slice_sizes,
                        mode=mode, fill_value=0)"""
    if not params["unique_indices"]:
        raise PrimitiveError(scatter_p, "transpose is only implemented where unique_indices=True (as in JAX)")
    if is_undefined(indices):
        raise PrimitiveError(scatter_p, "transpose with respect to the indices (not linear)")
    u_shape = updates.type.shape if is_undefined(updates) else _shape_of(updates)
    if isinstance(t, Zero):
        return [Zero(operand.type) if is_undefined(operand) else None, None,
                Zero(updates.type) if is_undefined(updates) else None]
    operand_t = update_t = None
    if is_undefined(operand):
        operand_t = scatter(t, indices, _full(u_shape, 0, t.dtype), _scatter_dims(params),
                            indices_are_sorted=params["indices_are_sorted"], unique_indices=True,
                            mode=params["mode"])
    if is_undefined(updates):
        update_t = _gather_back(t, indices, u_shape, params, mode=params["mode"], fill_value=0)
    return [operand_t, None, update_t]


transpose_rules[scatter_p] = _scatter_transpose


def _scatter_batcher(prim):
    def rule(args, dims, **params):
        """lax._scatter_batching_rule: operand and updates get the batch in
        front (broadcast if unbatched); unbatched indices make it a leading
        window dim, batched ones a leading operand/indices batching pair."""
        (operand, indices, updates), (op_bd, idx_bd, up_bd) = args, dims
        size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
        operand, updates = bdim_at_front(operand, op_bd, size), bdim_at_front(updates, up_bd, size)
        dn = _scatter_dims(params)
        if idx_bd is None:
            new = ScatterDimensionNumbers((0,) + _plus1(dn.update_window_dims), _plus1(dn.inserted_window_dims),
                                          _plus1(dn.scatter_dims_to_operand_dims),
                                          _plus1(dn.operand_batching_dims), dn.scatter_indices_batching_dims)
        else:
            indices = bdim_at_front(indices, idx_bd, size)
            new = ScatterDimensionNumbers(_plus1(dn.update_window_dims), _plus1(dn.inserted_window_dims),
                                          _plus1(dn.scatter_dims_to_operand_dims),
                                          (0,) + _plus1(dn.operand_batching_dims),
                                          (0,) + _plus1(dn.scatter_indices_batching_dims))
        return _scatter_bind(prim, operand, indices, updates, new, params["indices_are_sorted"],
                             params["unique_indices"], params["mode"]), 0
    return rule


batch_rules[scatter_add_p] = _scatter_batcher(scatter_add_p)
batch_rules[scatter_p] = _scatter_batcher(scatter_p)


def _scatter_from_jax(p: dict) -> dict:
    """JAX's params: ScatterDimensionNumbers spelt out, the mode by name; a
    scatter-add's update_jaxpr (always lax.add) and empty update_consts
    dropped (a scatter's update_jaxpr is None; another is scatter_apply,
    left for the import to refuse)."""
    p = dict(p)
    dn = p.pop("dimension_numbers")
    p.update({k: _ints(getattr(dn, k, ())) for k in _SCATTER_DIMS})   # (no batching dims before jax 0.4.31)
    p["mode"] = _mode_from_jax(p["mode"])
    if not p.get("update_consts", ()):
        p.pop("update_consts", None)
    return p


def _scatter_add_from_jax(p: dict) -> dict:
    p = _scatter_from_jax(p)
    p.pop("update_jaxpr", None)
    return p


def _scatter_emitter(fn: str) -> str:
    return ("lambda x, i, u, update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims, "
            "operand_batching_dims, scatter_indices_batching_dims, indices_are_sorted, unique_indices, mode: "
            f"lax.{fn}(x, i, u, lax.ScatterDimensionNumbers(update_window_dims, inserted_window_dims, "
            "scatter_dims_to_operand_dims, operand_batching_dims, scatter_indices_batching_dims), "
            "indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode)")


jax_facts[scatter_add_p] = JaxFacts("scatter-add", _scatter_emitter("scatter_add"), from_jax=_scatter_add_from_jax)
jax_facts[scatter_p] = JaxFacts("scatter", _scatter_emitter("scatter"), from_jax=_scatter_from_jax,
                                ignored=(("update_jaxpr", None),))


def _s(prim, window, inserted, to_operand, obatch=(), ibatch=(), **kw):
    """An example's scatter: fn(operand, indices, updates)."""
    fn = scatter_add if prim is scatter_add_p else scatter
    return lambda x, i, u: fn(x, i, u, ScatterDimensionNumbers(window, inserted, to_operand, obatch, ibatch), **kw)


def _ref_add_rows(x, i, u, keep=None, set_=False):
    """numpy: rows u[k] added (or written, the last winning) at x[i[k]]."""
    out = np.array(x, copy=True)
    for k in range(len(i)):
        if keep is None or keep(i[k]):
            if set_:
                out[i[k]] = u[k]
            else:
                out[i[k]] += u[k]
    return out


def _ref_add_windows(x, starts, u):
    out = np.array(x, copy=True)
    for s, w in zip(starts, u):
        out[s:s + len(w)] += w
    return out


_LIN3 = ((True, False, True),)   # affine in the operand alone, or in the updates alone
examples[scatter_add_p] = [
    Example("at-add-duplicates", (((5, 3), "f32", "normal"), ((6, 1), "i32", "indices:3"), ((6, 3), "f32", "normal")),
            _s(scatter_add_p, (1,), (0,), (0,)), lambda x, i, u: _ref_add_rows(x, i[:, 0], u), linear=_LIN3),
    Example("drop-out-of-bounds", (((5, 3), "f32", "normal"), ((6, 1), "i32", "indices:8"), ((6, 3), "f32", "normal")),
            _s(scatter_add_p, (1,), (0,), (0,), mode="fill"),
            lambda x, i, u: _ref_add_rows(x, i[:, 0], u, keep=lambda r: r < 5), linear=_LIN3),
    Example("clip-windows", (((5, 3), "f32", "normal"), ((4, 1), "i32", "indices:8"), ((4, 2, 3), "f32", "normal")),
            _s(scatter_add_p, (1, 2), (), (0,), mode="clip"),
            lambda x, i, u: _ref_add_windows(x, np.clip(i[:, 0], 0, 3), u), linear=_LIN3),
    Example("batching-dims", (((4, 5), "f32", "normal"), ((4, 1, 1), "i32", "indices:5"), ((4, 1), "f32", "normal")),
            _s(scatter_add_p, (), (1,), (1,), (0,), (0,), mode="promise_in_bounds"),
            lambda x, i, u: np.stack([_ref_add_rows(x[b], i[b, :, 0], u[b]) for b in range(4)]), linear=_LIN3),
]


def _set_unique(x, u):
    """x.at[perm].set(u) with a permutation of unique indices (from iota)."""
    n = u.shape[0]
    i = reshape(rev(iota(np.int32, (n,)), (0,)), (n, 1))
    return scatter(x, i, u, ScatterDimensionNumbers((1,), (0,), (0,)), unique_indices=True)


examples[scatter_p] = [
    Example("at-set-duplicates", (((5, 3), "f32", "normal"), ((6, 1), "i32", "indices:4"), ((6, 3), "f32", "normal")),
            _s(scatter_p, (1,), (0,), (0,)), lambda x, i, u: _ref_add_rows(x, i[:, 0], u, set_=True)),
    Example("unique-indices", (((5, 3), "f32", "normal"), ((3, 3), "f32", "normal")), _set_unique,
            lambda x, u: _ref_add_rows(x, [2, 1, 0], u, set_=True), linear=((True, True),)),
    Example("clip-windows", (((5, 3), "f32", "normal"), ((2, 1), "i32", "indices:8"), ((2, 2, 3), "f32", "normal")),
            _s(scatter_p, (1, 2), (), (0,), mode="clip"),
            lambda x, i, u: _ref_set_windows(x, np.clip(i[:, 0], 0, 3), u)),
]


def _ref_set_windows(x, starts, u):
    out = np.array(x, copy=True)
    for s, w in zip(starts, u):
        out[s:s + len(w)] = w
    return out


# ==========================================================================
# dynamic_slice and dynamic_update_slice

dynamic_slice_p = primitive("dynamic_slice", ["slice_sizes"])
dynamic_update_slice_p = primitive("dynamic_update_slice")


def dynamic_slice(operand, start_indices, slice_sizes):
    """lax.dynamic_slice with allow_negative_indices=False: out = operand[s :
    s + slice_sizes] with each start clamped into [0, dim - size] (XLA)."""
    return bind(dynamic_slice_p, operand, *start_indices, slice_sizes=_ints(slice_sizes))


def dynamic_update_slice(operand, update, start_indices):
    """lax.dynamic_update_slice (no negative-index wrapping): operand with
    update written at the clamped start."""
    return bind(dynamic_update_slice_p, operand, update, *start_indices)


def _check_starts(prim, operand, starts):
    if len(starts) != operand.ndim:
        raise PrimitiveError(prim, f"needs one start index per dim of {operand}, got {len(starts)}")
    for s in starts:
        if s.ndim != 0 or s.dtype != starts[0].dtype:
            raise PrimitiveError(prim, f"start indices must be scalars of one dtype, got {list(starts)}")
        _check_index_type(prim, s, "start indices")


def _dynamic_slice_shape(operand, *starts, slice_sizes):
    _check_starts(dynamic_slice_p, operand, starts)
    if len(slice_sizes) != operand.ndim or any(not 0 <= s <= d for s, d in zip(slice_sizes, operand.shape)):
        raise PrimitiveError(dynamic_slice_p, f"slice_sizes {tuple(slice_sizes)} out of range for {operand}")
    return [ArrayType(slice_sizes, operand.dtype)]


def _dynamic_update_slice_shape(operand, update, *starts):
    p = dynamic_update_slice_p
    _check_starts(p, operand, starts)
    if update.dtype != operand.dtype or update.ndim != operand.ndim or \
            any(u > d for u, d in zip(update.shape, operand.shape)):
        raise PrimitiveError(p, f"update {update} must fit in the operand {operand} and have its dtype")
    return [operand]


def _clamped_box(shape, starts, sizes):
    starts = [int(np.clip(int(_concrete(s, dynamic_slice_p)), 0, d - n)) for s, d, n in zip(starts, shape, sizes)]
    return tuple(np.s_[s:s + n] for s, n in zip(starts, sizes))


def _dynamic_update_slice_eval(operand, update, *starts):
    xp = namespace(operand, update)
    out = np.array(xp.compute(operand) if xp.name == "sympy" else operand, copy=True)
    out[_clamped_box(operand.shape, starts, update.shape)] = xp.compute(update) if xp.name == "sympy" else update
    return out


shape_rules[dynamic_slice_p] = _dynamic_slice_shape
shape_rules[dynamic_update_slice_p] = _dynamic_update_slice_shape
eval_rules[dynamic_slice_p] = lambda x, *starts, slice_sizes: \
    x[_clamped_box(x.shape, starts, slice_sizes)].copy()
eval_rules[dynamic_update_slice_p] = _dynamic_update_slice_eval


def _dynamic_slice_jvp(primals, tangents, *, slice_sizes):
    """The tangent is sliced at the same place (first, as JAX binds it):
    def _dynamic_slice_jvp(primals, tangents, *, slice_sizes):
      tangent_out = tangents[0]
      if type(tangent_out) is not ad_util.Zero:
        tangent_out = dynamic_slice_p.bind(tangent_out, *primals[1:], slice_sizes=slice_sizes)
      return dynamic_slice_p.bind(primals[0], *primals[1:], slice_sizes=slice_sizes), tangent_out"""
    operand, *starts = primals
    t = tangents[0]
    t_out = None if isinstance(t, Zero) else bind(dynamic_slice_p, t, *starts, slice_sizes=slice_sizes)
    return bind(dynamic_slice_p, operand, *starts, slice_sizes=slice_sizes), t_out


def _dynamic_slice_transpose(t, operand, *starts, slice_sizes):
    """_dynamic_slice_transpose_fancy: the cotangent written into zeros,
    dynamic_update_slice_p.bind(lax.full(operand_aval.shape, 0, ...), out_ct, *start_indices)."""
    if not is_undefined(operand) or any(is_undefined(s) for s in starts):
        raise PrimitiveError(dynamic_slice_p, "transpose only with respect to the operand")
    if isinstance(t, Zero):
        return [Zero(operand.type)] + [None] * len(starts)
    zeros = _full(operand.type.shape, 0, operand.type.dtype)
    return [bind(dynamic_update_slice_p, zeros, t, *starts)] + [None] * len(starts)


def _dynamic_update_slice_jvp(primals, tangents):
    """Linear in (operand, update). JAX:
      val_out = dynamic_update_slice_p.bind(operand, update, *start_indices)
      if type(g_operand) is ad_util.Zero and type(g_update) is ad_util.Zero: tangent_out = p2tz(val_out)
      else:
        g_operand = ad.instantiate_zeros(g_operand); g_update = ad.instantiate_zeros(g_update)
        tangent_out = dynamic_update_slice_p.bind(g_operand, g_update, *start_indices)"""
    (operand, update, *starts), (g_operand, g_update, *_) = primals, tangents
    out = bind(dynamic_update_slice_p, operand, update, *starts)
    if isinstance(g_operand, Zero) and isinstance(g_update, Zero):
        return out, None
    return out, bind(dynamic_update_slice_p, instantiate(g_operand), instantiate(g_update), *starts)


def _dynamic_update_slice_transpose(t, operand, update, *starts):
    """The operand's cotangent is t with the window zeroed, the update's the
    window sliced out of t. JAX:
      zeros = lax._zeros(t, shape=update_ct_aval.shape, ...)
      operand_t = dynamic_update_slice_p.bind(t, zeros, *start_indices) if ad.is_undefined_primal(operand)
      update_t = dynamic_slice_p.bind(t, *start_indices, slice_sizes=update_ct_aval.shape) if ...(update)"""
    if any(is_undefined(s) for s in starts):
        raise PrimitiveError(dynamic_update_slice_p, "transpose with respect to a start index (not linear)")
    none = [None] * len(starts)
    if isinstance(t, Zero):
        return [Zero(operand.type) if is_undefined(operand) else None,
                Zero(update.type) if is_undefined(update) else None] + none
    u_shape = update.type.shape if is_undefined(update) else _shape_of(update)
    zeros = _full(u_shape, 0, t.dtype)
    operand_t = bind(dynamic_update_slice_p, t, zeros, *starts) if is_undefined(operand) else None
    update_t = bind(dynamic_slice_p, t, *starts, slice_sizes=tuple(u_shape)) if is_undefined(update) else None
    return [operand_t, update_t] + none


jvp_rules[dynamic_slice_p] = _dynamic_slice_jvp
jvp_rules[dynamic_update_slice_p] = _dynamic_update_slice_jvp
transpose_rules[dynamic_slice_p] = _dynamic_slice_transpose
transpose_rules[dynamic_update_slice_p] = _dynamic_update_slice_transpose


def _batch_start_indices(starts, dims):
    """slicing._batch_dynamic_slice_indices: the scalar starts as one index
    vector, (n,) if none is batched, else (size, n) with the batch first."""
    if not starts:
        return np.zeros((0,), np.int32), None
    size = next((x.shape[d] for x, d in zip(starts, dims) if d is not None), None)
    if size is None:
        parts = [broadcast_in_dim(i, (1,), ()) for i in starts]
        return (parts[0] if len(parts) == 1 else concatenate(parts, 0)), None
    parts = [broadcast_in_dim(x, (size, 1), (0,) if d is not None else ()) for x, d in zip(starts, dims)]
    return (parts[0] if len(parts) == 1 else concatenate(parts, 1)), 0


def _dynamic_slice_batch(args, dims, *, slice_sizes):
    """lax._dynamic_slice_batching_rule: a gather of the window at the start
    vector (CLIP mode, unique and sorted), batched by the gather's rule."""
    (operand, *starts), (op_bd, *start_bds) = args, dims
    n = len(starts)
    index, index_bd = _batch_start_indices(starts, start_bds)
    dn = GatherDimensionNumbers(tuple(range(n)), (), tuple(range(n)))
    return _gather_batch([operand, index], [op_bd, index_bd], **dn._asdict(), slice_sizes=tuple(slice_sizes),
                         unique_indices=True, indices_are_sorted=True, mode="clip", fill_value=None)


def _dynamic_update_slice_batch(args, dims):
    """lax._dynamic_update_slice_batching_rule: a scatter of the update at the
    start vector (CLIP mode, unique and sorted), batched by scatter's rule:
      api.vmap(partial(scatter, dimension_numbers=dnums, indices_are_sorted=True,
                       unique_indices=True, mode=GatherScatterMode.CLIP),
               in_axes=(operand_bd, index_bdim, update_bd), out_axes=0)(operand, index, update), 0"""
    (operand, update, *starts), (op_bd, up_bd, *start_bds) = args, dims
    n = len(starts)
    index, index_bd = _batch_start_indices(starts, start_bds)
    dn = ScatterDimensionNumbers(tuple(range(n)), (), tuple(range(n)))
    return _scatter_batcher(scatter_p)([operand, index, update], [op_bd, index_bd, up_bd], **dn._asdict(),
                                       indices_are_sorted=True, unique_indices=True, mode="clip")


batch_rules[dynamic_slice_p] = _dynamic_slice_batch
batch_rules[dynamic_update_slice_p] = _dynamic_update_slice_batch
_SLICING = "__import__('jax._src.lax.slicing', fromlist=['slicing'])"
jax_facts[dynamic_slice_p] = JaxFacts(
    "dynamic_slice", f"lambda x, *starts, slice_sizes: {_SLICING}.dynamic_slice_p.bind(x, *starts, "
    "slice_sizes=tuple(slice_sizes))")
jax_facts[dynamic_update_slice_p] = JaxFacts(
    "dynamic_update_slice", f"lambda x, u, *starts: {_SLICING}.dynamic_update_slice_p.bind(x, u, *starts)")


def _ref_dyn_slice(x, starts, sizes):
    starts = [min(max(int(s), 0), d - n) for s, d, n in zip(starts, x.shape, sizes)]
    return x[tuple(slice(s, s + n) for s, n in zip(starts, sizes))]


def _ref_dyn_update(x, u, *starts):
    out = np.array(x, copy=True)
    starts = [min(max(int(s), 0), d - n) for s, d, n in zip(starts, x.shape, u.shape)]
    out[tuple(slice(s, s + n) for s, n in zip(starts, u.shape))] = u
    return out


examples[dynamic_slice_p] = [
    Example("in-bounds", (((5, 4), "f32", "normal"), ((), "i32", "indices:3"), ((), "i32", "indices:2")),
            lambda x, i, j: dynamic_slice(x, (i, j), (2, 3)), lambda x, i, j: _ref_dyn_slice(x, (i, j), (2, 3)),
            linear=((True, False, False),)),
    Example("clamped-starts", (((5, 4), "f32", "normal"), ((), "i32", "ints"), ((), "i32", "indices:8")),
            lambda x, i, j: dynamic_slice(x, (i, j), (3, 2)), lambda x, i, j: _ref_dyn_slice(x, (i, j), (3, 2)),
            linear=((True, False, False),)),
    Example("literal-start", (((6,), "f32", "normal"), ((), "i32", "indices:6")),
            lambda x, i: dynamic_slice(x, (i,), (2,)), lambda x, i: _ref_dyn_slice(x, (i,), (2,)),
            linear=((True, False),)),
]
examples[dynamic_update_slice_p] = [
    Example("clamped-starts", (((5, 4), "f32", "normal"), ((2, 3), "f32", "normal"), ((), "i32", "ints"),
                               ((), "i32", "indices:8")),
            lambda x, u, i, j: dynamic_update_slice(x, u, (i, j)), _ref_dyn_update,
            linear=((True, True, False, False),)),
    Example("literal-start", (((6, 2), "f32", "normal"), ((3, 2), "f32", "normal"), ((), "i32", "indices:4")),
            lambda x, u, i: dynamic_update_slice(x, u, (i, np.int32(0))),
            lambda x, u, i: _ref_dyn_update(x, u, i, 0), linear=((True, True, False),)),
]


# ==========================================================================
# and (lax.bitwise_and): clamp's JVP masks with it. Declared here unless a
# module imported before this one declares it (then that block is used).

if "and" in primitives:
    and_p = primitives["and"]
else:
    and_p = primitive("and")

    def _and_shape(x, y):
        if x.dtype != y.dtype or not (x.dtype == np.bool_ or _is_int(x.dtype)):
            raise PrimitiveError(and_p, f"operands must be bool or int of one dtype, got {x} and {y}")
        return [ArrayType(broadcast_shapes(and_p, x, y), x.dtype)]

    shape_rules[and_p] = _and_shape
    eval_rules[and_p] = lambda x, y: np.asarray(np.bitwise_and(x, y))
    # bool/int values carry no tangents (ad.defjvp_zero)
    jvp_rules[and_p] = lambda primals, tangents: (bind(and_p, *primals), None)
    jax_facts[and_p] = JaxFacts("and", "lambda x, y: lax.bitwise_and(x, y)")
    examples[and_p] = [Example("mask", (((2, 3), "bool", "bools"), ((2, 3), "bool", "bools")),
                               lambda x, y: bind(and_p, x, y), np.logical_and)]

    batch_rules[and_p] = broadcast_batcher(and_p)


def bitwise_and(x, y):
    return bind(and_p, x, y)


# ==========================================================================
# clamp

clamp_p = primitive("clamp")


def clamp(lo, x, hi):
    """lax.clamp: min(max(x, lo), hi) elementwise; lo and hi are scalars or
    have x's shape."""
    lo, _ = _coerce(lo, x)
    hi, _ = _coerce(hi, x)
    return bind(clamp_p, lo, x, hi)


def _clamp_shape(lo, x, hi):
    for b in (lo, hi):
        if b.shape not in ((), x.shape):
            raise PrimitiveError(clamp_p, f"bounds must be scalars or have the operand's shape, got {b} for {x}")
        if b.dtype != x.dtype:
            raise PrimitiveError(clamp_p, f"bounds must have the operand's dtype, got {b} for {x}")
    if x.dtype == np.bool_:
        raise PrimitiveError(clamp_p, f"operand must be numeric, got {x}")
    return [x]


def _clamp_eval(lo, x, hi):
    xp = namespace(lo, x, hi)
    c = [xp.compute(v) if xp.name == "sympy" else np.asarray(v) for v in (lo, x, hi)]
    return xp.result(np.broadcast_to(xp.minimum(xp.maximum(c[1], c[0]), c[2]), x.shape), x.dtype)


shape_rules[clamp_p] = _clamp_shape
eval_rules[clamp_p] = _clamp_eval


def _clamp_jvp(primals, tangents):
    """d clamp = [lo > x and lo < hi] d lo + [lo < x < hi] dx + [hi < x] d hi
    (ad.defjvp: one select per nonzero tangent, summed). JAX (lax.py):
    ad.defjvp(clamp_p,
              lambda g, min, operand, max: select(bitwise_and(gt(min, operand), lt(min, max)),
                                                  g, _zeros(operand)),
              lambda g, min, operand, max: select(bitwise_and(gt(operand, min), lt(operand, max)),
                                                  g, _zeros(operand)),
              lambda g, min, operand, max: select(lt(max, operand), g, _zeros(operand)))"""
    (lo, x, hi), (g_lo, g_x, g_hi) = primals, tangents
    out = bind(clamp_p, lo, x, hi)
    rules = [lambda g: _select(bitwise_and(gt(lo, x), lt(lo, hi)), g, _full_like(x, 0)),
             lambda g: _select(bitwise_and(gt(x, lo), lt(x, hi)), g, _full_like(x, 0)),
             lambda g: _select(lt(hi, x), g, _full_like(x, 0))]
    return out, add_tangents([rule(g) for rule, g in zip(rules, (g_lo, g_x, g_hi)) if not isinstance(g, Zero)])


jvp_rules[clamp_p] = _clamp_jvp


def _clamp_batch(args, dims):
    """lax._clamp_batch_rule: as it is where the batch axes agree (or the
    bounds are scalars), else batch in front and bounds broadcast up."""
    (lo, x, hi), (lo_bd, x_bd, hi_bd) = args, dims
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    if lo_bd == x_bd == hi_bd:
        if _shape_of(lo) == _shape_of(x) == _shape_of(hi) or ndim(lo) == ndim(hi) == 0:
            return bind(clamp_p, lo, x, hi), x_bd
        if ndim(lo) == ndim(hi) == 1:
            return bind(clamp_p, broadcast_in_dim(lo, x.shape, [lo_bd]), x,
                        broadcast_in_dim(hi, x.shape, [hi_bd])), x_bd
    elif ndim(lo) == 0 and ndim(hi) == 0 and x_bd is not None:
        return bind(clamp_p, lo, x, hi), x_bd
    lo = bdim_at_front(lo, lo_bd, size) if _shape_of(lo) else lo
    hi = bdim_at_front(hi, hi_bd, size) if _shape_of(hi) else hi
    x = bdim_at_front(x, x_bd, size) if _shape_of(x) else x
    lo = _broadcast_leading(lo, x.shape) if ndim(lo) == 0 and ndim(x) > 0 else lo
    hi = _broadcast_leading(hi, x.shape) if ndim(hi) == 0 and ndim(x) > 0 else hi
    lo = broadcast_in_dim(lo, x.shape, [0]) if 0 < ndim(lo) < ndim(x) else lo
    hi = broadcast_in_dim(hi, x.shape, [0]) if 0 < ndim(hi) < ndim(x) else hi
    if ndim(lo) > ndim(x):
        x = _broadcast_leading(x, lo.shape)
    return bind(clamp_p, lo, x, hi), 0


def _broadcast_leading(x, sizes):
    """lax.broadcast(x, sizes): new leading dims of `sizes`."""
    shape = tuple(sizes) + _shape_of(x)
    return broadcast_in_dim(x, shape, tuple(range(len(sizes), len(shape))))


batch_rules[clamp_p] = _clamp_batch
jax_facts[clamp_p] = JaxFacts("clamp", "lambda lo, x, hi: lax.clamp(lo, x, hi)")
examples[clamp_p] = [
    Example("scalar-bounds", (((3, 4), "f32", "normal"),), lambda x: clamp(-0.5, x, 0.5),
            lambda x: np.clip(x, -0.5, 0.5)),
    Example("array-bounds", (((3, 4), "f32", "unit"), ((3, 4), "f32", "normal"), ((3, 4), "f32", "positive")),
            lambda lo, x, d: clamp(lo, x, lo + d), lambda lo, x, d: np.minimum(np.maximum(x, lo), lo + d)),
    Example("switch-index", (((5,), "i32", "ints"),), lambda i: clamp(0, i, 2),
            lambda i: np.clip(i, 0, 2)),
]


# ==========================================================================
# rev

rev_p = primitive("rev", ["dimensions"])


def rev(x, dimensions):
    """lax.rev: x reversed along `dimensions` (x[::-1] along each)."""
    return bind(rev_p, x, dimensions=_ints(dimensions))


def _rev_shape(x, *, dimensions):
    if len(set(dimensions)) != len(dimensions) or any(not 0 <= d < x.ndim for d in dimensions):
        raise PrimitiveError(rev_p, f"dimensions {tuple(dimensions)} must be distinct dims of {x}")
    return [x]


def _rev_jvp(primals, tangents, *, dimensions):
    """ad.deflinear2(rev_p, ...): linear_jvp, the tangent reversed alike."""
    (x,), (t,) = primals, tangents
    out = rev(x, dimensions)
    return out, (None if isinstance(t, Zero) else rev(t, dimensions))


shape_rules[rev_p] = _rev_shape
eval_rules[rev_p] = lambda x, *, dimensions: np.flip(x, tuple(dimensions)).copy()
jvp_rules[rev_p] = _rev_jvp
# ad.deflinear2(rev_p, lambda t, _, dimensions: [rev(t, dimensions)])
transpose_rules[rev_p] = lambda t, x, *, dimensions: [
    Zero(x.type) if isinstance(t, Zero) else rev(t, dimensions)]


def _rev_batch(args, dims, *, dimensions):
    """lax._rev_batch_rule: the dims past the batch axis shift by one."""
    (x,), (bd,) = args, dims
    return rev(x, [d + 1 if d >= bd else d for d in dimensions]), bd


batch_rules[rev_p] = _rev_batch
jax_facts[rev_p] = JaxFacts("rev", "lambda x, dimensions: lax.rev(x, dimensions)")
examples[rev_p] = [
    Example("rows", (((3, 4), "f32", "normal"),), lambda x: rev(x, (0,)), lambda x: x[::-1], linear=((True,),)),
    Example("both", (((3, 4), "f32", "normal"),), lambda x: rev(x, (0, 1)), lambda x: x[::-1, ::-1],
            linear=((True,),)),
]


# ==========================================================================
# argmax and argmin

argmax_p = primitive("argmax", ["axes", "index_dtype"])
argmin_p = primitive("argmin", ["axes", "index_dtype"])


def argmax(x, axis, index_dtype=np.int32):
    """lax.argmax: the first index of the largest value along `axis` (a NaN
    counts as largest)."""
    return bind(argmax_p, x, axes=(int(axis),), index_dtype=canonical_dtype(index_dtype))


def argmin(x, axis, index_dtype=np.int32):
    """lax.argmin: the first index of the smallest value along `axis` (a NaN
    counts as smallest)."""
    return bind(argmin_p, x, axes=(int(axis),), index_dtype=canonical_dtype(index_dtype))


def _argminmax_shape(prim):
    def rule(x, *, axes, index_dtype):
        if len(axes) != 1 or not 0 <= axes[0] < x.ndim or x.shape[axes[0]] < 1:
            raise PrimitiveError(prim, f"axes {tuple(axes)} must be one non-empty dim of {x}")
        if not _is_int(canonical_dtype(index_dtype)):
            raise PrimitiveError(prim, f"index_dtype must be an integer dtype, got {index_dtype}")
        return [ArrayType(x.shape[:axes[0]] + x.shape[axes[0] + 1:], canonical_dtype(index_dtype))]
    return rule


def _argminmax_eval(fn, better: str):
    def rule(x, *, axes, index_dtype):
        """numpy's first index of the extreme (a NaN first); on sympy values
        the running comparison `better` (decided as spec/arrays.py decides)."""
        xp = namespace(x)
        if xp.name != "sympy":
            x = np.asarray(x)
            return fn(x.astype(np.float64) if x.dtype.kind == "f" else x, axis=axes[0]).astype(index_dtype)
        x = np.moveaxis(xp.compute(x), axes[0], -1)
        best, value = np.zeros(x.shape[:-1], np.int64), x[..., 0]
        for k in range(1, x.shape[-1]):
            take = getattr(xp, better)(x[..., k], value)
            best, value = np.where(take, k, best), np.where(take, x[..., k], value)
        return best.astype(index_dtype)
    return rule


def _argminmax_batcher(prim):
    def rule(args, dims, *, axes, index_dtype):
        """batching.defreducer: the axis past the batch axis shifts by one."""
        (x,), (bd,) = args, dims
        axes = tuple(int(a) for a in np.where(np.less(axes, bd), axes, np.add(axes, 1)))
        out_bd = [i for i in range(x.ndim) if i not in axes].index(bd)
        return bind(prim, x, axes=axes, index_dtype=index_dtype), out_bd
    return rule


for _p, _fn, _better in ((argmax_p, np.argmax, "greater"), (argmin_p, np.argmin, "less")):
    shape_rules[_p] = _argminmax_shape(_p)
    eval_rules[_p] = _argminmax_eval(_fn, _better)
    # ad.defjvp_zero: an index carries no tangent
    jvp_rules[_p] = (lambda p: lambda primals, tangents, **params: (bind(p, *primals, **params), None))(_p)
    batch_rules[_p] = _argminmax_batcher(_p)
    jax_facts[_p] = JaxFacts(_p.name, f"lambda x, axes, index_dtype: lax.{_p.name}(x, axes[0], index_dtype)",
                             from_jax=lambda p: {**p, "index_dtype": canonical_dtype(np.dtype(p["index_dtype"]))})
examples[argmax_p] = [
    Example("last-axis", (((3, 4), "f32", "distinct"),), lambda x: argmax(x, 1), lambda x: np.argmax(x, 1)),
    Example("ties-first", (((4, 3), "f32", "halves"),), lambda x: argmax(x, 0), lambda x: np.argmax(x, 0)),
    Example("int-operand", (((4, 3), "i32", "ints"),), lambda x: argmax(x, 1), lambda x: np.argmax(x, 1)),
]
examples[argmin_p] = [
    Example("first-axis", (((3, 4), "f32", "distinct"),), lambda x: argmin(x, 0), lambda x: np.argmin(x, 0)),
    Example("ties-first", (((4, 3), "f32", "halves"),), lambda x: argmin(x, 1), lambda x: np.argmin(x, 1)),
]


# data movement holds for complex values (gather's default fill of an
# inexact operand is NaN, nan+0j for complex)
complex_rules.update({gather_p, dynamic_slice_p, dynamic_update_slice_p, rev_p})
