"""The combining scatters scatter-mul, scatter-min, scatter-max and
scatter-sub (jax/_src/lax/slicing.py, jax 0.10.2).

`x.at[idx].multiply(y)`, `.at[idx].min(y)`, `.at[idx].max(y)`,
`.at[idx].subtract(y)` and `jax.ops.segment_prod / segment_min /
segment_max` (graph neural nets' aggregations) bind them. They are
scatter-add's siblings (spec/prims_indexing.py): the same params, shape
rule, out-of-bounds modes and batching rule (imported from there); only the
combining operation differs. Each JVP rule has the shape of JAX's, so the
residuals a checkpoint saves are JAX's:

* scatter-sub is scatter-add with the updates negated: its JVP is JAX's
  `_scatter_addsub_jvp`, its transpose scatter-add's with the updates'
  cotangent negated (`_scatter_addsub_transpose_rule`);
* scatter-mul: `ad.defjvp` with a rule per operand; the updates' rule
  (`_scatter_mul_jvp_rhs`) needs unique_indices=True, as in JAX;
* scatter-min/max: `_scatter_extremal_jvp`, whose tangent shares the
  winners' tangents out equally among tied winners (the operand counting as
  one of them where it is retained); no transpose (not linear).

    >>> import spec
    >>> dn = ScatterDimensionNumbers((), (0,), (0,))
    >>> prog = spec.trace(lambda x, i, u: scatter_max(x, i, u, dn), spec.f32[2], spec.i32[3, 1], spec.f32[3])
    >>> import numpy as np
    >>> spec.evaluate(prog, np.float32([0, 0]), np.int32([[0], [1], [0]]), np.float32([2, -1, 3]))[0]
    array([3., 0.], dtype=float32)
    >>> [str(r) for r in spec.saved_residuals(prog)]     # as JAX's: the JVP's coefficients
    ['i32[3,1] from the argument i', 'f32[3] output of select_n', 'f32[3] output of div']
"""
from __future__ import annotations

import numpy as np

from spec.arrays import namespace
from spec.core import (Example, JaxFacts, PrimitiveError, Zero, batch_rules, bind, eval_rules,
                       examples, instantiate, is_undefined, jax_facts, jvp_rules, primitive,
                       shape_rules, transpose_rules, zeros_like_type)
from spec.prims_elementwise import _full_like, add, add_tangents, convert_element_type, div, eq, mul, neg
from spec.prims_indexing import (_LIN3, _SCATTER_PARAMS, ScatterDimensionNumbers, _gather_back,
                                 _ref_add_rows, _ref_add_windows, _scatter_add_from_jax,
                                 _scatter_add_transpose, _scatter_batcher, _scatter_bind, _scatter_dims,
                                 _scatter_emitter, _scatter_shape, _scatter_target, _scatter_where,
                                 _select, iota, rev, scatter_add, scatter_addsub_jvp)
from spec.prims_structural import reshape

scatter_mul_p = primitive("scatter-mul", _SCATTER_PARAMS)
scatter_min_p = primitive("scatter-min", _SCATTER_PARAMS)
scatter_max_p = primitive("scatter-max", _SCATTER_PARAMS)
scatter_sub_p = primitive("scatter-sub", _SCATTER_PARAMS)


# --------------------------------------------------------------------------
# shared by the four: binders, shape, evaluation, batching, JAX facts

def scatter_mul(operand, indices, updates, dimension_numbers, *, indices_are_sorted=False,
                unique_indices=False, mode=None):
    """lax.scatter_mul: out = operand, then out[start(b) + w] *= updates[b, w]
    (duplicates multiply in). Mode None is FILL_OR_DROP, as scatter_add's."""
    return _scatter_bind(scatter_mul_p, operand, indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def scatter_min(operand, indices, updates, dimension_numbers, *, indices_are_sorted=False,
                unique_indices=False, mode=None):
    """lax.scatter_min: out[start(b) + w] = min(out[start(b) + w], updates[b, w])."""
    return _scatter_bind(scatter_min_p, operand, indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def scatter_max(operand, indices, updates, dimension_numbers, *, indices_are_sorted=False,
                unique_indices=False, mode=None):
    """lax.scatter_max: out[start(b) + w] = max(out[start(b) + w], updates[b, w])."""
    return _scatter_bind(scatter_max_p, operand, indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def scatter_sub(operand, indices, updates, dimension_numbers, *, indices_are_sorted=False,
                unique_indices=False, mode=None):
    """lax.scatter_sub: out = operand, then out[start(b) + w] -= updates[b, w]."""
    return _scatter_bind(scatter_sub_p, operand, indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


# the combining operation: a numpy ufunc (numbers) and the namespace's name (sympy)
_COMBINE = {scatter_mul_p: "multiply", scatter_min_p: "minimum", scatter_max_p: "maximum",
            scatter_sub_p: "subtract"}


def _combine_eval(prim):
    def rule(operand, indices, updates, **params):
        """out = operand, then for each applied update u landing at position
        p, in index order: out[p] = op(out[p], u) (the windows applied are
        _scatter_where's, as for scatter-add). f16/bf16 combine in float32,
        rounded once; sympy values combine exactly (min/max decided as the
        namespace decides comparisons)."""
        xp, op = namespace(operand, updates), _COMBINE[prim]
        out = np.array(xp.compute(operand), copy=True)
        where, values = _scatter_where(operand, indices, updates, params)
        target, where = _scatter_target(out, where, values)
        values = xp.compute(values)
        if xp.name != "sympy":
            getattr(np, op).at(target, where, values)
            return xp.result(out, operand.dtype)
        combine = getattr(xp, op)
        for k, pos in enumerate(zip(*where)):
            target[pos] = np.asarray(combine(np.asarray([target[pos]], dtype=object),
                                             np.asarray([values[k]], dtype=object)), dtype=object)[0]
        return xp.result(out, operand.dtype)
    return rule


for _p in _COMBINE:
    shape_rules[_p] = _scatter_shape(_p)
    eval_rules[_p] = _combine_eval(_p)
    batch_rules[_p] = _scatter_batcher(_p)      # lax._scatter_batching_rule, as scatter-add's
    # lax.scatter_mul/min/max/sub bind update_jaxpr (lax.mul/min/max/sub) and no consts: dropped
    jax_facts[_p] = JaxFacts(_p.name, _scatter_emitter(_p.name.replace("-", "_")),
                             from_jax=_scatter_add_from_jax)


# ==========================================================================
# scatter-sub

jvp_rules[scatter_sub_p] = scatter_addsub_jvp(scatter_sub_p)   # _scatter_addsub_jvp, as scatter-add's


def _scatter_sub_transpose(t, operand, indices, updates, **params):
    """scatter-add's transpose, the updates' cotangent negated. JAX
    (_scatter_addsub_transpose_rule, shared with scatter-add):
      update_t = gather(t, indices, dimension_numbers=gather_dnums, slice_sizes=slice_sizes,
                        mode=mode, fill_value=0)
      if prim is scatter_sub_p:
        update_t = lax.neg(update_t)"""
    if is_undefined(indices):
        raise PrimitiveError(scatter_sub_p, "transpose with respect to the indices (not linear)")
    operand_t, _, update_t = _scatter_add_transpose(t, operand, indices, updates, **params)
    if update_t is not None and not isinstance(update_t, Zero):
        update_t = neg(update_t)
    return [operand_t, None, update_t]


transpose_rules[scatter_sub_p] = _scatter_sub_transpose


def _s(fn, window, inserted, to_operand, obatch=(), ibatch=(), **kw):
    """An example's scatter: fn(operand, indices, updates)."""
    return lambda x, i, u: fn(x, i, u, ScatterDimensionNumbers(window, inserted, to_operand, obatch, ibatch), **kw)


def _ref_rows(ufunc, x, i, u, keep=lambda r: True):
    """numpy: x, then ufunc.at on the rows i[k] (those kept) with u[k]."""
    out = np.array(x, copy=True)
    for k in range(len(i)):
        if keep(i[k]):
            out[i[k]] = ufunc(out[i[k]], u[k])
    return out


examples[scatter_sub_p] = [
    Example("at-subtract-duplicates",
            (((5, 3), "f32", "normal"), ((6, 1), "i32", "indices:3"), ((6, 3), "f32", "normal")),
            _s(scatter_sub, (1,), (0,), (0,)), lambda x, i, u: _ref_add_rows(x, i[:, 0], -u), linear=_LIN3),
    Example("drop-out-of-bounds",
            (((5, 3), "f32", "normal"), ((6, 1), "i32", "indices:8"), ((6, 3), "f32", "normal")),
            _s(scatter_sub, (1,), (0,), (0,), mode="fill"),
            lambda x, i, u: _ref_add_rows(x, i[:, 0], -u, keep=lambda r: r < 5), linear=_LIN3),
    Example("clip-windows", (((5, 3), "f32", "normal"), ((4, 1), "i32", "indices:8"), ((4, 2, 3), "f32", "normal")),
            _s(scatter_sub, (1, 2), (), (0,), mode="clip"),
            lambda x, i, u: _ref_add_windows(x, np.clip(i[:, 0], 0, 3), -u), linear=_LIN3),
]


# ==========================================================================
# scatter-mul

def _scatter_mul_jvp(primals, tangents, **params):
    """ad.defjvp(scatter_mul_p, rule_operand, None, _scatter_mul_jvp_rhs): the
    nonzero terms in order, summed with add_any. JAX:
      rule_operand = lambda g, x, i, y, **kw: scatter_mul_p.bind(g, i, y, **kw)
      def _scatter_mul_jvp_rhs(g, x, i, y, *, dimension_numbers, indices_are_sorted,
                               unique_indices, mode, **kw):
        if not unique_indices:
          raise NotImplementedError("scatter_mul gradients are only implemented if "
                                    "`unique_indices=True`")
        return lax.mul(x, scatter_add(ad_util.zeros_like_jaxval(x), i, g, dimension_numbers=...,
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode))"""
    (x, i, y), (g_x, _, g_y) = primals, tangents
    out = bind(scatter_mul_p, x, i, y, **params)
    terms = []
    if not isinstance(g_x, Zero):
        terms.append(bind(scatter_mul_p, g_x, i, y, **params))
    if not isinstance(g_y, Zero):
        if not params["unique_indices"]:
            # JAX's declared lack, word for word (as nextafter's): not a refusal of the spec's
            raise NotImplementedError("scatter_mul gradients are only implemented if `unique_indices=True`")
        terms.append(mul(x, scatter_add(zeros_like_type(x.type), i, g_y, _scatter_dims(params),
                                        indices_are_sorted=params["indices_are_sorted"],
                                        unique_indices=params["unique_indices"], mode=params["mode"])))
    return out, add_tangents(terms)


jvp_rules[scatter_mul_p] = _scatter_mul_jvp


def _scatter_mul_transpose(t, operand, indices, updates, **params):
    """Linear in the operand (the updates fixed): operand_t = scatter_mul(t,
    indices, updates). In the updates (the operand fixed, unique_indices
    only): update_t = the windows of t * operand. JAX (_scatter_mul_transpose_rule):
      if ad.is_undefined_primal(operand):
        operand_t = scatter_mul(t, indices, updates, dimension_numbers=..., mode=mode, ...)
      if ad.is_undefined_primal(updates):
        if not unique_indices:
          raise NotImplementedError("scatter_mul gradients are only implemented if ...")
        update_t = gather(lax.mul(t, operand), indices, dimension_numbers=gather_dnums,
                          slice_sizes=slice_sizes, mode=mode, fill_value=0)"""
    if is_undefined(indices):
        raise PrimitiveError(scatter_mul_p, "transpose with respect to the indices (not linear)")
    if is_undefined(operand) and is_undefined(updates):
        raise PrimitiveError(scatter_mul_p, "transpose with respect to both operand and updates "
                                            "(bilinear: linear in one of them only)")
    if is_undefined(updates) and not params["unique_indices"]:
        raise NotImplementedError("scatter_mul gradients are only implemented if `unique_indices=True`")
    if isinstance(t, Zero):
        return [Zero(operand.type) if is_undefined(operand) else None, None,
                Zero(updates.type) if is_undefined(updates) else None]
    if is_undefined(operand):
        return [scatter_mul(t, indices, updates, _scatter_dims(params), mode=params["mode"],
                            indices_are_sorted=params["indices_are_sorted"],
                            unique_indices=params["unique_indices"]), None, None]
    return [None, None, _gather_back(mul(t, operand), indices, updates.type.shape, params,
                                     mode=params["mode"], fill_value=0)]


transpose_rules[scatter_mul_p] = _scatter_mul_transpose


def _mul_unique(x, u):
    """x.at[perm].multiply(u) with unique indices (a reversed iota)."""
    n = u.shape[0]
    i = reshape(rev(iota(np.int32, (n,)), (0,)), (n, 1))
    return scatter_mul(x, i, u, ScatterDimensionNumbers((1,), (0,), (0,)), unique_indices=True)


def _segment_prod(x, i, k):
    """jax.ops.segment_prod's scatter onto x, its (duplicate) factors from
    integers: they have no tangent, so the JVP needs no unique indices."""
    return scatter_mul(x, i, convert_element_type(k, x.dtype), ScatterDimensionNumbers((), (0,), (0,)))


examples[scatter_mul_p] = [
    Example("at-multiply-unique", (((5, 3), "f32", "normal"), ((3, 3), "f32", "normal")), _mul_unique,
            lambda x, u: _ref_rows(np.multiply, x, [2, 1, 0], u), linear=((True, False),)),
    Example("segment-prod-int-factors",
            (((5,), "f32", "normal"), ((6, 1), "i32", "indices:7"), ((6,), "i32", "ints:-2:3")),
            _segment_prod, lambda x, i, k: _ref_rows(np.multiply, x, i[:, 0], k, keep=lambda r: r < 5),
            linear=((True, False, False),)),
    Example("batching-dims-unique",
            (((4, 5), "f32", "normal"), ((4, 1, 1), "i32", "indices:5"), ((4, 1), "f32", "normal")),
            _s(scatter_mul, (), (1,), (1,), (0,), (0,), unique_indices=True, mode="promise_in_bounds"),
            lambda x, i, u: np.stack([_ref_rows(np.multiply, x[b], i[b, :, 0], u[b]) for b in range(4)]),
            linear=((True, False, False),)),
]


# ==========================================================================
# scatter-min and scatter-max

def _scatter_extremal_jvp(prim):
    def rule(primals, tangents, **params):
        """JAX (_scatter_extremal_jvp): of the values contending for a
        position (the retained operand and the winning updates, all equal to
        the result), each gets an equal share of the tangent. Per update b:
        n_b = the number of winning updates at its position, r_b = the number
        of updates landing there, retained_b = the operand is one of the
        winners; then the tangent is g_operand scatter-added with
          g_operand[pos_b] * ((-1 + [retained_b] / (n_b + 1)) / r_b)
          + g_updates[b] * [won_b] / (n_b + [retained_b]).
        See _extremal_coefficients for JAX's code, op for op."""
        (operand, indices, updates), (g_operand, _, g_updates) = primals, tangents
        val_out = bind(prim, operand, indices, updates, **params)
        if isinstance(g_operand, Zero) and isinstance(g_updates, Zero):
            return val_out, None
        g_operand, g_updates = instantiate(g_operand), instantiate(g_updates)
        dn = _scatter_dims(params)
        operand_coef, updates_coef = _extremal_coefficients(operand, indices, updates, val_out, params)
        target_tangents = _gather_back(g_operand, indices, updates.shape, params)
        tangent_updates = add(mul(target_tangents, operand_coef), mul(g_updates, updates_coef))
        return val_out, scatter_add(g_operand, indices, tangent_updates, dn,
                                    indices_are_sorted=params["indices_are_sorted"],
                                    unique_indices=params["unique_indices"], mode=params["mode"])
    return rule


def _extremal_coefficients(operand, indices, updates, val_out, params):
    """(operand_coef, updates_coef) of _scatter_extremal_jvp, op for op. JAX:
      initial_vals = gather(operand, indices, gather_dnums, slice_sizes)
      target_vals = gather(val_out, indices, gather_dnums, slice_sizes)
      successful_updates = (updates == target_vals)
      retained_values = (initial_vals == target_vals)
      num_updates = gather(scatter_add(lax._zeros(operand), indices,
          lax.select(successful_updates, lax._ones(updates), lax._zeros(updates)), scatter_dnums), ...)
      num_refs = gather(scatter_add(lax._zeros(operand), indices, lax._ones(updates), scatter_dnums), ...)
      updates_normalizer = lax.select(retained_values, 1.0 / (num_updates + 1), 1.0 / num_updates)
      updates_coef = lax.select(successful_updates, updates_normalizer, lax._zeros(updates))
      operand_normalizer = lax.select(retained_values, 1.0 / (num_updates + 1), lax._zeros(num_updates))
      operand_coef = (-1.0 + operand_normalizer) / num_refs"""
    dn, shape = _scatter_dims(params), updates.shape
    initial_vals = _gather_back(operand, indices, shape, params)
    target_vals = _gather_back(val_out, indices, shape, params)
    successful_updates = eq(updates, target_vals)
    retained_values = eq(initial_vals, target_vals)
    zeros = _full_like(operand, 0)
    won = _select(successful_updates, _full_like(updates, 1), _full_like(updates, 0))
    num_updates = _gather_back(scatter_add(zeros, indices, won, dn), indices, shape, params)
    zeros = _full_like(operand, 0)        # lax._zeros(operand) again: JAX makes a second one
    num_refs = _gather_back(scatter_add(zeros, indices, _full_like(updates, 1), dn), indices, shape, params)
    updates_normalizer = _select(retained_values, div(1.0, add(num_updates, 1.0)), div(1.0, num_updates))
    updates_coef = _select(successful_updates, updates_normalizer, _full_like(updates, 0))
    operand_normalizer = _select(retained_values, div(1.0, add(num_updates, 1.0)), _full_like(num_updates, 0))
    operand_coef = div(add(-1.0, operand_normalizer), num_refs)
    return operand_coef, updates_coef


jvp_rules[scatter_min_p] = _scatter_extremal_jvp(scatter_min_p)
jvp_rules[scatter_max_p] = _scatter_extremal_jvp(scatter_max_p)
# no transpose rules: JAX has none (scatter-min/max are not linear)


# operand on grid 0, updates on grid 0.25: the operand never ties an
# update; updates at one position differ by the grid's noise (no ties)
_X53, _U63 = ((5, 3), "f32", "grid:0"), ((6, 3), "f32", "grid:0.25")
examples[scatter_max_p] = [
    Example("at-max-duplicates", (_X53, ((6, 1), "i32", "indices:3"), _U63),
            _s(scatter_max, (1,), (0,), (0,)), lambda x, i, u: _ref_rows(np.maximum, x, i[:, 0], u)),
    Example("drop-out-of-bounds", (_X53, ((6, 1), "i32", "indices:8"), _U63),
            _s(scatter_max, (1,), (0,), (0,), mode="fill"),
            lambda x, i, u: _ref_rows(np.maximum, x, i[:, 0], u, keep=lambda r: r < 5)),
    # in bounds: JAX's JVP counts the updates with FILL_OR_DROP scatter-adds,
    # so a clamped window counts 0 refs and its tangent is NaN (as in JAX)
    Example("clip-windows-in-bounds", (_X53, ((4, 1), "i32", "indices:4"), ((4, 2, 3), "f32", "grid:0.25")),
            _s(scatter_max, (1, 2), (), (0,), mode="clip"),
            lambda x, i, u: _ref_windows(np.maximum, x, i[:, 0], u)),
]
examples[scatter_min_p] = [
    Example("at-min-duplicates", (_X53, ((6, 1), "i32", "indices:3"), _U63),
            _s(scatter_min, (1,), (0,), (0,)), lambda x, i, u: _ref_rows(np.minimum, x, i[:, 0], u)),
    Example("batching-dims", (((4, 5), "f32", "grid:0"), ((4, 2, 1), "i32", "indices:5"), ((4, 2), "f32", "grid:0.25")),
            _s(scatter_min, (), (1,), (1,), (0,), (0,), mode="promise_in_bounds"),
            lambda x, i, u: np.stack([_ref_rows(np.minimum, x[b], i[b, :, 0], u[b]) for b in range(4)])),
]


def _ref_windows(ufunc, x, starts, u):
    """numpy: x, then windows x[s : s + len(w)] combined with w (ufunc)."""
    out = np.array(x, copy=True)
    for s, w in zip(starts, u):
        out[s:s + len(w)] = ufunc(out[s:s + len(w)], w)
    return out
