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
  spec/prims_window.py's.
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
from spec.core import (complex_rules, Example, JaxFacts, PrimitiveError, Zero, batch_rules, bind, cost_rules,
                       eval_rules, examples, instantiate, is_undefined, jax_facts, jvp_rules,
                       primitive, shape_rules, transpose_rules)
from spec.ir import ArrayType, canonical_dtype, is_complex, is_float, supports_inf
from spec.partial_eval import looked_through
from spec.prims_elementwise import _lit_like, add_tangents, convert_element_type
from spec.prims_structural import (PRECISION_TO_JAX, linear_jvp, _pad_eval, broadcast_in_dim,
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
    lhs_shape, rhs_shape = lhs.type.shape, rhs.shape
    G, B = feature_group_count, batch_group_count
    if G > 1 or B > 1:
        rhs = _reshape_axis_out_of(rhs_spec[0], max(G, B), rhs)
        rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[1], rhs)
    pads = vjp_lhs_padding(_take(lhs_shape, lhs_spec[2:]), _take(rhs_shape, rhs_spec[2:]), window_strides,
                           _take(g.shape, out_spec[2:]), padding, lhs_dilation, rhs_dilation)
    from spec.prims_indexing import rev  # imported here: the registries keep spec/__init__'s module order
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


# ==========================================================================
# pooling: reduce_window_sum, reduce_window_max, reduce_window_min

_WINDOW = ["window_dimensions", "window_strides", "padding", "base_dilation", "window_dilation"]
reduce_window_sum_p = primitive("reduce_window_sum", _WINDOW)
reduce_window_max_p = primitive("reduce_window_max", _WINDOW)
reduce_window_min_p = primitive("reduce_window_min", _WINDOW)


def _window_params(shape, window_dimensions, window_strides=None, padding="VALID", base_dilation=None,
                   window_dilation=None) -> dict:
    """windowed_reductions._reduce_window's defaults: unit strides and
    dilations; string padding resolved against the dilated window."""
    ones = (1,) * len(window_dimensions)
    window_strides = ones if window_strides is None else window_strides
    window_dilation = ones if window_dilation is None else window_dilation
    if isinstance(padding, str):
        padding = padtype_to_pads(shape, [dilate_dim(w, r) for w, r in zip(window_dimensions, window_dilation)],
                                  window_strides, padding)
    return dict(window_dimensions=tuple(int(w) for w in window_dimensions),
                window_strides=tuple(int(s) for s in window_strides),
                padding=tuple((int(lo), int(hi)) for lo, hi in padding),
                base_dilation=ones if base_dilation is None else tuple(int(d) for d in base_dilation),
                window_dilation=tuple(int(d) for d in window_dilation))


def reduce_window_sum(x, window_dimensions, window_strides=None, padding="VALID", base_dilation=None,
                      window_dilation=None):
    """lax.reduce_window(x, 0, lax.add, ...): window sums (average pooling's numerator)."""
    return bind(reduce_window_sum_p, x, **_window_params(x.shape, window_dimensions, window_strides, padding,
                                                         base_dilation, window_dilation))


def reduce_window_max(x, window_dimensions, window_strides=None, padding="VALID", base_dilation=None,
                      window_dilation=None):
    """lax.reduce_window(x, -inf, lax.max, ...): max pooling."""
    return bind(reduce_window_max_p, x, **_window_params(x.shape, window_dimensions, window_strides, padding,
                                                         base_dilation, window_dilation))


def reduce_window_min(x, window_dimensions, window_strides=None, padding="VALID", base_dilation=None,
                      window_dilation=None):
    """lax.reduce_window(x, inf, lax.min, ...)."""
    return bind(reduce_window_min_p, x, **_window_params(x.shape, window_dimensions, window_strides, padding,
                                                         base_dilation, window_dilation))


def _window_out_shape(prim, shape, window_dimensions, window_strides, padding, base_dilation,
                      window_dilation) -> tuple:
    """_common_reduce_window_shape_rule: windows of the base-dilated, padded
    operand that fit the dilated window, at the strides."""
    n = len(shape)
    wd = _ints(prim, "window_dimensions", window_dimensions, n)
    ws = _ints(prim, "window_strides", window_strides, n)
    pads = _pairs(prim, "padding", padding, n)
    bd = _ints(prim, "base_dilation", base_dilation, n)
    wdl = _ints(prim, "window_dilation", window_dilation, n)
    return tuple(stride_dim(dilate_dim(d, b) + lo + hi, dilate_dim(w, r), s)
                 for d, b, (lo, hi), w, r, s in zip(shape, bd, pads, wd, wdl, ws))


def _reduce_window_shape(prim):
    def rule(x, **params):
        if prim is reduce_window_sum_p and x.dtype == np.bool_:
            raise PrimitiveError(prim, f"operand to reduce_window_sum must have a number dtype, got {x}")
        return [ArrayType(_window_out_shape(prim, x.shape, **params), x.dtype)]
    return rule


def _identity(kind: str, dtype):
    """lax._get_max_identity / _get_min_identity / zero of `dtype`."""
    if kind == "sum":
        return 0
    if dtype == np.bool_:
        return kind == "min"
    if dtype != object and is_float(dtype) and not supports_inf(dtype):     # the fnuz fp8 types
        info = ml_dtypes.finfo(dtype)
        return info.min if kind == "max" else info.max
    if dtype == object or is_float(dtype):
        return -np.inf if kind == "max" else np.inf
    info = ml_dtypes.iinfo(dtype)
    return info.min if kind == "max" else info.max


def _window_views(x, init, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    """The views `_windows` gives of x base-dilated and padded with `init`."""
    axes = range(np.ndim(x))
    padded = _dilate_pad(x, axes, base_dilation, padding, init)
    out = _window_out_shape(None, np.shape(x), window_dimensions, window_strides, padding, base_dilation,
                            window_dilation)
    return out, _windows(padded, axes, window_dimensions, window_strides, window_dilation, out)


def _reduce_window_eval(kind: str):
    def rule(x, **params):
        """Combine the window views elementwise, starting from the identity
        (padding and base-dilation holes hold the identity too)."""
        xp = namespace(x)
        v = xp.compute(x)
        init = _identity(kind, v.dtype)
        out, views = _window_views(v, init, **params)
        combine = {"sum": xp.add, "max": xp.maximum, "min": xp.minimum}[kind]
        acc = np.full(out, init, dtype=v.dtype)
        for _, view in views:
            acc = combine(acc, view)
        return xp.result(acc, x.dtype)
    return rule


def _reduce_window_sum_transpose(ct, x, *, window_dimensions, window_strides, padding, base_dilation,
                                 window_dilation):
    """_reduce_window_sum_transpose_rule: pad the cotangent (strides as
    interior padding) and sum it over the same windows, base dilation as
    strides."""
    if isinstance(ct, Zero):
        return [Zero(x.type)]
    shape = x.type.shape
    pads = vjp_lhs_padding(shape, window_dimensions, window_strides, ct.shape, padding, base_dilation,
                           window_dilation)
    config = [(lo, hi, s - 1) for (lo, hi), s in zip(pads, window_strides)]
    padded = pad(ct, _lit_like(ct, 0), config)
    ones = (1,) * len(shape)
    return [reduce_window_sum(padded, window_dimensions, base_dilation, [(0, 0)] * len(shape),
                              base_dilation=ones, window_dilation=window_dilation)]


def _reduce_window_chooser_jvp(prim, select_prim):
    def rule(primals, tangents, **params):
        """_reduce_window_chooser_jvp_rule: the tangent at each window's
        chosen element, select_and_gather_add(g, operand) with ge (max) or le (min)."""
        (x,), (g,) = primals, tangents
        ans = bind(prim, x, **params)
        if isinstance(g, Zero):
            return ans, None
        return ans, select_and_gather_add(g, x, select_prim, **params)
    return rule


def _reduce_window_batch(prim):
    def rule(args, dims, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
        """_reduce_window_batch_rule: a unit window along the batch axis."""
        (x,), (d,) = args, dims
        ins = lambda t, v: t[:d] + (v,) + t[d:]
        return bind(prim, x, window_dimensions=ins(window_dimensions, 1), window_strides=ins(window_strides, 1),
                    padding=ins(padding, (0, 0)), base_dilation=ins(base_dilation, 1),
                    window_dilation=ins(window_dilation, 1)), d
    return rule


def _window_from_jax(params: dict) -> dict:
    """JAX's window params as int tuples (padding pairs may hold numpy ints)."""
    out = dict(params)
    for k in ("window_dimensions", "window_strides", "base_dilation", "window_dilation"):
        if k in out:
            out[k] = tuple(int(i) for i in out[k])
    out["padding"] = tuple((int(lo), int(hi)) for lo, hi in out["padding"])
    if "select_prim" in out:
        out["select_prim"] = getattr(out["select_prim"], "name", out["select_prim"])
    return out


def _window_emitter(name: str, operands: str) -> str:
    """Source binding windowed_reductions.<name>_p with the spec's params."""
    return (f"lambda {operands}, **params: jax._src.lax.windowed_reductions.{name}_p.bind({operands}, "
            "**{k: (lax_internal.ge_p if v == 'ge' else lax_internal.le_p) if k == 'select_prim' else v "
            "for k, v in params.items()})")


for _p, _kind in ((reduce_window_sum_p, "sum"), (reduce_window_max_p, "max"), (reduce_window_min_p, "min")):
    shape_rules[_p] = _reduce_window_shape(_p)
    eval_rules[_p] = _reduce_window_eval(_kind)
    batch_rules[_p] = _reduce_window_batch(_p)
    jax_facts[_p] = JaxFacts(_p.name, _window_emitter(_p.name, "x"), from_jax=_window_from_jax)
jvp_rules[reduce_window_sum_p] = linear_jvp(lambda x, **p: bind(reduce_window_sum_p, x, **p))
transpose_rules[reduce_window_sum_p] = _reduce_window_sum_transpose
jvp_rules[reduce_window_max_p] = _reduce_window_chooser_jvp(reduce_window_max_p, "ge")
jvp_rules[reduce_window_min_p] = _reduce_window_chooser_jvp(reduce_window_min_p, "le")
cost_rules[reduce_window_sum_p] = lambda x, **p: int(np.prod(_window_out_shape(None, x.shape, **p))) * int(
    np.prod(p["window_dimensions"]))


def _ref_windows(x, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    """An independent numpy view of the windows, for the examples: for each
    output position, the operand elements its window covers (a position of
    the dilated, padded operand that is not a hole or padding)."""
    sizes = [(d - 1) * b + 1 + lo + hi for d, b, (lo, hi) in zip(x.shape, base_dilation, padding)]
    out = [max(0, (s - (w - 1) * r - 1) // st + 1)
           for s, w, r, st in zip(sizes, window_dimensions, window_dilation, window_strides)]
    for pos in itertools.product(*map(range, out)):
        covered = []
        for tap in itertools.product(*map(range, window_dimensions)):
            q = [p * st + k * r - lo for p, st, k, r, (lo, _) in zip(pos, window_strides, tap, window_dilation,
                                                                     padding)]
            if all(v % b == 0 and 0 <= v // b < d for v, b, d in zip(q, base_dilation, x.shape)):
                covered.append(tuple(v // b for v, b in zip(q, base_dilation)))
        yield pos, out, covered


def _ref_reduce_window(kind, x, *window):
    """Reference reduce_window_{sum,max,min}: each window's sum / max / min
    (the identity where a window covers no element)."""
    out = None
    for pos, shape, covered in _ref_windows(x, *window):
        if out is None:
            out = np.full(shape, {"sum": 0.0, "max": -np.inf, "min": np.inf}[kind])
        vals = [x[c] for c in covered]
        out[pos] = sum(vals) if kind == "sum" else (max if kind == "max" else min)(vals, default=out[pos])
    return out


def _window_example(prim, kind, name, shape, domain, *window, linear=()):
    """An Example of a windowed primitive; `window` is (dims, strides, padding, base, window dilation)."""
    op = {"sum": reduce_window_sum, "max": reduce_window_max, "min": reduce_window_min}[kind]
    return Example(name, ((shape, "f32", domain),), lambda x: op(x, *window),
                   lambda x: _ref_reduce_window(kind, x, *window), linear=linear,
                   cond=int(np.prod(window[0])) if kind == "sum" else 1.0)


examples[reduce_window_sum_p] = [
    _window_example(reduce_window_sum_p, "sum", "avg-pool-2x2-stride-2", (2, 3, 6, 6), "normal",
                    (1, 1, 2, 2), (1, 1, 2, 2), ((0, 0),) * 4, (1,) * 4, (1,) * 4, linear=((True,),)),
    _window_example(reduce_window_sum_p, "sum", "padded-base-and-window-dilation", (5, 4), "normal",
                    (3, 2), (2, 1), ((1, 1), (1, 0)), (2, 1), (1, 2), linear=((True,),)),
]
examples[reduce_window_max_p] = [
    _window_example(reduce_window_max_p, "max", "max-pool-2x2-stride-2", (2, 6, 6), "distinct",
                    (1, 2, 2), (1, 2, 2), ((0, 0),) * 3, (1,) * 3, (1,) * 3),
    _window_example(reduce_window_max_p, "max", "overlapping-same-padding", (5, 5), "distinct",
                    (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1)),
    _window_example(reduce_window_max_p, "max", "base-and-window-dilation", (4, 5), "distinct",
                    (2, 2), (1, 2), ((0, 1), (1, 0)), (2, 1), (1, 2)),
]
examples[reduce_window_min_p] = [
    _window_example(reduce_window_min_p, "min", "min-pool-strided-padded", (2, 7), "distinct",
                    (1, 3), (1, 2), ((0, 0), (1, 1)), (1, 1), (1, 1)),
]


# ==========================================================================
# select_and_gather_add (reduce_window_max/min's JVP) and
# select_and_scatter_add (its transpose): select_prim is "ge" (max) or "le" (min)

select_and_gather_add_p = primitive("select_and_gather_add", ["select_prim"] + _WINDOW)
select_and_scatter_add_p = primitive("select_and_scatter_add", ["select_prim", "window_dimensions",
                                                                "window_strides", "padding"])

# JAX's message, word for word (_select_and_gather_add_transpose)
WINDOW_DILATION_VJP_ERROR = ("VJP not implemented for select_and_gather (MaxPool) with window dilation, "
                             "got window_dilation={}.")


def select_and_gather_add(tangents, operand, select_prim, window_dimensions, window_strides, padding,
                          base_dilation, window_dilation):
    """windowed_reductions._select_and_gather_add: in each window, the
    element of `tangents` where `operand` is largest ("ge") or smallest ("le")."""
    return bind(select_and_gather_add_p, tangents, operand, select_prim=select_prim,
                window_dimensions=tuple(window_dimensions), window_strides=tuple(window_strides),
                padding=tuple(tuple(p) for p in padding), base_dilation=tuple(base_dilation),
                window_dilation=tuple(window_dilation))


def select_and_scatter_add(source, operand, select_prim, window_dimensions, window_strides, padding):
    """windowed_reductions._select_and_scatter_add: each window's `source`
    element added where `operand` is largest ("ge") or smallest ("le") in that window."""
    return bind(select_and_scatter_add_p, source, operand, select_prim=select_prim,
                window_dimensions=tuple(window_dimensions), window_strides=tuple(window_strides),
                padding=tuple(tuple(p) for p in padding))


def _check_select(prim, select_prim, *operands):
    if select_prim not in ("ge", "le"):
        raise PrimitiveError(prim, f"select_prim must be 'ge' or 'le', got {select_prim!r}")
    if any(not is_float(t.dtype) or t.dtype != operands[0].dtype for t in operands):
        raise PrimitiveError(prim, f"operands must be floating point of one dtype, got {list(operands)}")


def _select_and_gather_add_shape(t, x, *, select_prim, **window):
    p = select_and_gather_add_p
    _check_select(p, select_prim, t, x)
    if t.shape != x.shape:
        raise PrimitiveError(p, f"tangents and operand shapes must match, got {t} and {x}")
    return [ArrayType(_window_out_shape(p, x.shape, **window), t.dtype)]


def _chooses(select_prim, best, candidate):
    """Whether the reduction moves from `best` to `candidate`: XLA's
    `select(select_prim(best, candidate), best, candidate)`, so ties keep
    the earlier element (and a NaN candidate is taken)."""
    keep = best >= candidate if select_prim == "ge" else best <= candidate
    return ~np.asarray(keep, dtype=bool)


def _select_and_gather_add_eval(t, x, *, select_prim, **window):
    """Reduce (operand, tangent) pairs over each window, starting from
    (-inf or inf, 0), keeping the pair the select chooses; padding and
    holes hold that start value."""
    xp = namespace(t, x)
    init = -np.inf if select_prim == "ge" else np.inf
    vx, vt = xp.compute(x), xp.compute(t)
    out, x_views = _window_views(vx, init, **window)
    _, t_views = _window_views(vt, 0, **window)
    best, val = np.full(out, init, dtype=vx.dtype), np.zeros(out, dtype=vt.dtype)
    for (_, cx), (_, ct) in zip(x_views, t_views):
        take = _chooses(select_prim, best, cx)
        best, val = np.where(take, cx, best), np.where(take, ct, val)
    return xp.result(val, t.dtype)


def _select_and_gather_add_jvp(primals, tangents, *, select_prim, **window):
    """_select_and_gather_add_jvp: linear in the tangents operand; the
    operand's tangent is ignored (the selection is piecewise constant)."""
    (source, operand), (g_source, _) = primals, tangents
    ans = bind(select_and_gather_add_p, source, operand, select_prim=select_prim, **window)
    if isinstance(g_source, Zero):
        return ans, None
    return ans, bind(select_and_gather_add_p, g_source, operand, select_prim=select_prim, **window)


def _select_and_gather_add_transpose(ct, tangents, operand, *, select_prim, window_dimensions,
                                     window_strides, padding, base_dilation, window_dilation):
    """_select_and_gather_add_transpose: scatter the cotangent back to the
    chosen elements (select_and_scatter_add), through a padded operand
    (then a strided slice) when the base is dilated."""
    assert is_undefined(tangents) and not is_undefined(operand)
    if any(d != 1 for d in window_dilation):
        raise NotImplementedError(WINDOW_DILATION_VJP_ERROR.format(window_dilation))
    if isinstance(ct, Zero):
        return [Zero(tangents.type), None]
    dilated = any(d != 1 for d in base_dilation)
    if dilated:
        identity = _lit_like(operand, -np.inf if select_prim == "ge" else np.inf)
        operand = pad(operand, identity, [(0, 0, d - 1) for d in base_dilation])
    result = select_and_scatter_add(ct, operand, select_prim, window_dimensions, window_strides, padding)
    if dilated:
        result = slice_op(result, (0,) * result.ndim, result.shape, base_dilation)
    return [result, None]


def _select_and_gather_add_batch(args, dims, *, select_prim, window_dimensions, window_strides, padding,
                                 base_dilation, window_dilation):
    """_select_and_gather_add_batching_rule: both operands batched at the
    front, a unit window along the batch."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    t, x = (bdim_at_front(a, d, size) for a, d in zip(args, dims))
    return select_and_gather_add(t, x, select_prim, (1,) + window_dimensions, (1,) + window_strides,
                                 ((0, 0),) + padding, (1,) + base_dilation, (1,) + window_dilation), 0


shape_rules[select_and_gather_add_p] = _select_and_gather_add_shape
eval_rules[select_and_gather_add_p] = _select_and_gather_add_eval
jvp_rules[select_and_gather_add_p] = _select_and_gather_add_jvp
transpose_rules[select_and_gather_add_p] = _select_and_gather_add_transpose
batch_rules[select_and_gather_add_p] = _select_and_gather_add_batch
jax_facts[select_and_gather_add_p] = JaxFacts("select_and_gather_add",
                                              _window_emitter("select_and_gather_add", "t, x"),
                                              from_jax=_window_from_jax)


def _select_and_scatter_add_shape(source, x, *, select_prim, window_dimensions, window_strides, padding):
    p = select_and_scatter_add_p
    _check_select(p, select_prim, source, x)
    ones = (1,) * x.ndim
    windows = _window_out_shape(p, x.shape, window_dimensions, window_strides, padding, ones, ones)
    if tuple(source.shape) != windows:
        raise PrimitiveError(p, f"source {source} must have one element per window of {x}: shape {windows}")
    return [ArrayType(x.shape, source.dtype)]


def _select_and_scatter_add_eval(source, x, *, select_prim, window_dimensions, window_strides, padding):
    """_select_and_scatter_add_impl (as on CPU): pad the operand with the
    select's identity, choose each window's element as select_and_gather_add
    does, add the window's source element there, and cut the padding off."""
    xp = namespace(source, x)
    vx, vs = xp.compute(x), xp.compute(source)
    n = vx.ndim
    ones = (1,) * n
    init = -np.inf if select_prim == "ge" else np.inf
    padded = _dilate_pad(vx, range(n), ones, padding, init)
    best, choice = np.full(vs.shape, init, dtype=vx.dtype), np.zeros(vs.shape, dtype=int)
    offsets = list(np.ndindex(*window_dimensions))
    for k, (_, view) in enumerate(_windows(padded, range(n), window_dimensions, window_strides, ones, vs.shape)):
        take = _chooses(select_prim, best, view) | (k == 0)
        best, choice = np.where(take, view, best), np.where(take, k, choice)
    out = np.zeros(padded.shape, dtype=vs.dtype)
    for k, offset in enumerate(offsets):
        index = tuple(_slice(o, o + s * (m - 1) + 1, s) if m else _slice(0, 0)
                      for o, s, m in zip(offset, window_strides, vs.shape))
        out[index] = out[index] + np.where(choice == k, vs, 0)
    unpadded = _dilate_pad(out, range(n), ones, [(-lo, -hi) for lo, hi in padding], 0)
    return xp.result(unpadded, source.dtype)


def _select_and_scatter_add_jvp(primals, tangents, *, select_prim, **window):
    """_select_and_scatter_add_jvp: linear in the source; the operand's tangent is ignored."""
    (source, operand), (g_source, _) = primals, tangents
    ans = bind(select_and_scatter_add_p, source, operand, select_prim=select_prim, **window)
    if isinstance(g_source, Zero):
        return ans, None
    return ans, bind(select_and_scatter_add_p, g_source, operand, select_prim=select_prim, **window)


def _select_and_scatter_add_transpose(ct, source, operand, *, select_prim, window_dimensions,
                                      window_strides, padding):
    """_select_and_scatter_add_transpose: gather the cotangent at the chosen
    elements (select_and_gather_add with unit dilations)."""
    assert is_undefined(source) and not is_undefined(operand)
    if isinstance(ct, Zero):
        return [Zero(source.type), None]
    ones = (1,) * len(window_dimensions)
    return [select_and_gather_add(ct, operand, select_prim, window_dimensions, window_strides, padding,
                                  ones, ones), None]


def _select_and_scatter_add_batch(args, dims, *, select_prim, window_dimensions, window_strides, padding):
    """_select_and_scatter_add_batch_rule: both operands batched at the front, a unit window along the batch."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    source, x = (bdim_at_front(a, d, size) for a, d in zip(args, dims))
    return select_and_scatter_add(source, x, select_prim, (1,) + window_dimensions, (1,) + window_strides,
                                  ((0, 0),) + padding), 0


shape_rules[select_and_scatter_add_p] = _select_and_scatter_add_shape
eval_rules[select_and_scatter_add_p] = _select_and_scatter_add_eval
jvp_rules[select_and_scatter_add_p] = _select_and_scatter_add_jvp
transpose_rules[select_and_scatter_add_p] = _select_and_scatter_add_transpose
batch_rules[select_and_scatter_add_p] = _select_and_scatter_add_batch
jax_facts[select_and_scatter_add_p] = JaxFacts("select_and_scatter_add",
                                               _window_emitter("select_and_scatter_add", "source, x"),
                                               from_jax=_window_from_jax)


def _ref_select(select_prim, x, covered):
    """The covered position with the largest (ge) / smallest (le) operand value, first on ties."""
    pick = max if select_prim == "ge" else min
    return pick(covered, key=lambda c: x[c]) if covered else None


def _ref_select_and_gather_add(select_prim, t, x, *window):
    out = None
    for pos, shape, covered in _ref_windows(x, *window):
        out = np.zeros(shape) if out is None else out
        chosen = _ref_select(select_prim, x, covered)
        out[pos] = 0.0 if chosen is None else t[chosen]
    return out


def _ref_select_and_scatter_add(select_prim, source, x, dims, strides, padding):
    ones = (1,) * x.ndim
    out = np.zeros(x.shape)
    for pos, _, covered in _ref_windows(x, dims, strides, padding, ones, ones):
        chosen = _ref_select(select_prim, x, covered)
        if chosen is not None:
            out[chosen] += source[pos]
    return out


def _sga_example(name, shape, select_prim, *window):
    return Example(name, ((shape, "f32", "normal"), (shape, "f32", "distinct")),
                   lambda t, x: select_and_gather_add(t, x, select_prim, *window),
                   lambda t, x: _ref_select_and_gather_add(select_prim, t, x, *window), linear=((True, False),))


def _ssa_example(name, source_shape, shape, select_prim, *window):
    return Example(name, ((source_shape, "f32", "normal"), (shape, "f32", "distinct")),
                   lambda s, x: select_and_scatter_add(s, x, select_prim, *window),
                   lambda s, x: _ref_select_and_scatter_add(select_prim, s, x, *window), linear=((True, False),),
                   cond=int(np.prod(window[0])))


examples[select_and_gather_add_p] = [
    _sga_example("ge-overlapping-padded", (4, 5), "ge", (2, 2), (1, 1), ((0, 1), (1, 0)), (1, 1), (1, 1)),
    _sga_example("le-base-dilation", (3, 4), "le", (2, 2), (1, 2), ((1, 0), (0, 1)), (2, 1), (1, 1)),
]
examples[select_and_scatter_add_p] = [
    _ssa_example("ge-pool-2x2-stride-2", (2, 3, 3), (2, 6, 6), "ge", (1, 2, 2), (1, 2, 2), ((0, 0),) * 3),
    _ssa_example("le-overlapping-padded", (5, 4), (5, 4), "le", (3, 3), (1, 1), ((1, 1), (1, 1))),
]


# ==========================================================================
# optimization_barrier (several results)

optimization_barrier_p = primitive("optimization_barrier", multiple_results=True)


def optimization_barrier(*xs):
    """lax.optimization_barrier on a flat list of values: the values, unchanged
    (XLA neither moves computations across the barrier nor merges them)."""
    return bind(optimization_barrier_p, *xs)


def _opt_barrier_jvp(primals, tangents):
    """_opt_barrier_jvp: a barrier on the primals and another on the
    (instantiated) tangents. JAX's tangent barrier also carries the float0
    zeros of integer operands; here integer operands have no tangent at all.

    In JAX's order (jax/_src/lax/lax.py `_opt_barrier_jvp`): the zero
    tangents are instantiated first, then the primal barrier is bound. A
    higher order linearization saves both the zeros and the primal
    barrier's outputs, in the order they were made."""
    float_ins = [i for i, p in enumerate(primals) if is_float(getattr(p, "dtype", np.asarray(p).dtype))]
    tangents_in = [instantiate(tangents[i]) for i in float_ins]
    outs = optimization_barrier(*primals)
    ts = optimization_barrier(*tangents_in) if float_ins else []
    out_ts = [None] * len(primals)
    for i, t in zip(float_ins, ts):
        out_ts[i] = t
    return outs, out_ts


def _opt_barrier_transpose(cts, *primals):
    """_opt_barrier_transpose: a barrier on the instantiated cotangents."""
    outs = optimization_barrier(*[instantiate(ct) for ct in cts])
    return [o if is_undefined(p) else None for o, p in zip(outs, primals)]


shape_rules[optimization_barrier_p] = lambda *xs: list(xs)
eval_rules[optimization_barrier_p] = lambda *xs: list(xs)
jvp_rules[optimization_barrier_p] = _opt_barrier_jvp
transpose_rules[optimization_barrier_p] = _opt_barrier_transpose
batch_rules[optimization_barrier_p] = lambda args, dims: (optimization_barrier(*args), list(dims))
cost_rules[optimization_barrier_p] = lambda *xs: 0
complex_rules.add(optimization_barrier_p)     # the values unchanged, whatever their dtype
jax_facts[optimization_barrier_p] = JaxFacts("optimization_barrier",
                                             "lambda *xs: lax.optimization_barrier(list(xs))")
examples[optimization_barrier_p] = [
    Example("two-values", (((2, 3), "f32", "normal"), ((4,), "f32", "normal")),
            lambda x, y: optimization_barrier(x, y), lambda x, y: (x, y), linear=((True, True),)),
]


# ==========================================================================
# reduce_precision

reduce_precision_p = primitive("reduce_precision", ["exponent_bits", "mantissa_bits"])


def reduce_precision(x, exponent_bits: int, mantissa_bits: int):
    """lax.reduce_precision: x rounded to the float format with that many
    exponent and mantissa bits (and back to its own dtype)."""
    return bind(reduce_precision_p, x, exponent_bits=int(exponent_bits), mantissa_bits=int(mantissa_bits))


def _reduce_precision_shape(x, *, exponent_bits, mantissa_bits):
    p = reduce_precision_p
    if is_complex(x.dtype):     # JAX's words (lax._reduce_precision_shape: dtype rule `_float`)
        raise PrimitiveError(p, f"reduce_precision does not accept dtype {x.dtype.name}. "
                                f"Accepted dtypes are subtypes of floating.")
    if not is_float(x.dtype):
        raise PrimitiveError(p, f"operand must be floating point, got {x}")
    if not (isinstance(exponent_bits, int) and exponent_bits >= 1):
        raise PrimitiveError(p, f"exponent_bits must be positive; got {exponent_bits}")
    if not (isinstance(mantissa_bits, int) and mantissa_bits >= 0):
        raise PrimitiveError(p, f"mantissa_bits must be non-negative; got {mantissa_bits}")
    return [x]


def _reduce_precision_eval(x, *, exponent_bits, mantissa_bits):
    """XLA's EmitReducePrecisionIR on the bits of x's own format: round the
    mantissa to nearest even, then send exponents above the format's range to
    signed infinity and those below its smallest normal to signed zero (no
    denormals); NaNs stay NaNs. Bit for bit what XLA:CPU computes
    (tests/test_prims_conv.py)."""
    if namespace(x).name == "sympy":
        return x    # exact values have no precision to lose (as convert_element_type between floats)
    x = np.asarray(x)
    info = ml_dtypes.finfo(x.dtype)
    m, e, nbits = int(info.nmant), int(info.nexp), int(info.bits)
    u = np.dtype(f"uint{nbits}").type
    bits = x.view(f"uint{nbits}").copy()
    if mantissa_bits < m:
        last = 1 << (m - mantissa_bits)
        bias = ((bits & u(last)) >> u(m - mantissa_bits)) + u((last >> 1) - 1)
        bits = (bits + bias) & u(((1 << nbits) - 1) & ~(last - 1))
    if exponent_bits < e:
        exp_mask = ((1 << e) - 1) << m
        src_bias, bias = (1 << (e - 1)) - 1, (1 << (exponent_bits - 1)) - 1
        exponent, signed_zero = bits & u(exp_mask), bits & u(1 << (nbits - 1))
        bits = np.where(exponent > u((src_bias + bias) << m), signed_zero | u(exp_mask), bits)
        bits = np.where(exponent <= u((src_bias - bias) << m), signed_zero, bits)
    out = bits.astype(f"uint{nbits}").view(x.dtype)
    return np.where(np.isnan(x), x, out)


def _reduce_precision_jvp(primals, tangents, **params):
    """ad.deflinear: the tangent is rounded alike (JAX treats the rounding as linear)."""
    return linear_jvp(lambda x, **p: reduce_precision(x, **p))(primals, tangents, **params)


shape_rules[reduce_precision_p] = _reduce_precision_shape
eval_rules[reduce_precision_p] = _reduce_precision_eval
jvp_rules[reduce_precision_p] = _reduce_precision_jvp
transpose_rules[reduce_precision_p] = lambda ct, x, **p: [Zero(x.type) if isinstance(ct, Zero)
                                                          else reduce_precision(ct, **p)]
batch_rules[reduce_precision_p] = vectorized_batcher(reduce_precision_p)
looked_through.add(reduce_precision_p)   # saved_residuals names its operand's producer (jax 0.10.2)
jax_facts[reduce_precision_p] = JaxFacts(
    "reduce_precision", "lambda x, exponent_bits, mantissa_bits: lax.reduce_precision(x, exponent_bits, mantissa_bits)")
# The rounding itself is not differentiable at a point (finite differences
# see a step function), so the registered example is float64's own format,
# the identity for float32 and float64 operands; tests/test_prims_conv.py
# checks the rounding (ml_dtypes casts, overflow, underflow, NaN, JAX).
examples[reduce_precision_p] = [
    Example("float64-format", (((3, 4), "f32", "normal"),), lambda x: reduce_precision(x, 11, 52),
            lambda x: x, linear=((True,),)),
]


# ==========================================================================
# copy

copy_p = primitive("copy")


def copy(x):
    """lax_internal._array_copy (jnp.array(x, copy=True), jnp.copy): a copy of x."""
    return bind(copy_p, x)


shape_rules[copy_p] = lambda x: [x]
eval_rules[copy_p] = lambda x: np.array(x, copy=True)
jvp_rules[copy_p] = linear_jvp(lambda x: copy(x))
transpose_rules[copy_p] = lambda ct, x: [Zero(x.type) if isinstance(ct, Zero) else copy(ct)]
batch_rules[copy_p] = vectorized_batcher(copy_p)
cost_rules[copy_p] = lambda x: 0
jax_facts[copy_p] = JaxFacts("copy", "lambda x: lax_internal.copy_p.bind(x)")
examples[copy_p] = [Example("copy", (((2, 3), "f32", "normal"),), lambda x: copy(x), lambda x: x,
                            linear=((True,),))]


# ==========================================================================
# sharding_constraint (the identity on values)
#
# The sharding is plain data (the spec never imports jax):
#   ("SingleDeviceSharding", device id, memory kind)
#   ("NamedSharding", ("Mesh", device ids, axis sizes, axis names, axis types),
#    partition spec entries (None, an axis name, a tuple of names, or ... for
#    PartitionSpec.UNCONSTRAINED), memory kind)
# `layout` must be None and the context mesh empty (no `with mesh:` or
# jax.set_mesh around the constraint): anything else is not modelled.

sharding_constraint_p = primitive("sharding_constraint", ["sharding", "unconstrained_dims"])


def sharding_constraint(x, sharding, unconstrained_dims=()):
    """pjit.sharding_constraint_p (lax.with_sharding_constraint): x, unchanged."""
    return bind(sharding_constraint_p, x, sharding=sharding,
                unconstrained_dims=tuple(sorted(int(d) for d in unconstrained_dims)))


def _sharding_constraint_shape(x, *, sharding, unconstrained_dims):
    ok = isinstance(sharding, tuple) and (
        (len(sharding) == 3 and sharding[0] == "SingleDeviceSharding")
        or (len(sharding) == 4 and sharding[0] == "NamedSharding" and isinstance(sharding[2], tuple)))
    if not ok:
        raise PrimitiveError(sharding_constraint_p, f"sharding {sharding!r} is not modelled: the spec models "
                                                    f"SingleDeviceSharding and NamedSharding over a Mesh")
    if any(not 0 <= d < x.ndim for d in unconstrained_dims):
        raise PrimitiveError(sharding_constraint_p, f"unconstrained_dims {unconstrained_dims} out of range for {x}")
    return [x]


def _sharding_constraint_batch(args, dims, *, sharding, unconstrained_dims):
    """_sharding_constraint_batcher without an spmd axis name: the batch dim
    is unconstrained (UNCONSTRAINED in a sharded NamedSharding's spec, where
    JAX builds the equivalent GSPMDSharding; a replicated sharding stays)."""
    (x,), (d,) = args, dims
    if sharding[0] == "NamedSharding" and any(e is not None for e in sharding[2]):
        entries = list(sharding[2]) + [None] * max(0, d - len(sharding[2]))
        sharding = sharding[:2] + (tuple(entries[:d]) + (...,) + tuple(entries[d:]),) + sharding[3:]
    dims_out = sorted({u + (d <= u) for u in unconstrained_dims} | {d})
    return sharding_constraint(x, sharding, dims_out), d


def _sharding_from_jax(s):
    """JAX's SingleDeviceSharding / NamedSharding over a concrete Mesh as
    plain data (read by attribute); anything else as it is (refused)."""
    kind = type(s).__name__
    if kind == "SingleDeviceSharding":
        return (kind, int(next(iter(s.device_set)).id), s.memory_kind)
    mesh = getattr(s, "mesh", None)
    if kind != "NamedSharding" or type(mesh).__name__ != "Mesh" or s.spec.unreduced or s.spec.reduced:
        return s
    entry = lambda e: ... if type(e).__name__ == "UnconstrainedSingleton" else (
        tuple(e) if isinstance(e, (tuple, list)) else e)
    mesh_data = ("Mesh", tuple(int(d.id) for d in mesh.devices.flat), tuple(int(n) for n in mesh.devices.shape),
                 tuple(mesh.axis_names), tuple(t.name for t in mesh.axis_types))
    return (kind, mesh_data, tuple(entry(e) for e in s.spec), s.memory_kind)


def _sharding_constraint_from_jax(params: dict) -> dict:
    """The sharding as data; an empty context mesh dropped (a non-empty one
    stays, a param the spec does not model); unconstrained_dims sorted."""
    out = dict(params, sharding=_sharding_from_jax(params["sharding"]),
               unconstrained_dims=tuple(sorted(params["unconstrained_dims"])))
    if getattr(out.get("context_mesh"), "empty", False):
        del out["context_mesh"]
    return out


# the inverse of _sharding_from_jax, as emitter source
_SHARDING_TO_JAX = (
    "(lambda d, devs: jax.sharding.SingleDeviceSharding(devs[d[1]], memory_kind=d[2]) "
    "if d[0] == 'SingleDeviceSharding' else jax.sharding.NamedSharding(jax.sharding.Mesh("
    "np.array([devs[i] for i in d[1][1]], dtype=object).reshape(d[1][2]), d[1][3], "
    "axis_types=tuple(jax.sharding.AxisType[t] for t in d[1][4])), jax.sharding.PartitionSpec("
    "*[jax.sharding.PartitionSpec.UNCONSTRAINED if e is ... else e for e in d[2]]), memory_kind=d[3]))")

shape_rules[sharding_constraint_p] = _sharding_constraint_shape
eval_rules[sharding_constraint_p] = lambda x, **_: x
jvp_rules[sharding_constraint_p] = linear_jvp(lambda x, **p: bind(sharding_constraint_p, x, **p))
transpose_rules[sharding_constraint_p] = lambda ct, x, **p: [   # ad.deflinear2: the same constraint
    Zero(x.type) if isinstance(ct, Zero) else bind(sharding_constraint_p, ct, **p)]
batch_rules[sharding_constraint_p] = _sharding_constraint_batch
cost_rules[sharding_constraint_p] = lambda x, **_: 0
jax_facts[sharding_constraint_p] = JaxFacts(
    "sharding_constraint",
    "lambda x, sharding, unconstrained_dims: jax._src.pjit.sharding_constraint_p.bind(x, sharding="
    f"{_SHARDING_TO_JAX}(sharding, {{dv.id: dv for dv in jax.devices()}}), layout=None, "
    "context_mesh=jax._src.mesh.thread_resources.env.physical_mesh, "
    "unconstrained_dims=frozenset(unconstrained_dims))",
    from_jax=_sharding_constraint_from_jax, ignored=(("layout", None),))
_ONE_DEVICE_MESH = ("Mesh", (0,), (1,), ("x",), ("Auto",))
examples[sharding_constraint_p] = [
    Example("single-device", (((2, 3), "f32", "normal"),),
            lambda x: sharding_constraint(x, ("SingleDeviceSharding", 0, "device")), lambda x: x,
            linear=((True,),)),
    Example("named-one-device-mesh", (((4, 2), "f32", "normal"),),
            lambda x: sharding_constraint(x, ("NamedSharding", _ONE_DEVICE_MESH, ("x", None), "device")),
            lambda x: x, linear=((True,),)),
]


# the identity on values: complex values pass through it
complex_rules.add(copy_p)
