"""Structural primitives (shapes move, values don't change), reductions,
and dot_general. All but reduce_max are linear; their JVP applies the
primitive to the tangent, and their transpose rules are JAX's
(concatenate and split are each other's).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from spec.core import (Example, JaxFacts, PrimitiveError, Tracer, Zero, bind, cost_rules, current_builder, eval_rules,
                       is_undefined, linear_jvp,
                       examples, jax_facts, jvp_rules, primitive, shape_rules, transpose_rules)
from spec.arrays import namespace
from spec.ir import ArrayType, canonical_dtype, is_complex, is_float, is_real_float, real_dtype
from spec.prims_elementwise import (_lit_like, add_tangents,
                                    convert_element_type, div, eq, mul)
from spec.batching import IDENTITY_BROADCAST_FOLLOWS, bdim_at_front, broadcast, moveaxis
from spec.core import batch_rules, complex_rules, instantiate
from spec.prims_elementwise import select_n, sub


def _as_tuple(x, prim, name):
    try:
        return tuple(int(i) for i in x)
    except TypeError:
        raise PrimitiveError(prim, f"param {name} must be a sequence of ints, got {x!r}") from None


# ==========================================================================
# broadcast_in_dim

broadcast_in_dim_p = primitive("broadcast_in_dim", ["shape", "broadcast_dimensions"])
jax_facts[broadcast_in_dim_p] = JaxFacts("broadcast_in_dim", "lambda x, shape, broadcast_dimensions: "
                                         "lax.broadcast_in_dim(x, shape, broadcast_dimensions)")


def broadcast_in_dim(x, shape, broadcast_dimensions):
    """Operand dim i becomes output dim broadcast_dimensions[i]; the rest are new."""
    return bind(broadcast_in_dim_p, x, shape=tuple(int(d) for d in shape),
                broadcast_dimensions=tuple(int(d) for d in broadcast_dimensions))


def _broadcast_in_dim_shape(x, *, shape, broadcast_dimensions):
    p = broadcast_in_dim_p
    shape = _as_tuple(shape, p, "shape")
    bd = _as_tuple(broadcast_dimensions, p, "broadcast_dimensions")
    if len(bd) != x.ndim:
        raise PrimitiveError(p, f"broadcast_dimensions {bd} must have one entry per operand dim of {x}")
    if any(not 0 <= d < len(shape) for d in bd) or list(bd) != sorted(set(bd)):
        raise PrimitiveError(p, f"broadcast_dimensions {bd} must be strictly increasing dims of {shape}")
    for i, d in enumerate(bd):
        if x.shape[i] not in (1, shape[d]):
            raise PrimitiveError(p, f"operand dim {i} of {x} (size {x.shape[i]}) cannot broadcast to size {shape[d]}")
    return [ArrayType(shape, x.dtype)]


def _broadcast_in_dim_eval(x, *, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), shape).copy()


def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions):
    # lax._broadcast_in_dim_transpose_rule: sum over the new dims and the
    # broadcast unit dims, then restore the unit dims with expand_dims
    if not is_undefined(x):
        return [None]
    if isinstance(ct, Zero):
        return [Zero(x.type)]
    unit_dims = [i for i, s in enumerate(x.type.shape) if s == 1]
    bdims = tuple(d for i, d in enumerate(broadcast_dimensions) if i not in unit_dims)
    axes = tuple(i for i in range(len(shape)) if i not in bdims)
    summed = reduce_sum(ct, axes)
    if not unit_dims:       # JAX's expand_dims(summed, []): an identity broadcast_in_dim, staged away
        current_builder().eqns[-1].why = IDENTITY_BROADCAST_FOLLOWS
    return [expand_dims(summed, unit_dims)]


shape_rules[broadcast_in_dim_p] = _broadcast_in_dim_shape
eval_rules[broadcast_in_dim_p] = _broadcast_in_dim_eval
jvp_rules[broadcast_in_dim_p] = linear_jvp(lambda x, **p: broadcast_in_dim(x, **p))
transpose_rules[broadcast_in_dim_p] = _broadcast_in_dim_transpose

# examples (checked by tests/test_primitive_examples.py): each reference is
# numpy, written independently of the rules
_LINEAR = ((True,),)
examples[broadcast_in_dim_p] = [
    Example("new-leading", (((3,), "f32", "normal"),), lambda x: broadcast_in_dim(x, (2, 3), (1,)),
            lambda x: np.stack([x, x]), linear=_LINEAR),
    Example("new-trailing", (((3,), "f32", "normal"),), lambda x: broadcast_in_dim(x, (3, 2, 4), (0,)),
            lambda x: np.repeat(np.repeat(x[:, None, None], 2, 1), 4, 2), linear=_LINEAR),
    Example("size1", (((3, 1), "f32", "normal"),), lambda x: broadcast_in_dim(x, (3, 4), (0, 1)),
            lambda x: np.repeat(x, 4, axis=1), linear=_LINEAR),
    Example("scalar", (((), "f32", "normal"),), lambda x: broadcast_in_dim(x, (2, 3), ()),
            lambda x: np.full((2, 3), x), linear=_LINEAR),
]


def expand_dims(x, dimensions):
    """lax.expand_dims: insert size-1 dims (a broadcast_in_dim, or nothing)."""
    if not dimensions:
        return x
    ndim_out = x.ndim + len(dimensions)
    shape = list(x.shape)
    for i in sorted(dimensions):
        shape.insert(i, 1)
    return broadcast_in_dim(x, shape, [i for i in range(ndim_out) if i not in set(dimensions)])


# ==========================================================================
# reshape, transpose, squeeze

reshape_p = primitive("reshape", ["new_sizes", "dimensions"])
transpose_p = primitive("transpose", ["permutation"])
squeeze_p = primitive("squeeze", ["dimensions"])
jax_facts[reshape_p] = JaxFacts("reshape", "lambda x, new_sizes, dimensions: lax.reshape(x, new_sizes, dimensions)")
jax_facts[transpose_p] = JaxFacts("transpose", "lambda x, permutation: lax.transpose(x, permutation)")
jax_facts[squeeze_p] = JaxFacts("squeeze", "lambda x, dimensions: lax.squeeze(x, dimensions)")


def reshape(x, new_sizes, dimensions=None):
    """reshape_p.bind: x read in the order `dimensions` (None: as it is),
    then laid out as `new_sizes` (an identity order is None, as lax.reshape
    binds it)."""
    dims = None if dimensions is None else tuple(int(d) for d in dimensions)
    if dims == tuple(range(len(dims or ()))):
        dims = None
    return bind(reshape_p, x, new_sizes=tuple(int(d) for d in new_sizes), dimensions=dims)


def transpose(x, permutation):
    """lax.transpose: the identity permutation binds nothing (as in JAX)."""
    permutation = tuple(int(d) for d in permutation)
    if permutation == tuple(range(len(permutation))) and isinstance(x, Tracer):
        return x
    return bind(transpose_p, x, permutation=permutation)


def squeeze(x, dimensions):
    return bind(squeeze_p, x, dimensions=tuple(int(d) for d in dimensions))


def _reshape_shape(x, *, new_sizes, dimensions):
    new_sizes = _as_tuple(new_sizes, reshape_p, "new_sizes")
    if dimensions is not None and sorted(_as_tuple(dimensions, reshape_p, "dimensions")) != list(range(x.ndim)):
        raise PrimitiveError(reshape_p, f"dimensions {dimensions!r} is not a permutation of the dims of {x}")
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise PrimitiveError(reshape_p, f"cannot reshape {x} to {new_sizes}")
    return [ArrayType(new_sizes, x.dtype)]


def _transpose_shape(x, *, permutation):
    perm = _as_tuple(permutation, transpose_p, "permutation")
    if sorted(perm) != list(range(x.ndim)):
        raise PrimitiveError(transpose_p, f"permutation {perm} is not a permutation of the dims of {x}")
    return [ArrayType(tuple(x.shape[i] for i in perm), x.dtype)]


def _squeeze_shape(x, *, dimensions):
    dims = _as_tuple(dimensions, squeeze_p, "dimensions")
    if any(not 0 <= d < x.ndim or x.shape[d] != 1 for d in dims) or len(set(dims)) != len(dims):
        raise PrimitiveError(squeeze_p, f"dimensions {dims} must be distinct size-1 dims of {x}")
    return [ArrayType(tuple(s for i, s in enumerate(x.shape) if i not in dims), x.dtype)]


shape_rules[reshape_p] = _reshape_shape
shape_rules[transpose_p] = _transpose_shape
shape_rules[squeeze_p] = _squeeze_shape
eval_rules[reshape_p] = lambda x, *, new_sizes, dimensions: (
    x if dimensions is None else np.transpose(x, dimensions)).reshape(new_sizes)   # _reshape_lower: transpose first
eval_rules[transpose_p] = lambda x, *, permutation: np.transpose(x, permutation).copy()
eval_rules[squeeze_p] = lambda x, *, dimensions: np.squeeze(x, axis=tuple(dimensions)) if dimensions else x
jvp_rules[reshape_p] = linear_jvp(lambda x, *, new_sizes, dimensions: reshape(x, new_sizes, dimensions))
jvp_rules[transpose_p] = linear_jvp(lambda x, *, permutation: transpose(x, permutation))
jvp_rules[squeeze_p] = linear_jvp(lambda x, *, dimensions: squeeze(x, dimensions))


def _reshape_transpose(ct, x, *, new_sizes, dimensions):
    """_reshape_transpose_rule: reshaped back to x's shape, read in the
    order `dimensions`, then transposed back by its inverse."""
    if isinstance(ct, Zero):
        return [Zero(x.type)]
    if dimensions is None:
        return [reshape(ct, x.type.shape)]
    return [transpose(reshape(ct, tuple(x.type.shape[d] for d in dimensions)), tuple(np.argsort(dimensions)))]


transpose_rules[reshape_p] = _reshape_transpose
transpose_rules[transpose_p] = lambda ct, x, *, permutation: [
    Zero(x.type) if isinstance(ct, Zero) else transpose(ct, tuple(np.argsort(permutation)))]
transpose_rules[squeeze_p] = lambda ct, x, *, dimensions: [   # lax: expand_dims(t, dimensions)
    Zero(x.type) if isinstance(ct, Zero) else expand_dims(ct, dimensions)]

examples[reshape_p] = [
    Example("reshape", (((2, 3, 4), "f32", "normal"),), lambda x: reshape(x, (6, 4)), lambda x: x.reshape(6, 4),
            linear=_LINEAR),
    Example("to-scalar", (((1, 1), "f32", "normal"),), lambda x: reshape(x, ()), lambda x: x.reshape(()),
            linear=_LINEAR),
    # what JAX's conv batching rule binds (vmap of a kernel's gradient)
    Example("dimensions", (((2, 3, 4), "f32", "normal"),), lambda x: reshape(x, (4, 6), (2, 0, 1)),
            lambda x: np.transpose(x, (2, 0, 1)).reshape(4, 6), linear=_LINEAR),
]
examples[transpose_p] = [
    Example("transpose", (((2, 3, 4), "f32", "normal"),), lambda x: transpose(x, (2, 0, 1)),
            lambda x: np.einsum("abc->cab", x), linear=_LINEAR),
    Example("2d", (((3, 5), "f32", "normal"),), lambda x: transpose(x, (1, 0)), lambda x: x.T, linear=_LINEAR),
]
examples[squeeze_p] = [
    Example("squeeze", (((3, 1, 1), "f32", "normal"),), lambda x: squeeze(x, (1, 2)), lambda x: x[:, 0, 0],
            linear=_LINEAR),
    Example("leading", (((1, 4), "f32", "normal"),), lambda x: squeeze(x, (0,)), lambda x: x[0], linear=_LINEAR),
]


# ==========================================================================
# concatenate, slice, pad

concatenate_p = primitive("concatenate", ["dimension"])
slice_p = primitive("slice", ["start_indices", "limit_indices", "strides"])
pad_p = primitive("pad", ["padding_config"])
jax_facts[concatenate_p] = JaxFacts("concatenate", "lambda *xs, dimension: lax.concatenate(list(xs), dimension)")
jax_facts[slice_p] = JaxFacts("slice", "lambda x, start_indices, limit_indices, strides: "
                              "lax.slice(x, start_indices, limit_indices, strides)")
jax_facts[pad_p] = JaxFacts("pad", "lambda x, v, padding_config: lax.pad(x, v, padding_config)")


def concatenate(operands, dimension):
    return bind(concatenate_p, *operands, dimension=int(dimension))


def slice(x, start_indices, limit_indices, strides=None):   # noqa: A001 (lax's name)
    return bind(slice_p, x, start_indices=tuple(int(i) for i in start_indices),
                limit_indices=tuple(int(i) for i in limit_indices),
                strides=None if strides is None else tuple(int(s) for s in strides))


def pad(x, padding_value, padding_config):
    return bind(pad_p, x, padding_value,
                padding_config=tuple((int(lo), int(hi), int(i)) for lo, hi, i in padding_config))


def _concatenate_shape(*xs, dimension):
    p = concatenate_p
    if not xs:
        raise PrimitiveError(p, "needs at least one operand")
    x0 = xs[0]
    if not 0 <= dimension < x0.ndim:
        raise PrimitiveError(p, f"dimension {dimension} out of range for {x0}")
    for x in xs:
        if x.dtype != x0.dtype or x.ndim != x0.ndim or any(
                a != b for i, (a, b) in enumerate(zip(x.shape, x0.shape)) if i != dimension):
            raise PrimitiveError(p, f"operands {list(xs)} differ outside dimension {dimension}")
    shape = list(x0.shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return [ArrayType(shape, x0.dtype)]


def _transpose_concatenate(ct, *xs, dimension):
    """The cotangent split back into the operands' pieces. JAX
    (lax._concatenate_transpose_rule, jax 0.4.38 on):
      if type(ct) is ad_util.Zero:
        return [ad_util.Zero(o.aval) if ad.is_undefined_primal(o) else None for o in operands]
      return split(ct, tuple(shape[dimension] for shape in operand_shapes), axis=dimension)
    One `split` for every operand, defined ones too (their pieces are
    dropped), so a second-order program saves an `output of split`. Before
    0.4.38 (jax-ml/jax 2c80d1af50 "Add a new API jax.lax.split", reverted
    in 0.4.36 and relanded by 7de9eb20df) one `slice` per undefined
    operand; only second-order residual names differ, and the oracle
    compares those from 0.7.0 on (direct linearization), where it is split."""
    if isinstance(ct, Zero):
        return [Zero(x.type) if is_undefined(x) else None for x in xs]
    shapes = [x.type.shape if is_undefined(x) else x.shape for x in xs]
    pieces = split(ct, [s[dimension] for s in shapes], dimension)
    return [piece if is_undefined(x) else None for x, piece in zip(xs, pieces)]


shape_rules[concatenate_p] = _concatenate_shape
def _concatenate_eval(*xs, dimension):
    xp = namespace(*xs)
    return np.concatenate([xp.compute(x) if xp.name == "sympy" else x for x in xs], axis=dimension)


eval_rules[concatenate_p] = _concatenate_eval
jvp_rules[concatenate_p] = linear_jvp(lambda *xs, dimension: concatenate(xs, dimension))
transpose_rules[concatenate_p] = _transpose_concatenate


# ==========================================================================
# split

split_p = primitive("split", ["sizes", "axis"], multiple_results=True)


def split(x, sizes, axis=0):
    """lax.split: consecutive pieces of x along `axis`, of the given sizes."""
    return bind(split_p, x, sizes=tuple(int(s) for s in sizes), axis=int(axis))


def _split_shape(x, *, sizes, axis):
    if not 0 <= axis < x.ndim or any(s < 0 for s in sizes) or sum(sizes) != x.shape[axis]:
        raise PrimitiveError(split_p, f"sizes {tuple(sizes)} must be >= 0 and sum to dim {axis} of {x}")
    return [ArrayType(x.shape[:axis] + (s,) + x.shape[axis + 1:], x.dtype) for s in sizes]


def _split_eval(x, *, sizes, axis):
    return [p.copy() for p in np.split(x, np.cumsum(sizes)[:-1], axis=axis)]


def _split_jvp(primals, tangents, *, sizes, axis):
    """ad.deflinear2 (linear_jvp): the tangent split alike, or all zeros."""
    (x,), (t,) = primals, tangents
    outs = split(x, sizes, axis)
    return outs, ([None] * len(sizes) if isinstance(t, Zero) else split(t, sizes, axis))


def _split_transpose(cts, x, *, sizes, axis):
    """The cotangents concatenated back, zeros instantiated. JAX:
    def _split_transpose_rule(cotangents, operand, *, sizes, axis):
      if all(type(t) is ad_util.Zero for t in cotangents): return [ad_util.Zero(operand.aval)]
      cotangents = [ct.instantiate() if type(ct) is ad_util.Zero else ct for ct in cotangents]
      return [concatenate(cotangents, dimension=axis)]"""
    if all(isinstance(c, Zero) for c in cts):
        return [Zero(x.type)]
    return [concatenate([instantiate(c) for c in cts], axis)]


shape_rules[split_p] = _split_shape
eval_rules[split_p] = _split_eval
jvp_rules[split_p] = _split_jvp
transpose_rules[split_p] = _split_transpose


def _split_batch(args, dims, *, sizes, axis):
    """lax._split_batch_rule: every piece keeps the operand's batch axis."""
    (x,), (bd,) = args, dims
    return split(x, sizes, axis + 1 if axis >= bd else axis), [bd] * len(sizes)


batch_rules[split_p] = _split_batch
jax_facts[split_p] = JaxFacts("split", "lambda x, sizes, axis: lax.split(x, sizes, axis)",
                              from_jax=lambda p: {**p, "sizes": tuple(int(s) for s in p["sizes"]), "axis": int(p["axis"])})
examples[split_p] = [
    Example("rows", (((5, 3), "f32", "normal"),), lambda x: split(x, (1, 2, 2), 0),
            lambda x: [x[:1], x[1:3], x[3:]], linear=((True,),)),
    Example("columns-with-empty", (((2, 3), "f32", "normal"),), lambda x: split(x, (0, 1, 2), 1),
            lambda x: [x[:, :0], x[:, :1], x[:, 1:]], linear=((True,),)),
]


def _slice_shape(x, *, start_indices, limit_indices, strides):
    p = slice_p
    lo = _as_tuple(start_indices, p, "start_indices")
    hi = _as_tuple(limit_indices, p, "limit_indices")
    st = (1,) * x.ndim if strides is None else _as_tuple(strides, p, "strides")
    if not len(lo) == len(hi) == len(st) == x.ndim:
        raise PrimitiveError(p, f"start/limit/strides must have one entry per dim of {x}")
    if any(not 0 <= a <= b <= d for a, b, d in zip(lo, hi, x.shape)) or any(s < 1 for s in st):
        raise PrimitiveError(p, f"bad slice {lo}:{hi}:{st} of {x}")
    return [ArrayType(tuple(-(-(b - a) // s) for a, b, s in zip(lo, hi, st)), x.dtype)]


def _slice_eval(x, *, start_indices, limit_indices, strides):
    st = strides or (1,) * x.ndim
    return x[tuple(np.s_[a:b:s] for a, b, s in zip(start_indices, limit_indices, st))].copy()


def _transpose_slice(ct, x, *, start_indices, limit_indices, strides):
    # slicing._slice_transpose_fancy: pad the cotangent with zeros
    if isinstance(ct, Zero):
        return [Zero(x.type)]
    shape = x.type.shape
    if strides is None or all(s == 1 for s in strides):
        pads = zip(start_indices, np.subtract(shape, limit_indices), (0,) * len(shape))
    else:
        real_limits = np.add(start_indices, np.where(np.array(ct.shape) == 0, 0,
                             np.add(1, np.multiply(np.subtract(ct.shape, 1), strides))))
        pads = zip(start_indices, np.subtract(shape, real_limits), np.subtract(strides, 1))
    return [pad(ct, _lit_like(ct, 0), list(pads))]


shape_rules[slice_p] = _slice_shape
eval_rules[slice_p] = _slice_eval
jvp_rules[slice_p] = linear_jvp(lambda x, **p: bind(slice_p, x, **p))
transpose_rules[slice_p] = _transpose_slice


def _pad_shape(x, v, *, padding_config):
    p = pad_p
    if v.ndim != 0 or v.dtype != x.dtype:
        raise PrimitiveError(p, f"padding value must be a scalar of dtype {x.dtype}, got {v}")
    if len(padding_config) != x.ndim or any(i < 0 for _, _, i in padding_config):
        raise PrimitiveError(p, f"padding_config {padding_config} must have one (lo, hi, interior>=0) per dim of {x}")
    shape = tuple(lo + hi + (d + (d - 1) * i if d else 0)
                  for (lo, hi, i), d in zip(padding_config, x.shape))
    if any(d < 0 for d in shape):
        raise PrimitiveError(p, f"padding_config {padding_config} gives negative size for {x}")
    return [ArrayType(shape, x.dtype)]


def _pad_eval(x, v, *, padding_config):
    xp = namespace(x, v)
    if xp.name == "sympy":     # both operands exact (a numeric one becomes sympy numbers)
        x, v = xp.compute(x), xp.compute(v)
    out = x
    for axis, (lo, hi, interior) in enumerate(padding_config):
        n = out.shape[axis]
        size = n + max(n - 1, 0) * interior
        shape = list(out.shape)
        shape[axis] = size
        dil = np.full(shape, v, dtype=out.dtype)
        idx = [np.s_[:]] * out.ndim
        idx[axis] = np.s_[::interior + 1]
        dil[tuple(idx)] = out
        # negative lo/hi crop
        before = [(0, 0)] * out.ndim
        before[axis] = (max(lo, 0), max(hi, 0))
        dil = np.pad(dil, before, constant_values=v)
        idx = [np.s_[:]] * out.ndim
        idx[axis] = np.s_[max(-lo, 0): dil.shape[axis] - max(-hi, 0)]
        out = dil[tuple(idx)]
    return out.copy()


def _jvp_pad(primals, tangents, *, padding_config):
    # lax._pad_jvp: pad the operand tangent with the padding value's tangent
    (x, v), (tx, tv) = primals, tangents
    ans = pad(x, v, padding_config)
    return ans, pad(instantiate(tx), instantiate(tv), padding_config)


def _transpose_pad(ct, x, v, *, padding_config):
    # lax._pad_transpose
    if isinstance(ct, Zero):
        return [Zero(x.type) if is_undefined(x) else None, Zero(v.type) if is_undefined(v) else None]
    lo, hi, interior = zip(*padding_config)
    t_op = None
    if is_undefined(x):
        unpadded = pad(ct, _lit_like(ct, 0), list(zip(np.negative(lo), np.negative(hi), (0,) * len(lo))))
        t_op = slice(unpadded, [0] * len(lo), unpadded.shape, list(np.add(interior, 1)))
    t_v = None
    if is_undefined(v):
        total = lambda a: reduce_sum(a, tuple(range(a.ndim)))
        t_v = sub(total(ct), total(t_op)) if t_op is not None else None
        if t_v is None:
            raise PrimitiveError(pad_p, "transpose with respect to the padding value alone is not supported")
    return [t_op, t_v]


shape_rules[pad_p] = _pad_shape
eval_rules[pad_p] = _pad_eval
jvp_rules[pad_p] = _jvp_pad
transpose_rules[pad_p] = _transpose_pad


def _pad_reference(x, v, config):
    """lax.pad in numpy: interior-dilate, then pad (or crop) each edge."""
    x = np.asarray(x)
    for axis, (lo, hi, interior) in enumerate(config):
        n = x.shape[axis]
        idx = np.arange(n) * (interior + 1)
        size = (n - 1) * (interior + 1) + 1 if n else 0
        shape = list(x.shape)
        shape[axis] = size
        out = np.full(shape, v, dtype=x.dtype)
        np.put_along_axis(out, idx.reshape([-1 if a == axis else 1 for a in range(x.ndim)]), x, axis=axis)
        if lo >= 0:
            out = np.concatenate([np.full(shape[:axis] + [lo] + shape[axis + 1:], v, x.dtype), out], axis)
        else:
            out = np.take(out, np.arange(-lo, out.shape[axis]), axis=axis)
        shape = list(out.shape)
        if hi >= 0:
            out = np.concatenate([out, np.full(shape[:axis] + [hi] + shape[axis + 1:], v, x.dtype)], axis)
        else:
            out = np.take(out, np.arange(0, out.shape[axis] + hi), axis=axis)
        x = out
    return x


_PAD_GROW = ((1, 2, 0), (0, 1, 2))
_PAD_CROP = ((-1, 1, 1), (2, -2, 0))       # negative padding crops, after interior dilation
_X34, _S = ((3, 4), "f32", "normal"), ((), "f32", "normal")
examples[concatenate_p] = [
    Example("dim0", (((2, 3), "f32", "normal"), ((4, 3), "f32", "normal")), lambda x, y: concatenate([x, y], 0),
            lambda x, y: np.vstack([x, y]), linear=((True, True),)),
    Example("dim1-three", (((2, 1), "f32", "normal"), ((2, 3), "f32", "normal"), ((2, 2), "f32", "normal")),
            lambda x, y, z: concatenate([x, y, z], 1), lambda x, y, z: np.hstack([x, y, z]),
            linear=((True, True, True),)),
]
examples[slice_p] = [
    Example("slice", (((5, 6), "f32", "normal"),), lambda x: slice(x, (1, 0), (4, 6)), lambda x: x[1:4, 0:6],
            linear=_LINEAR),
    Example("strided", (((5, 6), "f32", "normal"),), lambda x: slice(x, (0, 1), (5, 6), (2, 3)),
            lambda x: x[0:5:2, 1:6:3], linear=_LINEAR),
    Example("strided-unaligned", (((7, 8), "f32", "normal"),), lambda x: slice(x, (1, 2), (6, 7), (2, 2)),
            lambda x: x[1:6:2, 2:7:2], linear=_LINEAR),
]
examples[pad_p] = [
    Example("pad", (_X34, _S), lambda x, v: pad(x, v, _PAD_GROW), lambda x, v: _pad_reference(x, v, _PAD_GROW),
            linear=((True, True),)),
    Example("crop-interior", (_X34, _S), lambda x, v: pad(x, v, _PAD_CROP),
            lambda x, v: _pad_reference(x, v, _PAD_CROP), linear=((True, True),)),
    Example("zero-literal", (_X34,), lambda x: pad(x, np.asarray(0, x.dtype), _PAD_GROW),
            lambda x: _pad_reference(x, 0.0, _PAD_GROW), linear=_LINEAR),
]


# ==========================================================================
# reductions

reduce_sum_p = primitive("reduce_sum", ["axes"])
reduce_max_p = primitive("reduce_max", ["axes"])
# the private reducers: jax.lax.reduce_sum(x, axes) would add a jit
jax_facts[reduce_sum_p] = JaxFacts("reduce_sum", "lambda x, axes: lax_internal.reduce_sum(x, axes)")
jax_facts[reduce_max_p] = JaxFacts("reduce_max", "lambda x, axes: lax_internal.reduce_max(x, axes)")


def reduce_sum(x, axes):
    return bind(reduce_sum_p, x, axes=tuple(int(a) for a in axes))


def reduce_max(x, axes):
    return bind(reduce_max_p, x, axes=tuple(int(a) for a in axes))


def _reduce_shape(prim):
    def rule(x, *, axes):
        axes = _as_tuple(axes, prim, "axes")
        if len(set(axes)) != len(axes) or any(not 0 <= a < x.ndim for a in axes):
            raise PrimitiveError(prim, f"axes {axes} must be distinct dims of {x}")
        if x.dtype == np.bool_:
            raise PrimitiveError(prim, f"operand must be numeric, got {x}")
        return [ArrayType(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)]
    return rule


def _reduce_sum_eval(x, *, axes):
    xp = namespace(x)
    return xp.result(np.sum(xp.compute(x), axis=tuple(axes)), x.dtype)


def _transpose_reduce_sum(ct, x, *, axes):
    # lax._reduce_sum_transpose_rule: broadcast the cotangent back
    if isinstance(ct, Zero):
        return [Zero(x.type)]
    shape = x.type.shape
    return [broadcast_in_dim(ct, shape, tuple(i for i in range(len(shape)) if i not in axes))]


def _jvp_reduce_max(primals, tangents, *, axes):
    # lax._reduce_chooser_jvp_rule: average the tangent over the locations
    # of the maximum (so the location mask and the count are residuals)
    (x,), (t,) = primals, tangents
    ans = reduce_max(x, axes)
    shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
    location_indicators = convert_element_type(eq(x, reshape(ans, shape)), t.dtype)
    counts = reduce_sum(location_indicators, axes)
    return ans, div(reduce_sum(mul(t, location_indicators), axes), counts)


shape_rules[reduce_sum_p] = _reduce_shape(reduce_sum_p)
shape_rules[reduce_max_p] = _reduce_shape(reduce_max_p)
eval_rules[reduce_sum_p] = _reduce_sum_eval
eval_rules[reduce_max_p] = lambda x, *, axes: namespace(x).result(namespace(x).reduce_max(x, tuple(axes)),
                                                                  x.dtype)
jvp_rules[reduce_sum_p] = linear_jvp(lambda x, *, axes: reduce_sum(x, axes))
jvp_rules[reduce_max_p] = _jvp_reduce_max
transpose_rules[reduce_sum_p] = _transpose_reduce_sum

# sums of n terms: the evaluation error is measured against sum|terms| (cond=n)
examples[reduce_sum_p] = [
    Example("axis0", (_X34,), lambda x: reduce_sum(x, (0,)), lambda x: x.sum(0), linear=_LINEAR,
            cond=3, abs_scale=True),
    Example("axes02", (((2, 3, 4), "f32", "normal"),), lambda x: reduce_sum(x, (0, 2)), lambda x: x.sum((0, 2)),
            linear=_LINEAR, cond=8, abs_scale=True),
    Example("all", (_X34,), lambda x: reduce_sum(x, (0, 1)), lambda x: x.sum(), linear=_LINEAR,
            cond=12, abs_scale=True),
]
examples[reduce_max_p] = [
    Example("axis1", (((3, 4), "f32", "distinct"),), lambda x: reduce_max(x, (1,)), lambda x: x.max(1)),
    Example("all", (((3, 4), "f32", "distinct"),), lambda x: reduce_max(x, (0, 1)), lambda x: x.max()),
]


# ==========================================================================
# dot_general

dot_general_p = primitive("dot_general", ["dimension_numbers", "precision", "preferred_element_type"])

# precision: as lax.canonicalize_precision leaves it, in plain data (the spec
# never imports jax): None; a pair of lax.Precision names (lhs, rhs); the name
# of a lax.DotAlgorithmPreset; or a lax.DotAlgorithm as ("DotAlgorithm", lhs
# type, rhs type, accumulation type, lhs components, rhs components, primitive
# operations, allow imprecise accumulation). It is carried as data and changes
# no value the spec computes (which precision a backend honours, and at what
# cost in accuracy, is the tolerance model's business: oracle/tolerances.py).
PRECISIONS = ("DEFAULT", "HIGH", "HIGHEST")
# lax.Precision's string aliases (lax._precision_strings), as canonicalize_precision reads them
_PRECISION_STRINGS = {"highest": "HIGHEST", "float32": "HIGHEST", "high": "HIGH", "bfloat16_3x": "HIGH",
                      "tensorfloat32": "HIGH", "default": "DEFAULT", "bfloat16": "DEFAULT",
                      "fastest": "DEFAULT"}
DOT_ALGORITHM_PRESETS = (
    "DEFAULT", "ANY_F8_ANY_F8_F32", "ANY_F8_ANY_F8_F32_FAST_ACCUM", "ANY_F8_ANY_F8_ANY",
    "ANY_F8_ANY_F8_ANY_FAST_ACCUM", "F16_F16_F16", "F16_F16_F32", "BF16_BF16_BF16", "BF16_BF16_F32",
    "BF16_BF16_F32_X3", "BF16_BF16_F32_X6", "BF16_BF16_F32_X9", "TF32_TF32_F32", "TF32_TF32_F32_X3",
    "F32_F32_F32", "F64_F64_F64")


def canonicalize_precision(precision):
    """lax.canonicalize_precision on the spec's values: a string alias
    ('highest', 'float32', ...) names both operands' lax.Precision, any
    other string a preset; a pair of aliases or Precision names; the
    canonical forms stay as they are."""
    def one(p):
        return p if p in PRECISIONS else _PRECISION_STRINGS.get(p)
    if isinstance(precision, str) and precision in _PRECISION_STRINGS:
        return (_PRECISION_STRINGS[precision],) * 2
    if isinstance(precision, list) or (isinstance(precision, tuple) and len(precision) == 2):
        if len(precision) == 2 and all(isinstance(p, str) and one(p) for p in precision):
            return tuple(map(one, precision))
    return precision        # canonical already, or refused by the shape rule


def check_precision(prim, precision) -> None:
    """PrimitiveError unless `precision` is a canonical precision (see PRECISIONS)."""
    if precision is None or precision in DOT_ALGORITHM_PRESETS:
        return
    if isinstance(precision, tuple) and len(precision) == 2 and all(p in PRECISIONS for p in precision):
        return
    if isinstance(precision, tuple) and len(precision) == 8 and precision[0] == "DotAlgorithm":
        return
    raise PrimitiveError(prim, f"precision={precision!r} is not a precision: None, a pair of "
                               f"{PRECISIONS}, a DotAlgorithmPreset name or a DotAlgorithm tuple")


def precision_from_jax(p):
    """JAX's canonical precision as the spec's (read by attribute, without jax)."""
    kind = type(p).__name__
    if p is None:
        return None
    if kind == "DotAlgorithmPreset":
        return p.name
    if kind == "DotAlgorithm":
        return ("DotAlgorithm", *(np.dtype(t).name for t in p[:3]), *(int(n) for n in p[3:6]), bool(p[6]))
    if isinstance(p, tuple) and len(p) == 2 and all(type(q).__name__ == "Precision" for q in p):
        return (p[0].name, p[1].name)
    return p                # not a precision the spec knows: its shape rule refuses it


# the inverse, as source for emitters (`lax`, `np` in scope)
PRECISION_TO_JAX = ("(lambda p: None if p is None else lax.DotAlgorithmPreset[p] if isinstance(p, str) "
                    "else lax.DotAlgorithm(*map(np.dtype, p[1:4]), *p[4:]) if p[0] == 'DotAlgorithm' "
                    "else (getattr(lax.Precision, p[0]), getattr(lax.Precision, p[1])))")   # no [] before 0.4.3x


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """lax.dot_general. dimension_numbers = ((lhs_contract, rhs_contract),
    (lhs_batch, rhs_batch)); output dims are batch, lhs free, rhs free."""
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    pet = None if preferred_element_type is None else canonical_dtype(preferred_element_type)
    return bind(dot_general_p, lhs, rhs, dimension_numbers=dn, precision=canonicalize_precision(precision),
                preferred_element_type=pet)


def matmul(x, y):
    """x @ y for 1-D or 2-D operands, as a dot_general."""
    return dot_general(x, y, (((x.ndim - 1,), (0 if y.ndim == 1 else y.ndim - 2,)), ((), ())),
                       preferred_element_type=x.dtype)


def _free_dims(ndim, contract, batch):
    return [i for i in range(ndim) if i not in contract and i not in batch]


def _dot_general_shape(x, y, *, dimension_numbers, precision, preferred_element_type):
    p = dot_general_p
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError):
        raise PrimitiveError(p, f"dimension_numbers must be ((lhs_contract, rhs_contract), "
                                f"(lhs_batch, rhs_batch)), got {dimension_numbers!r}") from None
    check_precision(p, precision)
    dtype = _dot_general_dtype(x.dtype, y.dtype, preferred_element_type, precision)
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise PrimitiveError(p, f"unequal numbers of contracting/batch dims in {dimension_numbers}")
    for dims, t in ((tuple(lc) + tuple(lb), x), (tuple(rc) + tuple(rb), y)):
        if len(set(dims)) != len(dims) or any(not 0 <= d < t.ndim for d in dims):
            raise PrimitiveError(p, f"dims {dims} must be distinct dims of {t}")
    for a, b in list(zip(lc, rc)) + list(zip(lb, rb)):
        if x.shape[a] != y.shape[b]:
            raise PrimitiveError(p, f"dim {a} of {x} and dim {b} of {y} must be equal")
    shape = ([x.shape[i] for i in lb] + [x.shape[i] for i in _free_dims(x.ndim, lc, lb)]
             + [y.shape[i] for i in _free_dims(y.ndim, rc, rb)])
    return [ArrayType(shape, dtype)]


def _dot_general_dtype(lhs, rhs, preferred_element_type, precision):
    """lax._dot_general_dtype_rule (lax.py:5781): operands of any two dtypes
    (bool, integers, floats, complex: `jnp.dot(bool_mask, w)`, `int_ids @
    w` and `real @ complex` bind exactly that), the result the "higher" of
    the two by `_type_properties`, two different dtypes of equal properties
    refused; then `_maybe_upcast` (lax.py:5816): a preferred_element_type
    replaces it, but may not be narrower than a non-float (integer or
    complex) result unless the precision is an algorithm."""
    p = dot_general_p
    lhs_prop, rhs_prop = _type_properties(lhs), _type_properties(rhs)
    if lhs_prop == rhs_prop and lhs != rhs:
        raise PrimitiveError(p, f"argument type error: {np.dtype(lhs).name}, {np.dtype(rhs).name}")
    result = np.dtype(lhs if lhs_prop >= rhs_prop else rhs)
    if preferred_element_type is None or canonical_dtype(preferred_element_type) == result:
        return result
    pet = canonical_dtype(preferred_element_type)
    has_algorithm = isinstance(precision, str) or (isinstance(precision, tuple) and precision[0] == "DotAlgorithm")
    if not has_algorithm and not is_real_float(result) and _bit_width(pet) < _bit_width(result):
        raise PrimitiveError(p, f"`preferred_element_type` must not be narrower than the original type, "
                                f"got preferred_element_type of {pet.name} for result type of "
                                f"{np.dtype(result).name}")
    if is_complex(result) and not is_complex(pet):
        # XLA's dot of complex operands into a real type: not modelled
        raise PrimitiveError(p, f"complex operands ({np.dtype(lhs).name}, {np.dtype(rhs).name}) with a real "
                                f"preferred_element_type ({pet.name}) are not modelled")
    return pet


def _type_properties(dt):
    """lax._dot_general_dtype_rule's type_properties (lax.py:5790): whether
    it is complex, then of its real part: (max exponent, mantissa bits) of
    a float, (-1, -1) otherwise, the bit width (bool: 1) and whether it is
    signed. So a complex operand makes the result complex."""
    dt = np.dtype(dt)
    part = real_dtype(dt) if is_complex(dt) else dt
    fi = ml_dtypes.finfo(part) if is_float(part) else None
    return (is_complex(dt), fi.maxexp if fi else -1, fi.nmant if fi else -1, _bit_width(part),
            not np.issubdtype(part, np.unsignedinteger))


def _bit_width(dt) -> int:
    """lax._bit_width: bits of a number type (of a complex one, its real
    part's: `finfo(d).bits`), 1 for bool."""
    dt = np.dtype(dt)
    if is_complex(dt):
        dt = real_dtype(dt)
    return 1 if dt == np.bool_ else dt.itemsize * 8


def _dot_general_eval(x, y, *, dimension_numbers, precision, preferred_element_type):
    """Batch dims first, then lhs free, then rhs free: transpose both
    operands to (batch, free, contract) and use a batched matmul (which
    numpy also does for arrays of sympy expressions)."""
    (lc, rc), (lb, rb) = dimension_numbers
    lf, rf = _free_dims(x.ndim, lc, lb), _free_dims(y.ndim, rc, rb)
    size = lambda t, dims: int(np.prod([t.shape[d] for d in dims], dtype=np.int64))
    out_shape = ([x.shape[i] for i in lb] + [x.shape[i] for i in lf] + [y.shape[i] for i in rf])
    xp = namespace(x, y)
    if xp.name == "sympy":
        c = out_dtype = object
    else:
        out_dtype = _dot_general_dtype(x.dtype, y.dtype, preferred_element_type, precision)
        c = out_dtype if is_complex(out_dtype) else np.float64 if np.float64 in (x.dtype, y.dtype, out_dtype) else (
            np.float32 if is_float(x.dtype) or is_float(y.dtype) or is_float(out_dtype) else np.int64)
    if xp.name == "sympy":
        x, y = xp.compute(x), xp.compute(y)
    xm = np.transpose(x, list(lb) + lf + list(lc)).astype(c).reshape(size(x, lb), size(x, lf), size(x, lc))
    ym = np.transpose(y, list(rb) + list(rc) + rf).astype(c).reshape(size(y, rb), size(y, rc), size(y, rf))
    res = np.matmul(xm, ym).reshape(out_shape)
    return xp.result(res, out_dtype)


def _jvp_dot_general(primals, tangents, **params):
    # ad.defbilinear: dot(t_x, y) + dot(x, t_y)
    (x, y), (tx, ty) = primals, tangents
    ans = bind(dot_general_p, x, y, **params)
    terms = [None if isinstance(tx, Zero) else bind(dot_general_p, tx, y, **params),
             None if isinstance(ty, Zero) else bind(dot_general_p, x, ty, **params)]
    return ans, add_tangents(terms)


def _ranges_like(*xs):
    start = 0
    for x in xs:
        yield tuple(range(start, start + len(x)))
        start += len(x)


def _dot_transpose_lhs(ct, x_type, y, *, dimension_numbers, precision,
                       preferred_element_type, swap_ans=False):
    # lax._dot_general_transpose_lhs
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    y_ndim = y.type.ndim if is_undefined(y) else y.ndim
    x_kept = _free_dims(x_type.ndim, x_contract, x_batch)
    y_kept = _free_dims(y_ndim, y_contract, y_batch)
    if swap_ans:
        ans_batch, ans_y, _ = _ranges_like(x_batch, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
    dims = ((ans_y, tuple(y_kept)), (ans_batch, tuple(y_batch)))
    x_contract_sorted_by_y = list(np.take(x_contract, np.argsort(y_contract))) if x_contract else []
    unsorted_axes = list(x_batch) + x_kept + [int(a) for a in x_contract_sorted_by_y]
    out_axes = tuple(int(a) for a in np.argsort(unsorted_axes))
    out = dot_general(ct, y, dims, precision=precision, preferred_element_type=preferred_element_type)
    x_bar = transpose(out, out_axes)
    if x_bar.dtype != x_type.dtype:
        x_bar = convert_element_type(x_bar, x_type.dtype)
    return x_bar


def _transpose_dot_general(ct, x, y, *, dimension_numbers, precision, preferred_element_type):
    if is_undefined(x) and is_undefined(y):
        raise PrimitiveError(dot_general_p, "transpose of a product of two linear values (not linear)")
    if is_undefined(x):
        if isinstance(ct, Zero):
            return [Zero(x.type), None]
        return [_dot_transpose_lhs(ct, x.type, y, dimension_numbers=dimension_numbers,
                                   precision=precision, preferred_element_type=preferred_element_type), None]
    if isinstance(ct, Zero):
        return [None, Zero(y.type)]
    # lax._dot_general_transpose_rhs: the lhs rule with the operands swapped
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    swapped = ((y_contract, x_contract), (y_batch, x_batch))
    return [None, _dot_transpose_lhs(ct, y.type, x, dimension_numbers=swapped, precision=precision,
                                     preferred_element_type=preferred_element_type, swap_ans=True)]


shape_rules[dot_general_p] = _dot_general_shape
eval_rules[dot_general_p] = _dot_general_eval
jvp_rules[dot_general_p] = _jvp_dot_general
transpose_rules[dot_general_p] = _transpose_dot_general


def _dot_general_from_jax(params: dict) -> dict:
    """JAX's params: the dimension numbers as tuples, the precision as plain
    data (`precision_from_jax`)."""
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    return {**params, "dimension_numbers": ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))),
            "precision": precision_from_jax(params.get("precision"))}


jax_facts[dot_general_p] = JaxFacts(
    "dot_general", "lambda x, y, dimension_numbers, precision, preferred_element_type: lax.dot_general("
    f"x, y, dimension_numbers, precision={PRECISION_TO_JAX}(precision), "
    "preferred_element_type=preferred_element_type)", from_jax=_dot_general_from_jax)


def _dot_example(name, operands, dimension_numbers, reference, preferred_element_type=None, **kw):
    return Example(name, operands, lambda x, y: dot_general(x, y, dimension_numbers,
                                                            preferred_element_type=preferred_element_type),
                   reference, **kw)


_MATMUL = (((1,), (0,)), ((), ()))


def _float_by_complex(x, a, b):
    """x @ (a + ib) as jnp binds it, returned as its real and imaginary parts."""
    from spec.prims_complex import complex as complex_, imag, real  # a cycle: its batchers use this module
    c = complex_(a, b)
    y = dot_general(x, c, _MATMUL, preferred_element_type=c.dtype)
    return real(y), imag(y)


_BATCH_0 = (((2,), (1,)), ((0,), (0,)))              # [2,3,4] . [2,4,5] -> [2,3,5]
_BATCH_MID = (((2,), (0,)), ((1,), (1,)))            # [3,2,4] . [4,2,5] -> [2,3,5]
_CONTRACT_2 = (((1, 2), (1, 0)), ((), ()))           # [3,4,2] . [2,4,5] -> [3,5]
_EITHER = ((True, False), (False, True))
_N = lambda *shape: (shape, "f32", "normal")        # noqa: E731
_I = lambda *shape: (shape, "i32", "ints")          # noqa: E731
# cond = the number of summed terms; the error is measured against sum|terms|
examples[dot_general_p] = [
    _dot_example("matmul", (_N(3, 4), _N(4, 5)), _MATMUL, lambda x, y: x @ y,
                 linear=_EITHER, cond=4, abs_scale=True),
    _dot_example("vector", (_N(6), _N(6)), (((0,), (0,)), ((), ())), lambda x, y: np.sum(x * y),
                 linear=_EITHER, cond=6, abs_scale=True),
    _dot_example("batch", (_N(2, 3, 4), _N(2, 4, 5)), _BATCH_0, lambda x, y: np.einsum("bij,bjk->bik", x, y),
                 linear=_EITHER, cond=4, abs_scale=True),
    _dot_example("batch-middle", (_N(3, 2, 4), _N(4, 2, 5)), _BATCH_MID,
                 lambda x, y: np.einsum("ibj,jbk->bik", x, y), linear=_EITHER, cond=4, abs_scale=True),
    _dot_example("contract-2-dims", (_N(3, 4, 2), _N(2, 4, 5)), _CONTRACT_2,
                 lambda x, y: np.einsum("ijk,kjl->il", x, y), linear=_EITHER, cond=8, abs_scale=True),
    _dot_example("preferred-f64", (_N(3, 4), _N(4, 5)), _MATMUL, lambda x, y: x @ y, np.float64,
                 kept=(0, 1), linear=_EITHER, cond=4, abs_scale=True),
    _dot_example("i32-preferred-f32", (_I(3, 4), _I(4, 2)), _MATMUL, lambda x, y: (x @ y).astype(np.float64),
                 np.float32),
    # mixed operand dtypes, as jnp.dot(bool_mask, w) and int_ids @ w bind them (lax._dot_general_dtype_rule)
    _dot_example("bool-by-float", (((3, 4), "bool", "bools"), _N(4, 5)), _MATMUL,
                 lambda x, y: x.astype(np.float64) @ y, np.float32, linear=((False, True),), cond=4, abs_scale=True),
    _dot_example("float-by-i32", (_N(2, 3, 4), _I(2, 4, 5)), _BATCH_0,
                 lambda x, y: np.einsum("bij,bjk->bik", x, y.astype(np.float64)), linear=((True, False),),
                 cond=4, abs_scale=True),
    # a real operand by a complex one, as `x @ (a + 1j * b)` binds it (the
    # complex flag ranks first in lax._dot_general_dtype_rule); the real
    # operand's cotangent is the real part of its transpose's complex result
    Example("float-by-complex", (_N(3, 4), _N(4, 5), _N(4, 5)), _float_by_complex,
            lambda x, a, b: (x @ a, x @ b), linear=((True, False, False), (False, True, True)), cond=4,
            abs_scale=True),
]


def _dot_general_cost(x, y, *, dimension_numbers, **_):
    """2 * (batch) * (lhs free) * (rhs free) * (contracted): one multiply-add per term."""
    (lc, rc), (lb, rb) = dimension_numbers
    size = lambda t, dims: int(np.prod([t.shape[d] for d in dims], dtype=np.int64))
    return 2 * size(x, lb) * size(x, _free_dims(x.ndim, lc, lb)) * size(y, _free_dims(y.ndim, rc, rb)) * size(x, lc)


cost_rules[dot_general_p] = _dot_general_cost
for _p in (broadcast_in_dim_p, reshape_p, transpose_p, squeeze_p, concatenate_p, slice_p, pad_p):
    cost_rules[_p] = lambda *in_types, **params: 0      # data movement only
cost_rules[reduce_sum_p] = cost_rules[reduce_max_p] = lambda x, **_: x.size


# ==========================================================================
# batching rules (each mirrors jax 0.10.2's `_..._batch_rule`)

def _batch_broadcast_in_dim(args, dims, *, shape, broadcast_dimensions):
    """Move the batch axis to the front and broadcast it through as output dim 0."""
    (x,), (d,) = args, dims
    x = moveaxis(x, d, 0)
    return broadcast_in_dim(x, (x.shape[0],) + tuple(shape),
                            (0,) + tuple(np.add(1, broadcast_dimensions))), 0


def _batch_reshape(args, dims, *, new_sizes, dimensions):
    """Move the batch axis to the front and reshape the rest (output dim 0),
    the batch axis first in `dimensions`."""
    (x,), (d,) = args, dims
    x = moveaxis(x, d, 0)
    dimensions = None if dimensions is None else (0,) + tuple(int(i) + 1 for i in dimensions)
    return reshape(x, (x.shape[0],) + tuple(new_sizes), dimensions), 0


def _batch_transpose(args, dims, *, permutation):
    """Put the batch axis first in the permutation (output dim 0)."""
    (x,), (d,) = args, dims
    perm = (d,) + tuple(i if i < d else i + 1 for i in permutation)
    return transpose(x, perm), 0


def _batch_squeeze(args, dims, *, dimensions):
    """Move the batch axis to the front and squeeze the shifted dims (output dim 0)."""
    (x,), (d,) = args, dims
    return squeeze(moveaxis(x, d, 0), tuple(np.add(1, dimensions))), 0


def _batch_concatenate(args, dims, *, dimension):
    """Batch axes to the front (unbatched operands broadcast), concatenate along dimension + 1."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    return concatenate([bdim_at_front(a, d, size) for a, d in zip(args, dims)], dimension + 1), 0


def _batch_slice(args, dims, *, start_indices, limit_indices, strides):
    """Take the whole batch axis: a full slice inserted at its position."""
    (x,), (d,) = args, dims
    lo, hi = list(start_indices), list(limit_indices)
    lo.insert(d, 0)
    hi.insert(d, x.shape[d])
    st = None if strides is None else list(strides[:d]) + [1] + list(strides[d:])
    return slice(x, lo, hi, st), d


def _batch_pad(args, dims, *, padding_config):
    """No padding along the batch axis; a batched padding value is selected in with a mask."""
    (x, v), (dx, dv) = args, dims
    if dx is None:
        x, dx = broadcast(x, v.shape[dv]), 0
    config = list(padding_config)
    config.insert(dx, (0, 0, 0))
    if dv is None:
        return pad(x, v, config), dx
    # a batched padding value: pad with zeros, then select the padding in
    padded = pad(x, _lit_like(x, 0), config)
    mask = pad(bind(broadcast_in_dim_p, np.asarray(True), shape=tuple(x.shape), broadcast_dimensions=()),
               np.asarray(False), config)
    padding = broadcast_in_dim(v, padded.shape, (dx,))
    return select_n(mask, padding, padded), dx


def _reducer_batcher(fn):
    """batching.reducer_batcher: shift the reduced axes past the batch axis."""
    def rule(args, dims, *, axes):
        (x,), (d,) = args, dims
        axes = tuple(int(a) for a in np.where(np.less(axes, d), axes, np.add(axes, 1)))
        out_dim = [i for i in range(x.ndim) if i not in axes].index(d)
        return fn(x, axes), out_dim
    return rule


def _batch_dot_general(args, dims, *, dimension_numbers, precision, preferred_element_type):
    """lax._dot_batch_rule with _dot_general_batch_dim_nums: two batched
    operands get a new leading dot batch dim; one batched operand keeps its
    batch axis as a free dim."""
    (x, y), (lbd, rbd) = args, dims
    (lc, rc), (lb, rb) = dimension_numbers
    bump = lambda ds, b: tuple(int(i) for i in np.add(ds, np.greater_equal(ds, b)))
    if lbd is not None and rbd is not None:
        lb, rb = (lbd,) + bump(lb, lbd), (rbd,) + bump(rb, rbd)
        lc, rc = bump(lc, lbd), bump(rc, rbd)
        out_dim = 0
    elif lbd is not None:
        lhs_tensor = [i for i in range(x.ndim) if i not in lb and i not in lc]
        out_dim = len(lb) + int(sum(np.less(lhs_tensor, lbd)))
        lb, lc = bump(lb, lbd), bump(lc, lbd)
    else:
        rhs_tensor = [i for i in range(y.ndim) if i not in rb and i not in rc]
        out_dim = (x.ndim - len(lc)) + int(sum(np.less(rhs_tensor, rbd)))
        rb, rc = bump(rb, rbd), bump(rc, rbd)
    out = dot_general(x, y, ((lc, rc), (lb, rb)), precision=precision,
                      preferred_element_type=preferred_element_type)
    return out, out_dim


def _register_batch_rules():
    batch_rules.update({
        broadcast_in_dim_p: _batch_broadcast_in_dim, reshape_p: _batch_reshape,
        transpose_p: _batch_transpose, squeeze_p: _batch_squeeze,
        concatenate_p: _batch_concatenate, slice_p: _batch_slice, pad_p: _batch_pad,
        reduce_sum_p: _reducer_batcher(reduce_sum), reduce_max_p: _reducer_batcher(reduce_max),
        dot_general_p: _batch_dot_general,
    })


_register_batch_rules()


# data movement, sums and products hold for complex values as JAX's rules do
# (the transposes do not conjugate; dot_general's converts a complex
# cotangent of a real operand to its real part)
complex_rules.update({broadcast_in_dim_p, reshape_p, transpose_p, squeeze_p, concatenate_p, slice_p, pad_p, split_p,
                      reduce_sum_p, dot_general_p})
