"""Ragged matrix products (jax/_src/lax/lax.py): ragged_dot_general.

`lax.ragged_dot(lhs [m, k], rhs [g, k, n], group_sizes [g])` multiplies
the rows of lhs in group j, rows start_j <= i < end_j with end =
cumsum(group_sizes), by rhs[j]; rows past the last group give zeros (a
mixture-of-experts layer's product of tokens sorted by expert).
ragged_dot_general generalises it as dot_general generalises a matrix
product, in three modes by where lhs's one ragged dimension is:

    RAGGED_NONCONTRACTING  [b,m,k] [g,b,k,n] [b,g] -> [b,m,n]    ragged_dot
    RAGGED_CONTRACTING     [b,m,k] [b,k,n]   [b,g] -> [g,b,m,n]  its transpose for rhs
    RAGGED_BATCH           [b,m,k] [b,k,n]   [g]   -> [b,m,n]    the group sizes unused

It is bilinear in (lhs, rhs); its JVP rule is JAX's, which makes a zero
tangent's term an array of zeros (`_zeros(primal_out)`) and adds both
terms, and its transpose rule is JAX's, for the non-contracting mode
only (the others raise JAX's NotImplementedError). `dots_saveable` does
not save it (jax.checkpoint_policies names dot_general alone).

    >>> import spec
    >>> prog = spec.trace(lambda x, w, gs: ragged_dot(x, w, gs), spec.f32[6, 3], spec.f32[2, 3, 4],
    ...                   spec.ArrayType((2,), "int32"))
    >>> print(prog.out_types[0])
    f32[6,4]
"""
from __future__ import annotations

import enum

import numpy as np

from spec.core import (Example, JaxFacts, PrimitiveError, Zero, batch_rules, bind, cost_rules, eval_rules,
                       examples, is_undefined, jax_facts, jvp_rules, primitive, shape_rules, transpose_rules)
from spec.batching import AxesRefused
from spec.ir import ArrayType, canonical_dtype
from spec.prims_elementwise import _full_like, add, convert_element_type
from spec.prims_structural import (PRECISION_TO_JAX, _dot_general_dtype, _dot_general_eval, _free_dims,
                                   _ranges_like, canonicalize_precision, check_precision, precision_from_jax,
                                   transpose)


class RaggedDotMode(enum.Enum):
    """lax.RaggedDotMode: where lhs's ragged dimension is."""
    RAGGED_NONCONTRACTING = 1
    RAGGED_CONTRACTING = 2
    RAGGED_BATCH = 3


ragged_dot_general_p = primitive("ragged_dot_general",
                                 ["ragged_dot_dimension_numbers", "precision", "preferred_element_type"])

# ragged_dot_dimension_numbers: lax.RaggedDotDimensionNumbers as plain data,
# (dot_dimension_numbers, lhs_ragged_dimensions, rhs_group_dimensions)
BASIC = ((((1,), (1,)), ((), ())), (0,), (0,))      # lax._BASIC_RAGGED_DOT_DIMENSION_NUMBERS


def _canonical_dims(dims) -> tuple:
    ((lc, rc), (lb, rb)), ragged, group = dims
    t = lambda ds: tuple(int(d) for d in ds)       # noqa: E731
    return ((t(lc), t(rc)), (t(lb), t(rb))), t(ragged), t(group)


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None):
    """lax.ragged_dot_general (group_offset None: JAX implements no other)."""
    pet = None if preferred_element_type is None else canonical_dtype(preferred_element_type)
    return bind(ragged_dot_general_p, lhs, rhs, group_sizes,
                ragged_dot_dimension_numbers=_canonical_dims(ragged_dot_dimension_numbers),
                precision=canonicalize_precision(precision), preferred_element_type=pet)


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None):
    """lax.ragged_dot: lhs [m, k], rhs [g, k, n], group_sizes [g] -> [m, n]."""
    return ragged_dot_general(lhs, rhs, group_sizes, BASIC, precision, preferred_element_type)


def mode_and_dim(lhs_ndim: int, dims) -> tuple[RaggedDotMode, int]:
    """lax._ragged_dot_mode_and_dim."""
    ((lc, _), (lb, _)), ragged, _ = dims
    (d,) = ragged
    if d in lc:
        return RaggedDotMode.RAGGED_CONTRACTING, d
    if d in lb:
        return RaggedDotMode.RAGGED_BATCH, d
    return RaggedDotMode.RAGGED_NONCONTRACTING, d


def _prefix_dims(mode, ndim, ragged_dim, batch, contract) -> list:
    """lax._ragged_dot_prefix_dims: the lhs dims group_sizes of rank > 1
    runs along, before its last (group) axis."""
    batch, contract = list(batch), list(contract)
    if mode is RaggedDotMode.RAGGED_NONCONTRACTING:
        kept = _free_dims(ndim, contract, batch)
        return batch + kept[:kept.index(ragged_dim)]
    if mode is RaggedDotMode.RAGGED_CONTRACTING:
        return batch + contract[:contract.index(ragged_dim)]
    return batch[:batch.index(ragged_dim)]


def _ragged_dot_shape(lhs, rhs, group_sizes, *, ragged_dot_dimension_numbers, precision, preferred_element_type):
    """lax._ragged_dot_general_shape_rule and _dtype_rule."""
    p = ragged_dot_general_p
    dims = ragged_dot_dimension_numbers
    ((lc, rc), (lb, rb)), ragged, group = dims
    check_precision(p, precision)
    if len(ragged) != 1 or not 0 <= ragged[0] < lhs.ndim:
        raise PrimitiveError(p, f"expects exactly one lhs ragged dimension of {lhs}, got {ragged}")
    mode, ragged_dim = mode_and_dim(lhs.ndim, dims)
    if not np.issubdtype(group_sizes.dtype, np.integer) or group_sizes.ndim == 0:
        raise PrimitiveError(p, f"group_sizes must be integers of rank >= 1, got {group_sizes}")
    if group_sizes.ndim != 1:
        want = tuple(lhs.shape[i] for i in _prefix_dims(mode, lhs.ndim, ragged_dim, lb, lc)) + group_sizes.shape[-1:]
        if tuple(group_sizes.shape) != want:
            raise PrimitiveError(p, f"expected group_sizes to have shape {want}, got {group_sizes.shape}")
    g = group_sizes.shape[-1]
    if mode is RaggedDotMode.RAGGED_NONCONTRACTING:
        if len(group) != 1 or group[0] in rb or group[0] in rc or not 0 <= group[0] < rhs.ndim \
                or rhs.shape[group[0]] != g:
            raise PrimitiveError(p, f"the non-contracting mode needs one rhs group dimension of size {g}, "
                                    f"distinct from contracting and batch dims, got {group} of {rhs}")
    elif group:
        raise PrimitiveError(p, f"the {mode.name} mode takes no rhs group dimension, got {group}")
    for ds, t in ((lc + lb, lhs), (rc + rb + group, rhs)):
        if len(set(ds)) != len(ds) or any(not 0 <= d < t.ndim for d in ds):
            raise PrimitiveError(p, f"dims {ds} must be distinct dims of {t}")
    if len(lc) != len(rc) or len(lb) != len(rb) or any(
            lhs.shape[a] != rhs.shape[b] for a, b in list(zip(lc, rc)) + list(zip(lb, rb))):
        raise PrimitiveError(p, f"contracting and batch dims of {lhs} and {rhs} must pair up: {dims[0]}")
    shape = ([lhs.shape[i] for i in lb] + [lhs.shape[i] for i in _free_dims(lhs.ndim, lc, lb)]
             + [rhs.shape[i] for i in range(rhs.ndim) if i not in rc + rb + group])
    if mode is RaggedDotMode.RAGGED_CONTRACTING:
        shape = [g] + shape
    return [ArrayType(shape, _dot_general_dtype(lhs.dtype, rhs.dtype, preferred_element_type, precision))]


def _dense(x, dim, group_sizes, prefix):
    """lax's `expand` in _ragged_dot_general_impl: [g, *x.shape], the j-th
    slice x where x's `dim` index is in group j (start_j <= i < end_j, end =
    cumsum(group_sizes) along the `prefix` dims of x that group_sizes runs
    along), zero elsewhere."""
    ends = np.cumsum(np.asarray(group_sizes, np.int64), axis=-1)
    starts = ends - np.asarray(group_sizes, np.int64)
    order = np.argsort(prefix)
    # [g, prefix dims in x's order], then a size-1 axis for each other dim of x
    put = lambda a: np.moveaxis(a, -1, 0).transpose([0, *(1 + order)]).reshape(   # noqa: E731
        (a.shape[-1],) + tuple(x.shape[d] if d in prefix else 1 for d in range(x.ndim)))
    at = np.arange(x.shape[dim]).reshape([-1 if d == dim else 1 for d in range(x.ndim)])
    mask = (put(starts) <= at) & (at < put(ends))
    zero = 0 if x.dtype == object else np.zeros((), x.dtype)
    return np.where(mask, x[None], zero)


def _ragged_dot_eval(lhs, rhs, group_sizes, *, ragged_dot_dimension_numbers, precision, preferred_element_type):
    """lax._ragged_dot_general_impl: the ragged operand made dense, one
    slice per group (`_dense`), then a dot_general that contracts (or, in
    the contracting mode, batches) over the groups."""
    dims = ragged_dot_dimension_numbers
    ((lc, rc), (lb, rb)), _, group = dims
    mode, ragged_dim = mode_and_dim(lhs.ndim, dims)
    incr = lambda ds: tuple(d + 1 for d in ds)     # noqa: E731
    gs = np.asarray(group_sizes)
    if gs.ndim == 1:
        prefix = _prefix_dims(mode, lhs.ndim, ragged_dim, lb, lc)
        gs = np.broadcast_to(gs, tuple(lhs.shape[i] for i in prefix) + gs.shape)
    dot = lambda x, y, dn: _dot_general_eval(x, y, dimension_numbers=dn, precision=precision,   # noqa: E731
                                             preferred_element_type=preferred_element_type)
    l_prefix = _prefix_dims(mode, lhs.ndim, ragged_dim, lb, lc)
    if mode is RaggedDotMode.RAGGED_NONCONTRACTING:
        return dot(_dense(lhs, ragged_dim, gs, l_prefix), rhs, ((incr(lc) + (0,), rc + group), (incr(lb), rb)))
    if mode is RaggedDotMode.RAGGED_CONTRACTING:
        rhs_ragged = rc[lc.index(ragged_dim)]
        r_prefix = _prefix_dims(mode, rhs.ndim, rhs_ragged, rb, rc)
        return dot(_dense(lhs, ragged_dim, gs, l_prefix), _dense(rhs, rhs_ragged, gs, r_prefix),
                   ((incr(lc), incr(rc)), ((0,) + incr(lb), (0,) + incr(rb))))
    return dot(lhs, rhs, dims[0])


def _ragged_dot_jvp(primals, tangents, *, ragged_dot_dimension_numbers, precision, preferred_element_type):
    """lax._ragged_dot_general_jvp_rule: both terms, a zero tangent's as
    `_zeros(primal_out)`, added (no tangent for the group sizes)."""
    (x, y, gs), (dx, dy, _) = primals, tangents
    params = dict(ragged_dot_dimension_numbers=ragged_dot_dimension_numbers, precision=precision,
                  preferred_element_type=preferred_element_type)
    out = bind(ragged_dot_general_p, x, y, gs, **params)
    dx_out = _full_like(out, 0) if isinstance(dx, Zero) else bind(ragged_dot_general_p, dx, y, gs, **params)
    dy_out = _full_like(out, 0) if isinstance(dy, Zero) else bind(ragged_dot_general_p, x, dy, gs, **params)
    return out, add(dx_out, dy_out)


def _grad_dims(which: str, mode, x_ndim, y_ndim, dims):
    """lax._ragged_dot_general_transpose_rule's grad_x_dims / grad_y_dims:
    (the transposed product's dimension numbers, the axes to put back)."""
    ((x_contract, y_contract), (x_batch, y_batch)), ragged, y_group = dims
    if mode is not RaggedDotMode.RAGGED_NONCONTRACTING:
        raise NotImplementedError(f"Unimplemented grad_{which}_dims for ragged dot general in mode {mode.name}.")
    (lhs_ragged_dim,) = ragged
    x_kept = _free_dims(x_ndim, x_contract, x_batch)
    y_kept = [i for i in range(y_ndim) if i not in y_contract + y_batch + y_group]
    if which == "x":
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
        new = (((ans_y, tuple(y_kept)), (ans_batch, y_batch)), (len(x_batch) + x_kept.index(lhs_ragged_dim),),
               y_group)
        sorted_by_other = [int(a) for a in np.take(x_contract, np.argsort(y_contract))] if x_contract else []
        return new, list(x_batch) + x_kept + sorted_by_other
    ans_batch, ans_x, _ = _ranges_like(x_batch, x_kept, y_kept)
    new = (((tuple(x_kept), ans_x), (x_batch, ans_batch)), (lhs_ragged_dim,), ())
    sorted_by_other = [int(a) for a in np.take(y_contract, np.argsort(x_contract))] if y_contract else []
    return new, list(y_group) + list(y_batch) + sorted_by_other + y_kept


def _ragged_dot_transpose(ct, x, y, group_sizes, *, ragged_dot_dimension_numbers, precision,
                          preferred_element_type):
    """lax._ragged_dot_general_transpose_rule: the cotangent of the linear
    operand is a ragged product of the cotangent with the other one (for
    rhs, in the contracting mode), its axes put back, converted to the
    operand's dtype."""
    dims = ragged_dot_dimension_numbers
    x_type = x.type if is_undefined(x) else ArrayType(x.shape, x.dtype)
    y_type = y.type if is_undefined(y) else ArrayType(y.shape, y.dtype)
    mode, _ = mode_and_dim(x_type.ndim, dims)

    def grad(lhs, rhs, which, aval):
        if isinstance(ct, Zero):
            return Zero(aval)
        new, unsorted_axes = _grad_dims(which, mode, x_type.ndim, y_type.ndim, dims)
        out = ragged_dot_general(lhs, rhs, group_sizes, new, precision, preferred_element_type)
        out = transpose(out, tuple(int(a) for a in np.argsort(unsorted_axes)))
        return out if out.dtype == aval.dtype else convert_element_type(out, aval.dtype)
    x_bar = None if is_undefined(y) else grad(ct, y, "x", x_type)
    y_bar = None if is_undefined(x) else grad(x, ct, "y", y_type)
    return [x_bar, y_bar, None]


class RaggedDotAxesRefused(AxesRefused, NotImplementedError):
    """JAX's refusal (`_ragged_dot_batch_unpack_dims`): not every operand batched at axis 0."""


def _ragged_dot_batch(args, dims, *, ragged_dot_dimension_numbers, precision, preferred_element_type):
    """lax._ragged_dot_general_batch_rule: all three operands batched at
    axis 0 (else JAX's NotImplementedError), the batch axis a new leading
    dot batch dim of both (`_dot_general_batch_dim_nums`), the group sizes
    gaining it as a prefix axis."""
    if not all(d == 0 for d in dims):
        raise RaggedDotAxesRefused("ragged_dot vmap over any dim but 0 - NYI")
    lhs, rhs, gs = args
    ((lc, rc), (lb, rb)), ragged, group = ragged_dot_dimension_numbers
    bump = lambda ds: tuple(d + 1 for d in ds)     # noqa: E731   (the batch axis, 0, comes first)
    new = (((bump(lc), bump(rc)), ((0,) + bump(lb), (0,) + bump(rb))), bump(ragged), bump(group))
    out_dim = 1 if mode_and_dim(lhs.ndim - 1, ragged_dot_dimension_numbers)[0] is RaggedDotMode.RAGGED_CONTRACTING \
        else 0
    return ragged_dot_general(lhs, rhs, gs, new, precision, preferred_element_type), out_dim


def _ragged_dot_cost(lhs, rhs, group_sizes, *, ragged_dot_dimension_numbers, **_):
    """The dense product's: 2 * (lhs size) * (rhs free size) * (groups) in
    the non-contracting mode; 2 * (lhs size) * (rhs free) otherwise (over
    the groups, in the contracting mode)."""
    ((lc, rc), (lb, rb)), _, group = ragged_dot_dimension_numbers
    rhs_free = int(np.prod([rhs.shape[i] for i in range(rhs.ndim) if i not in rc + rb + group], dtype=np.int64))
    return 2 * lhs.size * rhs_free * int(group_sizes.shape[-1])


shape_rules[ragged_dot_general_p] = _ragged_dot_shape
eval_rules[ragged_dot_general_p] = _ragged_dot_eval
jvp_rules[ragged_dot_general_p] = _ragged_dot_jvp
transpose_rules[ragged_dot_general_p] = _ragged_dot_transpose
batch_rules[ragged_dot_general_p] = _ragged_dot_batch
cost_rules[ragged_dot_general_p] = _ragged_dot_cost


def _ragged_dot_from_jax(params: dict) -> dict:
    """lax.RaggedDotDimensionNumbers (read by attribute) and the precision as plain data."""
    rd = params["ragged_dot_dimension_numbers"]
    return {**params, "ragged_dot_dimension_numbers": _canonical_dims(
                (rd.dot_dimension_numbers, rd.lhs_ragged_dimensions, rd.rhs_group_dimensions)),
            "precision": precision_from_jax(params.get("precision"))}


jax_facts[ragged_dot_general_p] = JaxFacts(
    "ragged_dot_general",
    "lambda x, y, gs, ragged_dot_dimension_numbers, precision, preferred_element_type: lax.ragged_dot_general("
    "x, y, gs, lax.RaggedDotDimensionNumbers(*ragged_dot_dimension_numbers), "
    f"precision={PRECISION_TO_JAX}(precision), preferred_element_type=preferred_element_type)",
    from_jax=_ragged_dot_from_jax, ignored=(("group_offset", None), ("out_sharding", None)),
    transpose_rejects_zero_cotangent=True)


# --------------------------------------------------------------------------
# examples: references are loops over the groups' rows (numpy, float64)

def _bounds(group_sizes):
    ends = np.cumsum(group_sizes)
    return list(zip(ends - group_sizes, ends))


def _ragged_dot_reference(x, w, gs):
    out = np.zeros((x.shape[0], w.shape[2]))
    for j, (a, b) in enumerate(_bounds(gs)):
        out[a:b] = x[a:b] @ w[j]
    return out


def _batched_reference(x, w, gs):
    """lhs [b, m, k], rhs [g, b, k, n], group_sizes [b, g]."""
    return np.stack([_ragged_dot_reference(x[i], w[:, i], gs[i]) for i in range(x.shape[0])])


def _contracting_reference(x, y, gs):
    """lhs [m, k] ragged along k, rhs [k, n] -> [g, m, n]: group j's k's only."""
    return np.stack([x[:, a:b] @ y[a:b] for a, b in _bounds(gs)])


_N = lambda *shape: (shape, "f32", "normal")        # noqa: E731
_LINEAR = ((True, False, False), (False, True, False))
examples[ragged_dot_general_p] = [
    # 3 groups of 0-2 rows each: rows past the last group are zeros
    Example("ragged_dot", (_N(6, 3), _N(3, 3, 2), ((3,), "i32", "ints:0:3")),
            lambda x, w, gs: ragged_dot(x, w, gs), _ragged_dot_reference, linear=_LINEAR, cond=3, abs_scale=True),
    Example("batched", (_N(2, 4, 3), _N(2, 2, 3, 2), ((2, 2), "i32", "ints:0:3")),
            lambda x, w, gs: ragged_dot_general(x, w, gs, ((((2,), (2,)), ((0,), (1,))), (1,), (0,))),
            _batched_reference, linear=_LINEAR, cond=3, abs_scale=True),
    # the contracting mode (the non-contracting one's transpose for rhs):
    # no transpose of its own in JAX
    Example("ragged-contracting", (_N(2, 5), _N(5, 3), ((2,), "i32", "ints:0:3")),
            lambda x, y, gs: ragged_dot_general(x, y, gs, ((((1,), (0,)), ((), ())), (1,), ())),
            _contracting_reference, cond=5, abs_scale=True),
]
