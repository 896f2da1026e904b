"""Convolution, pooling and identity-like primitives (jax 0.10.2:
jax/_src/lax/convolution.py, windowed_reductions.py, lax.py, pjit.py).

* `conv_general_dilated` in full generality: strides, explicit padding
  (string padding is resolved by the op, as lax does), lhs and rhs
  dilation, dimension numbers, feature and batch groups, precision and
  preferred_element_type. Bilinear: its JVP convolves each tangent with
  the other primal (so a backward pass saves both operands) and its two
  transpose rules are JAX's (a convolution of the cotangent with the
  reversed kernel, with the forward strides as lhs dilation; and one of
  the input with the cotangent, feature groups becoming batch groups).
* pooling: `reduce_window_sum` (linear: transposed to pad +
  reduce_window_sum), `reduce_window_max` / `reduce_window_min` (JVP:
  `select_and_gather_add`, the tangent at each window's chosen element),
  and `select_and_gather_add` / `select_and_scatter_add`, which transpose
  into each other. `lax.reduce_window(x, -inf, lax.max, ...)` and
  `lax.reduce_window(x, 0., lax.add, ...)` (flax's max_pool / avg_pool)
  bind these monoid primitives; the generic `reduce_window` (a reduction
  jaxpr as param, bound for other computations or traced init values) is
  not modelled.
* identity-like: `optimization_barrier` (several results), `reduce_precision`
  (rounds to a float format exactly as XLA does), `copy`,
  `sharding_constraint` (shardings as plain data).

Each primitive is one block, as in spec/prims_special.py.

    >>> import spec
    >>> prog = spec.trace(lambda x, w: conv_general_dilated(x, w, (1, 1), "SAME"),
    ...                   spec.f32[1, 2, 4, 4], spec.f32[3, 2, 3, 3])
    >>> [str(r) for r in spec.saved_residuals(prog)]    # bilinear: each operand for the other's cotangent
    ['f32[1,2,4,4] from the argument x', 'f32[3,2,3,3] from the argument w']
"""
from __future__ import annotations

import builtins
import itertools

import ml_dtypes
import numpy as np

from spec.arrays import namespace
from spec.batching import bdim_at_front, vectorized_batcher
from spec.core import (Example, JaxFacts, PrimitiveError, Zero, batch_rules, bind, cost_rules,
                       eval_rules, examples, instantiate, is_undefined, jax_facts, jvp_rules,
                       primitive, shape_rules, transpose_rules)
from spec.ir import ArrayType, canonical_dtype, is_float
from spec.prims_elementwise import _lit_like, add_tangents, convert_element_type
from spec.prims_structural import (PRECISION_TO_JAX, _linear_jvp, _pad_eval, broadcast_in_dim,
                                   canonicalize_precision, check_precision, pad, precision_from_jax,
                                   reshape, transpose)
from spec.prims_structural import slice as slice_op

_slice = builtins.slice


# ==========================================================================
# window geometry (lax._dilate_shape, core.stride_dim, lax.padtype_to_pads)

def _ints(prim, name, value, n=None, least=1) -> tuple:
    """A tuple of ints >= `least` (with `n` entries if given), or PrimitiveError."""
    try:
        out = tuple(int(i) for i in value)
    except (TypeError, ValueError):
        raise PrimitiveError(prim, f"{name} must be a sequence of ints, got {value!r}") from None
    if (n is not None and len(out) != n) or any(i < least for i in out):
        raise PrimitiveError(prim, f"{name} must be {n if n is not None else 'a sequence of'} "
                                   f"ints >= {least}, got {value!r}")
    return out


def _pairs(prim, name, value, n) -> tuple:
    try:
        out = tuple((int(lo), int(hi)) for lo, hi in value)
    except (TypeError, ValueError):
        raise PrimitiveError(prim, f"{name} must be a sequence of (low, high) int pairs, got {value!r}") from None
    if len(out) != n:
        raise PrimitiveError(prim, f"{name} must have {n} (low, high) pairs, got {value!r}")
    return out


def dilate_dim(d: int, dilation: int) -> int:
    """core.dilate_dim: max(0, 1 + dilation * (d - 1))."""
    return max(0, 1 + dilation * (d - 1))


def stride_dim(d: int, window: int, stride: int) -> int:
    """core.stride_dim: the number of windows, max(0, (d - window) // stride + 1)."""
    return max(0, (d - window) // stride + 1)


def padtype_to_pads(in_shape, window_shape, window_strides, padding: str) -> tuple:
    """lax.padtype_to_pads: 'SAME' (extra padding at the end), 'SAME_LOWER'
    (at the start) or 'VALID' as (low, high) pairs."""
    kind = padding.upper()
    if kind == "VALID":
        return ((0, 0),) * len(in_shape)
    if kind not in ("SAME", "SAME_LOWER"):
        raise ValueError(f"Unrecognized padding type: expected 'VALID', 'SAME', or 'SAME_LOWER', got {padding}.")
    pads = []
    for d, w, s in zip(in_shape, window_shape, window_strides):
        total = max(0, (-(-d // s) - 1) * s + w - d)
        lo = total // 2 if kind == "SAME" else total - total // 2
        pads.append((lo, total - lo))
    return tuple(pads)


def vjp_lhs_padding(in_shape, window_dimensions, window_strides, out_shape, padding,
                    lhs_dilation, rhs_dilation) -> tuple:
    """convolution._conv_general_vjp_lhs_padding."""
    lhs_dilated = [dilate_dim(d, r) for d, r in zip(in_shape, lhs_dilation)]
    rhs_dilated = [dilate_dim(d, r) for d, r in zip(window_dimensions, rhs_dilation)]
    out_dilated = [dilate_dim(d, r) for d, r in zip(out_shape, window_strides)]
    before = [r - lo - 1 for r, (lo, _) in zip(rhs_dilated, padding)]
    after = [ld + r - 1 - o - b for ld, r, o, b in zip(lhs_dilated, rhs_dilated, out_dilated, before)]
    return tuple(zip(before, after))


def vjp_rhs_padding(in_shape, window_dimensions, window_strides, out_shape, padding,
                    lhs_dilation, rhs_dilation) -> tuple:
    """convolution._conv_general_vjp_rhs_padding."""
    if len(in_shape) == 0:
        return ()
    lhs_dilated = [dilate_dim(d, r) for d, r in zip(in_shape, lhs_dilation)]
    rhs_dilated = [dilate_dim(d, r) for d, r in zip(window_dimensions, rhs_dilation)]
    out_dilated = [dilate_dim(d, r) for d, r in zip(out_shape, window_strides)]
    lows = [lo for lo, _ in padding]
    highs = [o - ld + r - lo - 1 for o, ld, r, lo in zip(out_dilated, lhs_dilated, rhs_dilated, lows)]
    return tuple(zip(lows, highs))


def _dilate_pad(x, axes, dilation, padding, value):
    """x with dilation - 1 holes between elements and (low, high) padding
    (negative: cropping) along `axes`; holes and padding hold `value`."""
    config = [(0, 0, 0)] * np.ndim(x)
    for a, d, (lo, hi) in zip(axes, dilation, padding):
        config[a] = (lo, hi, d - 1)
    fill = value if np.asarray(x).dtype == object else np.asarray(value, np.asarray(x).dtype)
    return _pad_eval(np.asarray(x), fill, padding_config=config)


def _windows(x, axes, window_dimensions, window_strides, window_dilation, out_sizes):
    """(window offset, the strided view of x that the offset reads for every
    output position: out_sizes along `axes`), one per offset."""
    for offset in np.ndindex(*window_dimensions):
        index = [_slice(None)] * x.ndim
        for a, k, s, r, n in zip(axes, offset, window_strides, window_dilation, out_sizes):
            index[a] = _slice(k * r, k * r + s * (n - 1) + 1, s) if n else _slice(0, 0)
        yield offset, x[tuple(index)]


def _compute_dtype(*dtypes):
    """The accumulation type of a convolution (XLA:CPU: f16/bf16 in f32)."""
    if np.float64 in dtypes:
        return np.float64
    return np.float32 if any(is_float(d) for d in dtypes) else np.int64


# ==========================================================================
# conv_general_dilated

# JAX's ConvDimensionNumbers is kept field by field (lhs_spec, rhs_spec,
# out_spec), as spec/prims_indexing.py keeps gather's: the oracle's param
# import reads any `dimension_numbers` param as dot_general's pair of pairs
conv_general_dilated_p = primitive("conv_general_dilated", [
    "window_strides", "padding", "lhs_dilation", "rhs_dilation", "lhs_spec", "rhs_spec", "out_spec",
    "feature_group_count", "batch_group_count", "precision", "preferred_element_type"])


def conv_dimension_numbers(ndim: int, dimension_numbers) -> tuple:
    """convolution.conv_dimension_numbers as plain tuples (lhs_spec, rhs_spec,
    out_spec): None is ('NCHW', 'OIHW', 'NCHW'); three strings such as
    ('NHWC', 'HWIO', 'NHWC') are read as lax reads them (spatial dims in
    the rhs string's order); three int sequences are taken as they are."""
    if dimension_numbers is None:
        return (tuple(range(ndim)),) * 3
    if len(dimension_numbers) == 3 and all(isinstance(s, str) for s in dimension_numbers):
        return _conv_general_permutations(dimension_numbers)
    return tuple(tuple(int(i) for i in spec) for spec in dimension_numbers)


def _conv_general_permutations(strings) -> tuple:
    """convolution.conv_general_permutations."""
    lhs, rhs, out = strings
    pairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for s, (a, b) in zip(strings, pairs):
        if s.count(a) != 1 or s.count(b) != 1 or len(set(s)) != len(s):
            raise PrimitiveError(conv_general_dilated_p, f"dimension_numbers {strings}: {s!r} must hold "
                                                         f"{a!r} and {b!r} once and no character twice")
    if not set(lhs) - {"N", "C"} == set(rhs) - {"O", "I"} == set(out) - {"N", "C"}:
        raise PrimitiveError(conv_general_dilated_p, f"dimension_numbers {strings} must each have the "
                                                     f"same spatial characters")

    def perm(i, s, pair):
        spatial = [j for j, c in enumerate(s) if c not in pair]
        if i != 1:
            spatial.sort(key=lambda j: rhs.index(s[j]))
        return (s.index(pair[0]), s.index(pair[1])) + tuple(spatial)
    return tuple(perm(i, s, pair) for i, (s, pair) in enumerate(zip(strings, pairs)))


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count=1, batch_group_count=1,
                         precision=None, preferred_element_type=None):
    """lax.conv_general_dilated: padding is 'SAME', 'SAME_LOWER', 'VALID' or
    (low, high) pairs; dimension_numbers as `conv_dimension_numbers` reads it."""
    p = conv_general_dilated_p
    dnums = conv_dimension_numbers(len(lhs.shape), dimension_numbers)
    n = len(lhs.shape) - 2
    lhs_dilation = (1,) * n if lhs_dilation is None else tuple(lhs_dilation)
    rhs_dilation = (1,) * n if rhs_dilation is None else tuple(rhs_dilation)
    if isinstance(padding, str):
        if any(d != 1 for d in lhs_dilation):
            raise PrimitiveError(p, "String padding is not implemented for transposed convolution using "
                                    "this op. Please either exactly specify the required padding or use "
                                    "conv_transpose.")
        window = [dilate_dim(rhs.shape[i], r) for i, r in zip(dnums[1][2:], rhs_dilation)]
        padding = padtype_to_pads([lhs.shape[i] for i in dnums[0][2:]], window, window_strides, padding)
    pet = None if preferred_element_type is None else canonical_dtype(preferred_element_type)
    return bind(p, lhs, rhs, window_strides=tuple(int(s) for s in window_strides),
                padding=tuple((int(lo), int(hi)) for lo, hi in padding),
                lhs_dilation=tuple(int(d) for d in lhs_dilation), rhs_dilation=tuple(int(d) for d in rhs_dilation),
                lhs_spec=dnums[0], rhs_spec=dnums[1], out_spec=dnums[2],
                feature_group_count=int(feature_group_count),
                batch_group_count=int(batch_group_count), precision=canonicalize_precision(precision),
                preferred_element_type=pet)


def _conv_specs(lhs, rhs, dimension_numbers):
    """(lhs_spec, rhs_spec, out_spec), each checked to be a permutation of the dims."""
    p = conv_general_dilated_p
    if lhs.ndim != rhs.ndim or lhs.ndim < 2:
        raise PrimitiveError(p, f"lhs and rhs must have the same number (>= 2) of dimensions, got {lhs} and {rhs}")
    try:
        specs = tuple(tuple(int(i) for i in s) for s in dimension_numbers)
    except (TypeError, ValueError):
        specs = ()
    if len(specs) != 3 or any(sorted(s) != list(range(lhs.ndim)) for s in specs):
        raise PrimitiveError(p, f"dimension_numbers must be (lhs_spec, rhs_spec, out_spec), each a "
                                f"permutation of the {lhs.ndim} dims, got {dimension_numbers!r}")
    return specs


def _conv_check_groups(lhs, rhs, specs, feature_group_count, batch_group_count):
    """_conv_general_dilated_shape_rule's group checks, with its messages."""
    p = conv_general_dilated_p
    (lhs_spec, rhs_spec, _), G, B = specs, feature_group_count, batch_group_count
    if not (isinstance(G, int) and isinstance(B, int) and G > 0 and B > 0):
        raise PrimitiveError(p, f"feature_group_count and batch_group_count must be positive ints, got {G}, {B}")
    C, N = lhs.shape[lhs_spec[1]], lhs.shape[lhs_spec[0]]
    O, I = rhs.shape[rhs_spec[0]], rhs.shape[rhs_spec[1]]
    if C % G or C // G != I:
        raise PrimitiveError(p, f"lhs feature dimension size divided by feature_group_count must equal the "
                                f"rhs input feature dimension size, but {C} // {G} != {I}")
    if O % G or O % B:
        raise PrimitiveError(p, f"rhs output feature dimension size {O} must be a multiple of "
                                f"feature_group_count {G} and batch_group_count {B}")
    if B > 1 and N % B:
        raise PrimitiveError(p, f"batch_group_count must divide lhs batch dimension size, but {B} does not divide {N}")
    if B > 1 and G > 1:
        raise PrimitiveError(p, f"At most one of batch_group_count and feature_group_count may be > 1, "
                                f"got batch_group_count={B} and feature_group_count={G}")


def _check_preferred(prim, dtype, preferred):
    """lax._validate_preferred_element_type: int -> float is allowed, otherwise
    the same kind (and signedness), never narrower."""
    if preferred is None:
        return
    preferred = canonical_dtype(preferred)
    if is_float(dtype) and not is_float(preferred):
        raise PrimitiveError(prim, f"Input type is incompatible with `preferred_element_type`: {dtype}, {preferred}")
    if np.dtype(preferred).itemsize < np.dtype(dtype).itemsize:
        raise PrimitiveError(prim, f"`preferred_element_type` must not be narrower than the original type: "
                                   f"{dtype}, {preferred}")


def _conv_shape(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, lhs_spec, rhs_spec,
                out_spec, feature_group_count, batch_group_count, precision, preferred_element_type):
    """_conv_general_dilated_shape_rule and its dtype rule: the output's
    spatial sizes are the windows of the dilated, padded lhs that fit the
    dilated kernel, at the strides."""
    p = conv_general_dilated_p
    specs = _conv_specs(lhs, rhs, (lhs_spec, rhs_spec, out_spec))
    n = lhs.ndim - 2
    strides = _ints(p, "window_strides", window_strides, n)
    pads = _pairs(p, "padding", padding, n)
    ld = _ints(p, "lhs_dilation", lhs_dilation, n)
    rd = _ints(p, "rhs_dilation", rhs_dilation, n)
    _conv_check_groups(lhs, rhs, specs, feature_group_count, batch_group_count)
    if lhs.dtype != rhs.dtype or lhs.dtype == np.bool_:
        raise PrimitiveError(p, f"operands must have one numeric dtype, got {lhs} and {rhs}")
    _check_preferred(p, lhs.dtype, preferred_element_type)
    check_precision(p, precision)
    lhs_spec, rhs_spec, out_spec = specs
    padded = [dilate_dim(lhs.shape[i], d) + lo + hi for i, d, (lo, hi) in zip(lhs_spec[2:], ld, pads)]
    if any(s < 0 for s in padded):
        raise PrimitiveError(p, f"Negative padding is larger than the size of the corresponding dimension: "
                                f"got padding={pads} for {lhs}")
    window = [dilate_dim(rhs.shape[i], r) for i, r in zip(rhs_spec[2:], rd)]
    canonical = ((lhs.shape[lhs_spec[0]] // batch_group_count, rhs.shape[rhs_spec[0]])
                 + tuple(stride_dim(s, w, st) for s, w, st in zip(padded, window, strides)))
    dtype = lhs.dtype if preferred_element_type is None else canonical_dtype(preferred_element_type)
    return [ArrayType(tuple(canonical[i] for i in np.argsort(out_spec)), dtype)]


def _conv_eval(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, lhs_spec, rhs_spec,
               out_spec, feature_group_count, batch_group_count, precision, preferred_element_type):
    """In the canonical layouts (N, C, spatial) and (O, I, window): dilate and
    pad the input, then for each kernel offset contract the strided view
    it reads with that kernel tap, group by group."""
    xp = namespace(lhs, rhs)
    out_dtype = lhs.dtype if preferred_element_type is None else canonical_dtype(preferred_element_type)
    c = object if xp.name == "sympy" else _compute_dtype(lhs.dtype, out_dtype)
    x = np.transpose(xp.compute(lhs), lhs_spec).astype(c)
    w = np.transpose(xp.compute(rhs), rhs_spec).astype(c)
    axes = range(2, x.ndim)
    x = _dilate_pad(x, axes, lhs_dilation, padding, 0)
    out_sizes = [stride_dim(x.shape[a], dilate_dim(k, r), s)
                 for a, k, r, s in zip(axes, w.shape[2:], rhs_dilation, window_strides)]
    (N, C), (O, I), G, B = x.shape[:2], w.shape[:2], feature_group_count, batch_group_count
    acc = np.zeros((N // B, O, *out_sizes), c)
    for offset, view in _windows(x, axes, w.shape[2:], window_strides, rhs_dilation, out_sizes):
        tap = w[(_slice(None), _slice(None)) + offset]
        if B > 1:      # batch groups: output feature group b reads input batch group b
            t = np.einsum("bnc...,boc->nbo...", view.reshape(B, N // B, C, *out_sizes), tap.reshape(B, O // B, I))
        else:          # feature groups: output feature group g reads input feature group g
            t = np.einsum("ngi...,goi->ngo...", view.reshape(N, G, I, *out_sizes), tap.reshape(G, O // G, I))
        acc = acc + t.reshape(acc.shape)
    return xp.result(np.transpose(acc, np.argsort(out_spec)), out_dtype)


def _conv_jvp(primals, tangents, **params):
    """ad.defbilinear: d conv(lhs, rhs) = conv(d lhs, rhs) + conv(lhs, d rhs),
    each term bound with the primitive's own params (standard_jvp)."""
    (lhs, rhs), (tl, tr) = primals, tangents
    ans = bind(conv_general_dilated_p, lhs, rhs, **params)
    terms = [None if isinstance(tl, Zero) else bind(conv_general_dilated_p, tl, rhs, **params),
             None if isinstance(tr, Zero) else bind(conv_general_dilated_p, lhs, tr, **params)]
    return ans, add_tangents(terms)


def _spec_transpose(spec):
    """convolution._conv_spec_transpose: swap the batch/feature entries."""
    return (spec[1], spec[0]) + tuple(spec[2:])


def _reshape_axis_into(src, dst, x):
    """convolution._reshape_axis_into: `lax.reshape(x, new_shape, perm)`, a
    reshape with `dimensions=perm`, here as the transpose it performs
    followed by a plain reshape (the spec's reshape takes dimensions=None)."""
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    new_shape = [d for i, d in enumerate(x.shape) if i != src]
    new_shape[dst] *= x.shape[src]
    return reshape(transpose(x, perm), new_shape)


def _reshape_axis_out_of(src, size1, x):
    """convolution._reshape_axis_out_of: split dim src into (size1, rest)."""
    shape = list(x.shape)
    shape[src:src + 1] = [size1, shape[src] // size1]
    return reshape(x, shape)


def _take(shape, dims):
    return tuple(shape[d] for d in dims)


def _conv_transpose_lhs(g, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        lhs_spec, rhs_spec, out_spec, feature_group_count, batch_group_count, precision,
                        preferred_element_type):
    """_conv_general_dilated_transpose_lhs: convolve the cotangent with the
    spatially reversed kernel (in/out features swapped, the group axis moved
    into its output features), the forward strides as lhs dilation."""
    from spec.prims_indexing import rev
    lhs_shape, rhs_shape = lhs.type.shape, rhs.shape
    G, B = feature_group_count, batch_group_count
    if G > 1 or B > 1:
        rhs = _reshape_axis_out_of(rhs_spec[0], max(G, B), rhs)
        rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[1], rhs)
    pads = vjp_lhs_padding(_take(lhs_shape, lhs_spec[2:]), _take(rhs_shape, rhs_spec[2:]), window_strides,
                           _take(g.shape, out_spec[2:]), padding, lhs_dilation, rhs_dilation)
    revd = rev(rhs, rhs_spec[2:])
    if g.dtype != revd.dtype:
        revd = convert_element_type(revd, g.dtype)
    out = conv_general_dilated(g, revd, window_strides=lhs_dilation, padding=pads, lhs_dilation=window_strides,
                               rhs_dilation=rhs_dilation,
                               dimension_numbers=(out_spec, _spec_transpose(rhs_spec), lhs_spec),
                               feature_group_count=max(G, B), batch_group_count=1, precision=precision,
                               preferred_element_type=preferred_element_type)
    if out.dtype != lhs.type.dtype:
        out = convert_element_type(out, lhs.type.dtype)
    if B > 1:
        out = _reshape_axis_out_of(lhs_spec[1], B, out)
        out = _reshape_axis_into(lhs_spec[1], lhs_spec[0], out)
    return out


def _conv_transpose_rhs(g, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        lhs_spec, rhs_spec, out_spec, feature_group_count, batch_group_count, precision,
                        preferred_element_type):
    """_conv_general_dilated_transpose_rhs: convolve the input with the
    cotangent (batch and feature dims swapped in every spec, the forward
    strides as rhs dilation); feature groups become batch groups and back."""
    if np.prod(g.shape) == 0:
        return Zero(rhs.type)
    G, B = feature_group_count, batch_group_count
    G, B = (B, 1) if B > 1 else (1, G)
    pads = vjp_rhs_padding(_take(lhs.shape, lhs_spec[2:]), _take(rhs.type.shape, rhs_spec[2:]), window_strides,
                           _take(g.shape, out_spec[2:]), padding, lhs_dilation, rhs_dilation)
    if g.dtype != lhs.dtype:
        lhs = convert_element_type(lhs, g.dtype)
    out = conv_general_dilated(lhs, g, window_strides=rhs_dilation, padding=pads, lhs_dilation=lhs_dilation,
                               rhs_dilation=window_strides,
                               dimension_numbers=tuple(map(_spec_transpose, (lhs_spec, out_spec, rhs_spec))),
                               feature_group_count=G, batch_group_count=B, precision=precision,
                               preferred_element_type=preferred_element_type)
    if out.dtype != rhs.type.dtype:
        out = convert_element_type(out, rhs.type.dtype)
    return out


def _conv_transpose(ct, lhs, rhs, **params):
    """ad.bilinear_transpose: exactly one operand is linear."""
    if is_undefined(lhs) and is_undefined(rhs):
        raise PrimitiveError(conv_general_dilated_p, "transpose of a product of two linear values (not linear)")
    if is_undefined(lhs):
        return [Zero(lhs.type) if isinstance(ct, Zero) else _conv_transpose_lhs(ct, lhs, rhs, **params), None]
    return [None, Zero(rhs.type) if isinstance(ct, Zero) else _conv_transpose_rhs(ct, lhs, rhs, **params)]


def _specs(params):
    return params["lhs_spec"], params["rhs_spec"], params["out_spec"]


def _conv_with(lhs, rhs, params, **changes):
    """conv_general_dilated with `params` (the spec's), some changed."""
    p = {**params, **changes}
    return conv_general_dilated(lhs, rhs, p["window_strides"], p["padding"], p["lhs_dilation"], p["rhs_dilation"],
                                _specs(p), p["feature_group_count"], p["batch_group_count"], p["precision"],
                                p["preferred_element_type"])


def _conv_batch_both(lhs, rhs, lbd, rbd, params):
    (lhs_spec, rhs_spec, out_spec), B = _specs(params), params["batch_group_count"]
    if B > 1:
        new_lhs, changes = _reshape_axis_into(lbd, lhs_spec[0], lhs), dict(batch_group_count=B * lhs.shape[lbd])
    else:
        new_lhs = _reshape_axis_into(lbd, lhs_spec[1], lhs)
        changes = dict(feature_group_count=params["feature_group_count"] * lhs.shape[lbd])
    out = _conv_with(new_lhs, _reshape_axis_into(rbd, rhs_spec[0], rhs), params, **changes)
    return _reshape_axis_out_of(out_spec[1], lhs.shape[lbd], out), out_spec[1]


def _conv_batch_lhs(lhs, rhs, lbd, params):
    (lhs_spec, _, out_spec), B = _specs(params), params["batch_group_count"]
    if B == 1:
        new_lhs = _reshape_axis_into(lbd, lhs_spec[0], lhs)
    else:
        new_lhs = _reshape_axis_out_of(lhs_spec[0] + int(lbd <= lhs_spec[0]), B, lhs)
        new_lhs = _reshape_axis_into(lbd + int(lhs_spec[0] < lbd), lhs_spec[0] + 1, new_lhs)
        new_lhs = _reshape_axis_into(lhs_spec[0], lhs_spec[0], new_lhs)
    out = _conv_with(new_lhs, rhs, params)
    return _reshape_axis_out_of(out_spec[0], lhs.shape[lbd], out), out_spec[0]


def _conv_batch_rhs(lhs, rhs, rbd, params):
    (_, rhs_spec, out_spec), G, B = _specs(params), params["feature_group_count"], params["batch_group_count"]
    if G == 1 and B == 1:
        out = _conv_with(lhs, _reshape_axis_into(rbd, rhs_spec[0], rhs), params)
        return _reshape_axis_out_of(out_spec[1], rhs.shape[rbd], out), out_spec[1]
    # groups outermost: factor them out of the kernel's output features, fold
    # the batch in after them, and undo the same on the output
    groups = G if G > 1 else B
    new_rhs = _reshape_axis_out_of(rhs_spec[0] + int(rbd <= rhs_spec[0]), groups, rhs)
    new_rhs = _reshape_axis_into(rbd + int(rhs_spec[0] < rbd), rhs_spec[0] + 1, new_rhs)
    new_rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[0], new_rhs)
    out = _conv_with(lhs, new_rhs, params)
    out = _reshape_axis_out_of(out_spec[1], groups, out)
    out = _reshape_axis_out_of(out_spec[1] + 1, rhs.shape[rbd], out)
    return _reshape_axis_into(out_spec[1], out_spec[1] + 1, out), out_spec[1]


def _conv_batch(args, dims, **params):
    """_conv_general_dilated_batch_rule: the batch axis is folded into the
    lhs batch dim (lhs batched), the kernel's output features (rhs
    batched), or, both batched, into feature (or batch) groups."""
    (lhs, rhs), (lbd, rbd) = args, dims
    if (lbd is not None and lhs.shape[lbd] == 0) or (rbd is not None and rhs.shape[rbd] == 0):
        unbatched = [ArrayType([d for i, d in enumerate(a.shape) if i != bd], a.dtype)
                     for a, bd in zip(args, dims)]
        t, = _conv_shape(*unbatched, **params)     # lax.full((0,) + shape, 0)
        return broadcast_in_dim(np.zeros((), t.dtype), (0,) + tuple(t.shape), ()), 0
    if lbd is not None and rbd is not None:
        return _conv_batch_both(lhs, rhs, lbd, rbd, params)
    if lbd is not None:
        return _conv_batch_lhs(lhs, rhs, lbd, params)
    return _conv_batch_rhs(lhs, rhs, rbd, params)


def _conv_cost(lhs, rhs, **params):
    """2 * output elements * the terms of each (input features per group x window)."""
    out, = _conv_shape(lhs, rhs, **params)
    rhs_spec = params["rhs_spec"]
    return 2 * out.size * int(np.prod([rhs.shape[i] for i in rhs_spec[1:]], dtype=np.int64))


def _conv_from_jax(params: dict) -> dict:
    """ConvDimensionNumbers (read by attribute) as its three fields, padding
    as int pairs, the precision as plain data."""
    params = dict(params)
    dn = params.pop("dimension_numbers")
    return {**params, **{k: tuple(int(i) for i in getattr(dn, k)) for k in ("lhs_spec", "rhs_spec", "out_spec")},
            "padding": tuple((int(lo), int(hi)) for lo, hi in params["padding"]),
            "precision": precision_from_jax(params.get("precision"))}


shape_rules[conv_general_dilated_p] = _conv_shape
eval_rules[conv_general_dilated_p] = _conv_eval
jvp_rules[conv_general_dilated_p] = _conv_jvp
transpose_rules[conv_general_dilated_p] = _conv_transpose
batch_rules[conv_general_dilated_p] = _conv_batch
cost_rules[conv_general_dilated_p] = _conv_cost
jax_facts[conv_general_dilated_p] = JaxFacts(
    "conv_general_dilated",
    "lambda lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, lhs_spec, rhs_spec, out_spec, "
    "feature_group_count, batch_group_count, precision, preferred_element_type: lax.conv_general_dilated("
    "lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, "
    "lax.ConvDimensionNumbers(lhs_spec, rhs_spec, out_spec), "
    f"feature_group_count, batch_group_count, precision={PRECISION_TO_JAX}(precision), "
    "preferred_element_type=preferred_element_type)",
    from_jax=_conv_from_jax)


def _ref_conv(lhs, rhs, strides, padding, lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
              feature_group_count=1, batch_group_count=1):
    """An independent numpy convolution for the examples: for every output
    element, sum lhs * rhs over the kernel taps whose dilated, strided,
    padded position lands on an lhs element (a gather, not a dilate-and-pad).
    `dimension_numbers` as strings ('NHWC', 'HWIO', 'NHWC'), 'SAME' padding
    worked out here."""
    n = lhs.ndim - 2
    names = dimension_numbers or ("NC" + "HWD"[:n], "OI" + "HWD"[:n], "NC" + "HWD"[:n])
    spatial = [c for c in names[1] if c not in "OI"]
    x = np.transpose(lhs, [names[0].index(c) for c in "NC" + "".join(spatial)])
    w = np.transpose(rhs, [names[1].index(c) for c in "OI" + "".join(spatial)])
    ld, rd = lhs_dilation or (1,) * n, rhs_dilation or (1,) * n
    if padding == "SAME":     # output size ceil(in / stride)
        total = [max(0, (-(-d // s) - 1) * s + (k - 1) * r + 1 - d)
                 for d, s, k, r in zip(x.shape[2:], strides, w.shape[2:], rd)]
        padding = [(t // 2, t - t // 2) for t in total]
    padding = [(0, 0)] * n if padding == "VALID" else padding
    in_sizes = [(d - 1) * l + 1 + lo + hi for d, l, (lo, hi) in zip(x.shape[2:], ld, padding)]
    out_sizes = [max(0, (d - (k - 1) * r - 1) // s + 1) for d, k, r, s in zip(in_sizes, w.shape[2:], rd, strides)]
    (N, C), (O, I), G, B = x.shape[:2], w.shape[:2], feature_group_count, batch_group_count
    out = np.zeros((N // B, O) + tuple(out_sizes))
    for b, o, *pos in itertools.product(range(N // B), range(O), *map(range, out_sizes)):
        for i, *tap in itertools.product(range(I), *map(range, w.shape[2:])):
            q = [p * s + k * r - lo for p, s, k, r, (lo, _) in zip(pos, strides, tap, rd, padding)]
            if all(v % l == 0 and 0 <= v // l < d for v, l, d in zip(q, ld, x.shape[2:])):
                batch = b + (o // (O // B)) * (N // B)
                feature = i + (o // (O // G)) * I
                out[(b, o, *pos)] += x[(batch, feature, *[v // l for v, l in zip(q, ld)])] * w[(o, i, *tap)]
    order = [("NC" + "".join(spatial)).index(c) for c in names[2]]
    return np.transpose(out, order)


def _conv_example(name, lhs_shape, rhs_shape, strides, padding, **kw):
    """An Example of conv_general_dilated and its reference with the same arguments."""
    spec_kw = {k: v for k, v in kw.items() if k != "precision"}
    terms = int(np.prod(rhs_shape)) // max(1, kw.get("feature_group_count", 1) * kw.get("batch_group_count", 1))
    return Example(name, ((lhs_shape, "f32", "normal"), (rhs_shape, "f32", "normal")),
                   lambda x, w: conv_general_dilated(x, w, strides, padding, **kw),
                   lambda x, w: _ref_conv(x, w, strides, padding, **spec_kw),
                   linear=((True, False), (False, True)), cond=terms)


examples[conv_general_dilated_p] = [
    _conv_example("nchw-valid-2d", (2, 3, 5, 5), (4, 3, 3, 3), (1, 1), "VALID"),
    _conv_example("nhwc-same-strided", (2, 6, 5, 3), (3, 3, 3, 4), (2, 2), "SAME",
                  dimension_numbers=("NHWC", "HWIO", "NHWC")),
    _conv_example("explicit-and-negative-padding-1d", (2, 3, 7), (2, 3, 3), (1,), ((2, -1),)),
    _conv_example("lhs-dilation-transposed", (1, 2, 4, 4), (3, 2, 3, 3), (1, 1), ((2, 2), (1, 2)),
                  lhs_dilation=(2, 2)),
    _conv_example("rhs-dilation-atrous", (1, 2, 7, 6), (2, 2, 3, 2), (1, 2), "SAME", rhs_dilation=(2, 3)),
    _conv_example("depthwise-feature-groups", (2, 4, 5, 5), (8, 1, 3, 3), (1, 1), "SAME", feature_group_count=4),
    _conv_example("feature-groups-1d", (1, 4, 6), (6, 2, 3), (2,), "VALID", feature_group_count=2),
    _conv_example("batch-groups", (4, 3, 5, 5), (6, 3, 3, 3), (1, 1), ((1, 0), (0, 1)), batch_group_count=2),
    _conv_example("mixed-layout-1d-all-dilations", (2, 5, 3), (3, 3, 2), (2,), ((1, 2),), lhs_dilation=(2,),
                  rhs_dilation=(2,), dimension_numbers=("NWC", "WIO", "NCW")),
    _conv_example("3d", (1, 2, 3, 4, 4), (2, 2, 2, 2, 2), (1, 2, 1), "SAME"),
    _conv_example("precision-highest", (2, 2, 4, 4), (3, 2, 2, 2), (1, 1), "VALID", precision="highest"),
]
